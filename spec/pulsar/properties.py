"""Pulsar's transaction properties, each with the verdict its source leads us to expect.

Safety (``always``, each with a ``sometimes`` partner)
    * P-S1 ``delivered_only_if_committed``: holds: what a consumer is delivered belongs to a transaction
      the coordinator decided to commit.
    * P-S3 ``decision_never_revoked``: **fails** ([derived], RULES §2.9 item 4): a send of a committed
      transaction delivered after its commit marker makes it ongoing again, and the next end on that
      partition aborts it by low watermark: commit marker and aborted set for one transaction.
    * P-S4 ``acks_only_with_commit``: holds: the input is acked for good only by a committed transaction.
    * P-S7 ``client_outcome_matches_decision``: holds: COMMITTED/ABORTED at the client is the decision.
    * P-S7 (strong) ``client_error_only_if_not_committed``: **fails** (#19629): a retried END of a
      committed transaction finds it forgotten (``TransactionNotFound``) and the client goes to ERROR.
    * ``end_txn_answers_its_outcome``: **fails** (#19629, PIP-254): a retried COMMIT of a committed
      transaction is answered ``TransactionNotFound``; the same, seen at the coordinator.
    * P-S8 ``no_duplicate_committed``: **fails** without deduplication (the default,
      ``brokerDeduplicationEnabled=false``): a retransmitted send is stored twice; holds with ``dedup``.

    P-S2 (reads below ``maxReadPosition``) holds by construction here, since the model derives
    ``maxReadPosition`` from the ongoing transactions as ``TopicTransactionBuffer`` maintains it; P-S5
    (unique, increasing TxnIDs) follows from ``MLTransactionSequenceIdGenerator``, which the model's
    ``next_seq`` is.

Liveness (``leads_to``, under weak fairness of deliveries and the coordinator's timer)
    * P-L1 ``open_transactions_end``: holds (the timeout aborts).
    * P-L2 ``ending_transactions_complete``: holds (markers are retried without bound; recovery re-drives).
    * P-L3 ``max_read_position_passes_ended``: **fails** with a late send and no later transaction ending
      on that partition: the partition stays blocked (RULES §2.9 items 2 and 4).
"""

from __future__ import annotations

from collections import Counter

from txnspec.checker.model import Property
from txnspec.spec.pulsar import buffer as buf
from txnspec.spec.pulsar.system import ClientState, PulsarState


def delivered_only_if_committed(state: PulsarState) -> bool:
    return all(state.ghost.decision(txn) == "COMMIT"
               for _, tb in state.buffers for _, txn, _ in buf.readable(tb))


def decision_never_revoked(state: PulsarState) -> bool:
    committed = {txn for _, tb in state.buffers for kind, txn, _ in tb.entries if kind == "commit"}
    aborted = {txn for _, tb in state.buffers for txn in tb.aborted}
    return not committed & aborted


def acks_only_with_commit(state: PulsarState) -> bool:
    sub = state.subscription
    return not sub.deleted or (sub.acked_by is not None and state.ghost.decision(sub.acked_by) == "COMMIT")


def client_outcome_matches_decision(state: PulsarState) -> bool:
    for c in state.clients:
        if c.txn is None:
            continue
        if c.state is ClientState.COMMITTED and state.ghost.decision(c.txn) != "COMMIT":
            return False
        if c.state is ClientState.ABORTED and state.ghost.decision(c.txn) != "ABORT":
            return False
    return True


def client_error_only_if_not_committed(state: PulsarState) -> bool:
    return not any(c.state is ClientState.ERROR and c.txn is not None and state.ghost.decision(c.txn) == "COMMIT"
                   for c in state.clients)


def end_txn_answers_its_outcome(state: PulsarState) -> bool:
    return not state.ghost.end_error_after_decision


def no_duplicate_committed(state: PulsarState) -> bool:
    delivered = Counter((txn, msg) for _, tb in state.buffers for _, txn, msg in buf.readable(tb))
    return all(n == 1 for n in delivered.values())


# --- partners ---------------------------------------------------------------------------------------

