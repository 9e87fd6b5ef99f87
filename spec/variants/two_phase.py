"""KIP-939's two-phase commit: the KIP's design where Kafka 4.4 differs, and three broken protocols.

``kip-939-keep-prepared`` is the KIP's design of ``keepPreparedTxn`` (Kafka 4.4 and trunk answer
UNSUPPORTED_VERSION: docs/kip-939.md): the coordinator keeps the ongoing transaction, bumps the epoch and
answers the ongoing (producer id, epoch) as well, so that the restarted instance completes the transaction as
the external coordinator decided. The others each break one of the 2PC invariants (pinned in
``tests/spec/test_two_phase.py``):

* ``kafka-4.4.0-client``: the released 4.4.0 client, whose InitProducerId never carries ``Enable2Pc`` nor
  ``KeepPreparedTxn``: the transaction gets the ordinary timeout and the coordinator's timeout aborts it although the
  external coordinator decided commit: ``prepared_outcome_follows_external_decision``;
* ``kip-939-keep-prepared-4.4-client``: the KIP's coordinator with 4.4's client, whose ``InitProducerIdHandler``
  leaves ``transactionStarted`` false on a kept transaction, so ``nextRequest`` completes the EndTxn of
  ``completeTransaction`` locally: the kept transaction is never completed: ``last_stable_offset_advances``;

* ``two-phase-commit-times-out``: the timeout scan does not skip ``isDistributedTwoPhaseCommitTxn``:
  ``prepared_never_timed_out``;
* ``complete-ignores-prepared-state``: ``completeTransaction`` commits whatever state it is handed:
  ``prepared_outcome_follows_external_decision``;
* ``keep-prepared-without-fence``: the KIP's design without the epoch bump: the crashed instance's EndTxn
  commits the transaction its successor kept: ``fenced_producer_never_commits``;
* ``keep-prepared-complete-ignores-state``: the KIP's design with a ``completeTransaction`` that commits whatever
  it is handed: the crashed instance's late produce, appended after the keep, commits with the kept transaction
  that should have been presumed aborted: ``no_write_under_kept_epoch``.
"""

from __future__ import annotations

from typing import Any

from txnspec.spec import coordinator as coord
from txnspec.spec import coordinator_state as coord_state
from txnspec.spec.constants import NO_PRODUCER_ID
from txnspec.spec.coordinator_state import CoordinatorResult, CoordinatorState, TxnMetadata
from txnspec.spec.messages import InitProducerId
from txnspec.spec.protocol import Protocol
from txnspec.spec.txn_state import ONGOING
from txnspec.spec.values import replace
from txnspec.spec.variants.registry import Variant, register


def _keep_prepared(p: Protocol) -> Protocol:
    return p.but("kip-939-keep-prepared", "KIP-939's keepPreparedTxn: the ongoing transaction is kept",
                 handle_init_producer_id=coord.handle_init_producer_id_keeping_prepared,
                 client_kept_transaction_started=True)


def _ongoing_times_out(md: TxnMetadata) -> bool:
    """The timeout scan's filter without the 2PC exception (before KIP-939)."""
    return md.pending_state is None and md.state is ONGOING


def _keep_without_bump(cs: CoordinatorState, request: InitProducerId, **kw: Any) -> CoordinatorResult:
    """Keeps the ongoing transaction under its own epoch: the crashed instance stays unfenced."""
    result = coord.handle_init_producer_id_keeping_prepared(cs, request, **kw)
    response = result.response
    if response is None or response.ongoing_txn_producer_id == NO_PRODUCER_ID or request.transactional_id is None:
        return result
    md = result.state.metadata(request.transactional_id)
    assert md is not None
    unbumped = replace(md, producer_epoch=response.ongoing_txn_producer_epoch)
    return replace(result, state=coord_state.with_metadata(result.state, unbumped, request.transactional_id),
                   response=replace(response, producer_epoch=response.ongoing_txn_producer_epoch))


register(Variant(
    "kip-939-keep-prepared", "KIP-939's design: InitProducerId with keepPreparedTxn keeps the ongoing transaction "
    "(epoch bumped, the ongoing pair answered) instead of UNSUPPORTED_VERSION", "KIP-939",
    change_protocol=_keep_prepared))

register(Variant(
    "kip-939-keep-prepared-4.4-client", "KIP-939's coordinator design with Kafka 4.4's client, which leaves "
    "transactionStarted false on a kept transaction: completeTransaction completes locally, no EndTxn is sent",
    "KIP-939 (TransactionManager.InitProducerIdHandler, nextRequest)",
    change_protocol=lambda p: _keep_prepared(p).but("kip-939-keep-prepared-4.4-client",
                                                     "keep; 4.4's client completes a kept transaction locally",
                                                     client_kept_transaction_started=False),
    expected_violation="last_stable_offset_advances"))

register(Variant(
    "kafka-4.4.0-client", "Kafka 4.4.0's released client: InitProducerId never carries Enable2Pc nor "
    "KeepPreparedTxn, so a 2PC transaction has the ordinary timeout", "kafka-clients 4.4.0 (TransactionManager)",
    change_protocol=lambda p: p.but("kafka-4.4.0-client", "the 4.4.0 client sends no 2PC field",
                                    client_sends_two_phase_fields=False),
    expected_violation="prepared_outcome_follows_external_decision"))

register(Variant(
    "two-phase-commit-times-out", "the coordinator's timeout aborts two-phase-commit transactions too",
    "KIP-939 (TransactionStateManager.timedOutTransactions)",
    change_protocol=lambda p: p.but("two-phase-commit-times-out", "2PC transactions time out",
                                    is_timeout_candidate=_ongoing_times_out),
    expected_violation="prepared_never_timed_out"))

register(Variant(
    "complete-ignores-prepared-state", "completeTransaction commits whatever PreparedTxnState it is handed",
    "KIP-939 (KafkaProducer.completeTransaction)",
    change_protocol=lambda p: p.but("complete-ignores-prepared-state", "completeTransaction always commits",
                                    client_complete_compares_prepared_state=False),
    expected_violation="prepared_outcome_follows_external_decision"))

register(Variant(
    "keep-prepared-without-fence", "KIP-939's keepPreparedTxn without the epoch bump: the crashed instance is not "
    "fenced", "KIP-939",
    change_protocol=lambda p: _keep_prepared(p).but("keep-prepared-without-fence", "keep without an epoch bump",
                                                     handle_init_producer_id=_keep_without_bump),
    expected_violation="fenced_producer_never_commits"))

register(Variant(
    "keep-prepared-complete-ignores-state", "KIP-939's keepPreparedTxn with a completeTransaction that commits "
    "whatever PreparedTxnState it is handed", "KIP-939",
    change_protocol=lambda p: _keep_prepared(p).but("keep-prepared-complete-ignores-state",
                                                     "keep, and completeTransaction always commits",
                                                     client_complete_compares_prepared_state=False),
    expected_violation="no_write_under_kept_epoch"))
