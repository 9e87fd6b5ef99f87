"""The producer of the system model: its state (the application's progress and a projection of its client).

Models
    One :class:`Producer` per producer instance: the phase of ``TransactionManager.State`` (:class:`Phase`), its
    producer id and epoch, the transactional request in flight, the partitions added or waiting to be added, the
    handlers queued in ``TransactionManager.pendingRequests`` (:class:`Queued`), how far
    ``sendOffsetsToTransaction`` got (:class:`OffsetsStage`), the records not yet sent, the batches in flight with
    their sequences (:data:`Batch`), and what the application and its client are configured with
    (:class:`ClientConfig`, with the configuration of :mod:`txnspec.spec.client`'s client it projects). The steps
    of a producer are :mod:`txnspec.spec.producer`.

Kafka classes followed (trunk)
    ``clients/.../producer/internals/TransactionManager.java`` (``State``, ``pendingRequests``,
    ``inFlightBatchesBySequence``), ``RecordAccumulator.java``, ``ProducerConfig``.

Assumptions
    One record per batch; the in-flight limit is per partition (Kafka's is per broker connection; one leader per
    partition here).

Left out
    Idempotent-only producers, batching of several records.
"""

from __future__ import annotations

import enum
import functools

from txnspec.spec import client_batches as cl_batches
from txnspec.spec import client_state as cl_state
from txnspec.spec.constants import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from txnspec.spec.messages import Produce, TransactionResult
from txnspec.spec.network import ProducerAddress, Tag, producer_address
from txnspec.spec.values import value

TXN_TIMEOUT_MS = 60_000


class Phase(enum.Enum):
    """``TransactionManager.State`` (the client's view of its transaction)."""

    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    PREPARED_TRANSACTION = "PREPARED_TRANSACTION"  # KIP-939: prepareTransaction, or a transaction kept at init
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


UNINITIALIZED, INITIALIZING, READY = Phase.UNINITIALIZED, Phase.INITIALIZING, Phase.READY


IN_TRANSACTION, COMMITTING, ABORTING = Phase.IN_TRANSACTION, Phase.COMMITTING_TRANSACTION, Phase.ABORTING_TRANSACTION


ABORTABLE_ERROR, FATAL_ERROR = Phase.ABORTABLE_ERROR, Phase.FATAL_ERROR


PREPARED = Phase.PREPARED_TRANSACTION


class OffsetsStage(enum.Enum):
    """Consume-transform-produce: how far ``sendOffsetsToTransaction`` got in this transaction."""

    NONE = "none"  # not called
    ADD = "add"  # TV1: AddOffsetsToTxn to send
    COMMIT = "commit"  # TxnOffsetCommit to send (TV2 sends it at once)
    DONE = "done"  # the group coordinator holds the offsets


class Queued(enum.Enum):
    """A handler in ``TransactionManager.pendingRequests`` among those of equal priority."""

    PARTITIONS = "partitions"  # the AddPartitionsToTxn of the new partitions
    OFFSETS = "offsets"  # AddOffsetsToTxn or TxnOffsetCommit, as the offsets stage says


Batch = tuple[str, int, int, int]  # a produce in flight: (partition, producer id, epoch, base sequence)


@value
class ClientConfig:
    """What the application and its client are configured with (from the scenario and the protocol)."""

    partitions: tuple[str, ...]
    transactions_per_producer: int
    records_per_transaction: int
    commit_offsets: bool
    group_id: str
    transaction_version: int
    max_sequence: int
    waits_for_produce_before_end_txn: bool
    bumps_epoch_after_abortable_error: bool
    max_in_flight: int = 1  # batches in flight per partition (max.in.flight.requests.per.connection)
    # a batch may expire (delivery.timeout.ms): only then is a batch in retry told from one that is not (nothing
    # else reads ProducerBatch.inRetry), so only then does the producer keep which batches were retried
    expires_batches: bool = False
    two_phase_commit: bool = False  # transaction.two.phase.commit.enable: InitProducerId asks for Enable2Pc
    complete_compares_prepared_state: bool = True  # the protocol's switches (spec/protocol.py)
    kept_transaction_started: bool = False
    sends_two_phase_fields: bool = True

    def earlier(self, first: Batch, second: Batch) -> bool:
        """``first`` was sent before ``second`` on the same partition with the same producer id and epoch
        (:func:`txnspec.spec.client_batches.sequence_precedes`; the scenario keeps
        ``max_sequence >= 2 * (max_in_flight - 1)``)."""
        return cl_batches.sequence_precedes(as_produce(first), as_produce(second), self.transaction_manager)

    @property
    def transaction_manager(self) -> cl_state.ClientConfig:
        """The configuration of :mod:`txnspec.spec.client`'s client this producer projects (spec/projection.py)."""
        return _transaction_manager_config(self.max_in_flight, self.max_sequence)

    @property
    def tv2(self) -> bool:
        return self.transaction_version >= 2