def some_message_delivered(state: PulsarState) -> bool:
    return any(buf.readable(tb) for _, tb in state.buffers)


def some_transaction_aborted_on_a_partition(state: PulsarState) -> bool:
    return any(tb.aborted for _, tb in state.buffers)


def input_acked(state: PulsarState) -> bool:
    return state.subscription.deleted


def some_client_committed(state: PulsarState) -> bool:
    return any(c.state is ClientState.COMMITTED for c in state.clients)


# --- liveness ---------------------------------------------------------------------------------------

def some_transaction_open(state: PulsarState) -> bool:
    return any(m.status.value == "OPEN" for _, m in state.tc.txns)


def no_transaction_open(state: PulsarState) -> bool:
    return not some_transaction_open(state)


def some_transaction_ending(state: PulsarState) -> bool:
    return any(m.status.value in ("COMMITTING", "ABORTING") for _, m in state.tc.txns)


def no_transaction_ending(state: PulsarState) -> bool:
    return not some_transaction_ending(state)


def some_partition_blocked_by_an_ended_transaction(state: PulsarState) -> bool:
    open_txns = {t for t, m in state.tc.txns if m.status.value == "OPEN"}
    return any(txn not in open_txns for _, tb in state.buffers for txn, _ in tb.ongoing)


def no_partition_blocked_by_an_ended_transaction(state: PulsarState) -> bool:
    return not some_partition_blocked_by_an_ended_transaction(state)


def properties(ack_input: bool) -> list[Property[PulsarState]]:
    props: list[Property[PulsarState]] = [
        Property.always("delivered_only_if_committed", delivered_only_if_committed, partner="some_message_delivered",
                        description="P-S1: a consumer is delivered only messages of committed transactions."),
        Property.always("decision_never_revoked", decision_never_revoked,
                        partner="some_transaction_aborted_on_a_partition",
                        description="P-S3: no transaction has a commit marker and is in an aborted set "
                                    "(expected to fail: a late send, then a low-watermark abort)."),
        Property.always("client_outcome_matches_decision", client_outcome_matches_decision,
                        partner="some_client_committed",
                        description="P-S7: a client told COMMITTED (ABORTED) is right."),
        Property.always("client_error_only_if_not_committed", client_error_only_if_not_committed,
                        partner="some_client_committed",
                        description="P-S7 strong: a client in ERROR did not commit (expected to fail, #19629)."),
        Property.always("end_txn_answers_its_outcome", end_txn_answers_its_outcome, partner="some_client_committed",
                        description="A retried COMMIT of a committed transaction is answered with success "
                                    "(expected to fail, #19629)."),
        Property.always("no_duplicate_committed", no_duplicate_committed, partner="some_message_delivered",
                        description="P-S8: each message a client sent once is delivered once."),
        Property.sometimes("some_message_delivered", some_message_delivered,
                           description="A consumer was delivered some transactional message."),
        Property.sometimes("some_transaction_aborted_on_a_partition", some_transaction_aborted_on_a_partition,
                           description="Some partition recorded an aborted transaction."),
        Property.sometimes("some_client_committed", some_client_committed,
                           description="Some client's commit succeeded."),
        Property.leads_to("open_transactions_end", some_transaction_open, no_transaction_open,
                          description="P-L1: every OPEN transaction eventually ends (commit, abort or timeout)."),
        Property.leads_to("ending_transactions_complete", some_transaction_ending, no_transaction_ending,
                          description="P-L2: COMMITTING/ABORTING eventually becomes COMMITTED/ABORTED."),
        Property.leads_to("max_read_position_passes_ended", some_partition_blocked_by_an_ended_transaction,
                          no_partition_blocked_by_an_ended_transaction,
                          description="P-L3: no partition stays blocked by a transaction the coordinator ended."),
    ]
    if ack_input:
        props.insert(3, Property.always("acks_only_with_commit", acks_only_with_commit, partner="input_acked",
                                        description="P-S4: the input is acked for good only by a committed "
                                                    "transaction."))
        props.append(Property.sometimes("input_acked", input_acked,
                                        description="A transaction's ack of the input was committed."))
    return props
