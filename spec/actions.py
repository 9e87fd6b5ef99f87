"""The actions of the Kafka system model as data: a kind, the actor, and the message or fault with its fields.

System
    Every step the checker takes (:func:`txnspec.spec.system.next_steps`) is labelled with an
    :class:`Action`. Its :class:`ActionKind` is its class for coverage and weak fairness (one kind per
    application call, per delivered message type, per fault). The fields say what happened: ``actor`` (who
    acts: the producer, the coordinator, or for a delivery the message's destination), ``message`` (the
    :class:`~txnspec.spec.network.Envelope` delivered, lost, duplicated or re-sent, with its source,
    destination and body), ``partition`` (of a ``send`` or an expired batch), ``transactional_id`` (of a
    timeout), ``request`` (the type of a transactional request a client retries), ``awaited`` (for a
    delivery between a producer and a server: whether the message is the one the client waits for, or a
    stale duplicated copy) and ``batch`` (the expired batch: partition, producer id, epoch, base sequence).

    Conformance, coverage, fairness and shrinking read these fields; ``str(action)`` renders the text
    reports show (and only reports read it).

Assumptions
    Two actions enabled in one state are never equal (each delivery is of a distinct envelope, each retry of
    a distinct request), so an action identifies its step among the enabled ones.

Cost
    An action is a ``NamedTuple`` (creation, hashing and equality run in C), created only for enabled steps;
    its text is built only when a report asks for it.
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple

from txnspec.spec.messages import (
    AddOffsetsToTxn,
    AddPartitionsToTxn,
    EndTxn,
    EndTxnResponse,
    ErrorResponse,
    InitProducerId,
    InitProducerIdResponse,
    Produce,
    ProduceResponse,
    TxnOffsetCommit,
    WriteTxnMarkers,
    WriteTxnMarkersResponse,
)
from txnspec.spec.network import COORDINATOR, Address, Envelope, describe


class ActionKind(enum.StrEnum):
    """The kinds of step of the Kafka system model (their values are the coverage names reports show)."""

    # the application's calls on its KafkaProducer
    INIT_TRANSACTIONS = "initTransactions"
    BEGIN_TRANSACTION = "beginTransaction"
    SEND = "send"
    SEND_OFFSETS_TO_TRANSACTION = "sendOffsetsToTransaction"
    COMMIT_TRANSACTION = "commitTransaction"
    ABORT_TRANSACTION = "abortTransaction"
    # KIP-939: the client's two-phase-commit calls and the external coordinator's durable decision
    PREPARE_TRANSACTION = "prepareTransaction"
    COMPLETE_TRANSACTION = "completeTransaction"
    DECIDE_COMMIT = "external coordinator decides commit"
    DECIDE_ABORT = "external coordinator decides abort"
    # a message reaches its destination, one kind per message type
    DELIVER_INIT_PRODUCER_ID = "deliver InitProducerId"
    DELIVER_ADD_PARTITIONS_TO_TXN = "deliver AddPartitionsToTxn"
    DELIVER_ADD_OFFSETS_TO_TXN = "deliver AddOffsetsToTxn"
    DELIVER_TXN_OFFSET_COMMIT = "deliver TxnOffsetCommit"
    DELIVER_END_TXN = "deliver EndTxn"
    DELIVER_PRODUCE = "deliver Produce"
    DELIVER_WRITE_TXN_MARKERS = "deliver WriteTxnMarkers"
    DELIVER_INIT_PRODUCER_ID_RESPONSE = "deliver InitProducerIdResponse"
    DELIVER_ERROR_RESPONSE = "deliver ErrorResponse"
    DELIVER_END_TXN_RESPONSE = "deliver EndTxnResponse"
    DELIVER_PRODUCE_RESPONSE = "deliver ProduceResponse"
    DELIVER_WRITE_TXN_MARKERS_RESPONSE = "deliver WriteTxnMarkersResponse"
    # faults of the environment (each within the scenario's budget)
    LOSE = "lose"
    DUPLICATE = "duplicate"
    APPEND_FAILS = "append fails"
    TIMEOUT = "timeout"
    FAILOVER = "failover"
    CRASH = "crash"
    EXPIRE_BATCH = "expire batch"
    REBALANCE = "rebalance"
    # KIP-848 (a scenario with group_protocol "consumer"): the fault "rebalance" is one of the two fences below
    # (REBALANCE: the member's session times out, consumerGroupFenceMember); a member's heartbeat reconciles it
    REASSIGN = "reassign"
    HEARTBEAT = "heartbeat"
    EXPIRE_PRODUCERS = "expire producer ids"  # ProducerStateManager.removeExpiredProducers on one partition
    EXPIRE_TRANSACTIONAL_ID = "expire transactional id"  # TransactionStateManager.removeExpiredTransactionalIds
    OFFSET_COMMIT = "plain OffsetCommit"  # an admin's commit from outside group management
    RESIGN = "resign"  # the coordinator loses every transaction-log partition (the start of a slow failover)
    ADMIN_ABORT = "admin abort"  # Admin.abortTransaction: WriteTxnMarkers from an admin to the partition leader
    # the protocol's own recovery
    RESEND_MARKER = "resend marker"
    RETRY = "retry"
    ABANDONED_TIMEOUT = "abandoned timeout"
    ELECT = "elect"  # a new coordinator leads the partitions nobody leads and starts loading them
    LOAD_TXN_PARTITION = "load transaction-log partition"  # one partition's load finishes


K = ActionKind
DELIVER_KIND: dict[type, ActionKind] = {
    InitProducerId: K.DELIVER_INIT_PRODUCER_ID, AddPartitionsToTxn: K.DELIVER_ADD_PARTITIONS_TO_TXN,
    AddOffsetsToTxn: K.DELIVER_ADD_OFFSETS_TO_TXN, TxnOffsetCommit: K.DELIVER_TXN_OFFSET_COMMIT,
    EndTxn: K.DELIVER_END_TXN, Produce: K.DELIVER_PRODUCE, WriteTxnMarkers: K.DELIVER_WRITE_TXN_MARKERS,
    InitProducerIdResponse: K.DELIVER_INIT_PRODUCER_ID_RESPONSE, ErrorResponse: K.DELIVER_ERROR_RESPONSE,
    EndTxnResponse: K.DELIVER_END_TXN_RESPONSE, ProduceResponse: K.DELIVER_PRODUCE_RESPONSE,
    WriteTxnMarkersResponse: K.DELIVER_WRITE_TXN_MARKERS_RESPONSE,
}
DELIVERIES = frozenset(DELIVER_KIND.values())
APPLICATION_CALLS = frozenset({K.INIT_TRANSACTIONS, K.BEGIN_TRANSACTION, K.SEND, K.SEND_OFFSETS_TO_TRANSACTION,
                               K.COMMIT_TRANSACTION, K.ABORT_TRANSACTION, K.PREPARE_TRANSACTION,
                               K.COMPLETE_TRANSACTION, K.DECIDE_COMMIT, K.DECIDE_ABORT})
FAULTS = frozenset({K.LOSE, K.DUPLICATE, K.APPEND_FAILS, K.TIMEOUT, K.FAILOVER, K.CRASH, K.EXPIRE_BATCH,
                    K.REBALANCE, K.REASSIGN, K.RESIGN})
# weakly fair: the protocol's own steps (never the application's choices, never a fault)
FAIR_KINDS = DELIVERIES | {K.RESEND_MARKER, K.RETRY, K.ABANDONED_TIMEOUT, K.HEARTBEAT, K.ELECT, K.LOAD_TXN_PARTITION}
ACTION_KINDS = ActionKind  # the kinds, in declaration order (reports list the kinds never taken)


class Action(NamedTuple):
    """One step of the system model (see the module docstring for the fields)."""

    kind: ActionKind
    actor: Address
    message: Envelope | None = None
    partition: str | None = None
    transactional_id: str | None = None
    request: type | None = None
    awaited: bool | None = None
    batch: tuple[str, int, int, int] | None = None

    @property
    def source(self) -> Address:
        """The sending lifeline (a sequence diagram's arrow starts here): the message's source, else the actor."""
        return self.message.source if self.message is not None else self.actor

    @property
    def target(self) -> Address:
        """The receiving lifeline: the message's destination, else the actor."""
        return self.message.target if self.message is not None else self.actor

    @property
    def body(self) -> Any:
        """The message's request or response (None for an action without a message)."""
        return self.message.body if self.message is not None else None

    @property
    def is_delivery(self) -> bool:
        return self.kind in DELIVERIES

    def __str__(self) -> str:
        return _render(self)

    def __repr__(self) -> str:
        return f"Action({_render(self)!r})"


def deliver(envelope: Envelope, awaited: bool | None) -> Action:
    return Action(DELIVER_KIND[type(envelope.body)], envelope.target, envelope, awaited=awaited)


def _render(a: Action) -> str:
    kind, who = a.kind, a.actor
    if kind in (K.DECIDE_COMMIT, K.DECIDE_ABORT):
        return f"{who}'s {kind.value}"
    if kind in APPLICATION_CALLS:
        argument = a.partition if kind is K.SEND else ""
        return f"{who}.{kind.value}({argument})"
    if kind in DELIVERIES:
        return f"deliver {a.message}"
    if kind is K.APPEND_FAILS:
        return f"deliver {a.message} (log append fails)"
    if kind in (K.LOSE, K.DUPLICATE):
        return f"{kind.value} {a.message}"
    if kind is K.TIMEOUT:
        return f"{COORDINATOR} aborts timed-out {a.transactional_id}"
    if kind is K.ABANDONED_TIMEOUT:
        return f"{COORDINATOR} aborts {a.transactional_id}, abandoned by its producer"
    if kind is K.FAILOVER:
        return f"{COORDINATOR} fails over"
    if kind is K.RESIGN:
        return f"{COORDINATOR} loses its transaction-log partitions (NOT_COORDINATOR)"
    if kind is K.ELECT:
        return f"a new {COORDINATOR} leads the transaction log and loads it (COORDINATOR_LOAD_IN_PROGRESS)"
    if kind is K.LOAD_TXN_PARTITION:
        return f"{COORDINATOR} finishes loading {a.partition}"
    if kind is K.CRASH:
        return f"{who} crashes and restarts"
    if kind is K.REBALANCE:
        return f"the group rebalances without {who}'s member (a zombie from now on)"
    if kind is K.REASSIGN:
        return f"the group's target moves {who}'s partition away; its member releases it at the next epoch"
    if kind is K.HEARTBEAT:
        return f"{who}'s member heartbeats and is reconciled to the group epoch"
    if kind is K.EXPIRE_BATCH:
        return f"{who} gives up on its produce to {a.partition}"
    if kind is K.ADMIN_ABORT:
        return f"an admin aborts at {a.partition}: {a.message}"
    if kind is K.RESEND_MARKER:
        return f"{COORDINATOR} re-sends {describe(a.body)}"
    if a.message is not None:  # RETRY of a produce
        return f"{who} times out waiting for its produce to {a.message.target} and retries"
    request = a.request.__name__ if a.request is not None else "?"
    return f"{who} times out waiting for {request} and retries"