@value
class Producer:
    """One producer instance: the application's progress and its client's ``TransactionManager``."""

    index: int
    transactional_id: str
    incarnation: int = 0
    phase: Phase = UNINITIALIZED
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    awaiting: tuple[type, int] | None = None  # (request type, correlation) of the transactional request in flight
    added: frozenset[str] = frozenset()  # partitions the coordinator knows are in the transaction
    to_add: frozenset[str] = frozenset()  # TV1: partitions waiting for AddPartitionsToTxn
    adding: frozenset[str] = frozenset()  # TV1: the partitions of the AddPartitionsToTxn in flight
    # TransactionManager.pendingRequests among its equal-priority handlers, oldest first
    queued: tuple[Queued, ...] = ()
    # TV1: the group coordinator was found (TransactionManager keeps it). The first TxnOffsetCommit first looks it
    # up and is re-enqueued behind the handlers queued meanwhile; TV2 queues nothing beside it, so the flag stays
    # False there (equal states stay equal)
    group_found: bool = False
    unsent: tuple[str, ...] = ()  # records waiting for their partition to be added
    in_flight: frozenset[Batch] = frozenset()  # produces outstanding: what correlates a response
    # of those, the batches the retry step sent again (ProducerBatch.inRetry: a batch waiting for its retry is one
    # too, see expire_batch); kept only while in flight, and only where batches expire (ClientConfig)
    retried: frozenset[Batch] = frozenset()
    sequences: tuple[tuple[str, int], ...] = ()
    offsets: OffsetsStage = OffsetsStage.NONE
    started: bool = False  # transactionStarted: something was added, so EndTxn must be sent
    bump_required: bool = False  # TV1 after an abortable produce error: bump the epoch after the abort
    # TV1: beginCompletingTransaction found the bump required and queued its InitProducerId behind EndTxn. A bump
    # required only later (a batch expired while completing: maybeResolveSequences) is queued by nobody: after
    # EndTxn the client is INITIALIZING with nothing to send, and no call of the application is valid any more
    bump_queued: bool = False
    end_result: TransactionResult | None = None
    txn_no: int = 0
    records_sent: int = 0
    generation: int = -1  # KIP-447: the consumer's generation as its member last learned it (-1: no group)
    # the generation of the group metadata handed to sendOffsetsToTransaction: its TxnOffsetCommit carries it,
    # however late it is sent
    offsets_generation: int = -1
    # KIP-939: initTransactions(keepPreparedTxn) asked to keep a prepared transaction; the PreparedTxnState the
    # client holds (prepareTransaction's, or the kept transaction's from InitProducerId); whether it is a kept one
    keep_prepared: bool = False
    prepared: tuple[int, int] = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
    kept: bool = False
    # the external coordinator's durable record, which survives a crash: its decision for the transaction (with
    # the transaction's tag) and the PreparedTxnState it stored when it decided to commit
    decision: tuple[Tag, TransactionResult] | None = None
    recorded: tuple[int, int] = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)

    def next_sequence(self, partition: str) -> int:
        for p, seq in self.sequences:
            if p == partition:
                return seq
        return 0

    @property
    def member_id(self) -> str:
        """Its application's consumer-group member id (KIP-447); "" outside group management."""
        return f"member-{self.index}" if self.generation >= 0 else ""

    @property
    def tag(self) -> Tag:
        # a kept transaction is the previous incarnation's (one crash at most: the 2PC scenarios)
        return (self.index, self.incarnation - 1 if self.kept else self.incarnation, self.txn_no)

    @property
    def address(self) -> ProducerAddress:
        return producer_address(self.index)


@functools.cache
def _transaction_manager_config(max_in_flight: int, max_sequence: int) -> cl_state.ClientConfig:
    # one record per batch (batch.size), a retried batch waits for the model's retry step (retry.backoff.ms)
    return cl_state.ClientConfig(max_in_flight_per_partition=max_in_flight, max_sequence=max_sequence,
                                 max_batch_records=1, retry_backoff=True)


def as_produce(batch: Batch, transactional_id: str | None = None) -> Produce:
    """The Produce request of a batch in flight (one record)."""
    partition, producer_id, epoch, sequence = batch
    return Produce(partition, producer_id, epoch, sequence, 1, True, transactional_id)


def set_entry(pairs: tuple[tuple[str, int], ...], key: str, value: int) -> tuple[tuple[str, int], ...]:
    kept = [(k, v) for k, v in pairs if k != key]
    kept.append((key, value))
    kept.sort(key=lambda kv: repr(kv[0]))
    return tuple(kept)
