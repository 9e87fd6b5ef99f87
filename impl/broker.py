"""One broker: partition leaders, the transaction coordinator and the group coordinator, answering requests.

Follows Kafka's ``KafkaApis`` request dispatch for the exactly-once RPCs and ``ReplicaManager.appendRecords``
/ ``AddPartitionsToTxnManager`` for transactional produce (KIP-890): with transaction version 2 the leader
adds the partition to the transaction itself (``AddPartitionsToTxn`` with ``verifyOnly=false``); with TV
0/1 and ``transaction.partition.verification.enable`` it verifies that the partition was added
(``handleVerifyPartitionsInTransaction``), mapping coordinator answers as the broker does
(``PRODUCER_FENCED → INVALID_PRODUCER_EPOCH``, ``TRANSACTION_ABORTABLE → INVALID_TXN_STATE`` for old
clients, coordinator unavailability and TV<2 ``CONCURRENT_TRANSACTIONS`` → ``NOT_ENOUGH_REPLICAS``).

Sans-I/O: :meth:`Broker.handle` takes a request and ``now_ms`` and returns the response; markers the
coordinator wants written come out of :meth:`Broker.deliver_markers`, which writes them to the partitions
(or the group coordinator) and feeds the answers back. Durable mode: with ``data_dir`` every partition is
an append-only segment file (:mod:`txnspec.impl.storage`); constructing a broker on an existing directory
recovers it (torn tail truncated, corruption refused unless ``recover_corruption``, producer state rebuilt
from the snapshot and the log, transaction log loaded and Prepare* transactions completed by re-sending their
markers). ``fsync=True`` makes every acknowledged append survive power loss, not only a process kill. A
write the disk refuses answers ``KAFKA_STORAGE_ERROR`` (recorded in :attr:`Broker.storage_failures`) and
leaves every in-memory state as it was; a failed transaction-log write makes the coordinator reload.

Left out: more than one broker, replication, ACLs, quotas, topic management (a partition ``topic-N``
exists as soon as it is used).

Long because :class:`Broker` is ``KafkaApis``'s dispatch together with ``ReplicaManager``'s transactional
produce (KIP-890's add, verify-only and no-verification paths, TxnOffsetCommit's verification) and the durable
recovery at construction, all over the partitions and coordinators it holds; the parts it composes are modules.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from txnspec.impl import durability as _durability
from txnspec.impl.broker_storage import BrokerStorage
from txnspec.impl.checkpoint import Checkpoints
from txnspec.impl.consumer_groups import ConsumerGroups
from txnspec.impl.coordinator import TransactionCoordinator
from txnspec.impl.durability import Durability
from txnspec.impl.errors import Errors, KafkaStorageException
from txnspec.impl.group import GroupCoordinator, add_partitions_manager_error, txn_offset_commit_verification_error
from txnspec.impl.internal_topics import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC
from txnspec.impl.log import SHORT_MAX, ControlType
from txnspec.impl.membership import Membership
from txnspec.impl.messages import (
    AddOffsetsToTxn,
    AddPartitionsToTxn,
    EndTxn,
    Fetch,
    FindCoordinator,
    InitProducerId,
    OffsetFetch,
    Produce,
    Request,
    Response,
    TxnOffsetCommit,
)
from txnspec.impl.partition import Partition
from txnspec.impl.policy import KAFKA, Rules
from txnspec.impl.producer_id_manager import ProducerIdManager
from txnspec.impl.request_checks import validate_request
from txnspec.impl.topic_partition import TopicPartition
from txnspec.impl.txn_markers import TxnMarker
from txnspec.impl.txn_metadata import TV_2, TransactionState
from txnspec.impl.txn_state_manager import CoordinatorConfig

if TYPE_CHECKING:
    from txnspec.impl.storage import RecoveryReport


@dataclass
class BrokerConfig:
    transaction_version: int = TV_2
    txn_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    producer_id_expiration_ms: int = 86_400_000
    num_txn_log_partitions: int = 1
    num_offsets_partitions: int = 50
    partition_verification: bool = True
    max_message_bytes: int = 1_048_588
    snapshot_every_appends: int = 50
    # Short.MAX_VALUE, as in Kafka; smaller, epoch exhaustion comes within reach of a test (CoordinatorConfig)
    max_producer_epoch: int = SHORT_MAX
    transaction_two_phase_commit_enable: bool = False  # KIP-939's broker config


class Broker(BrokerStorage):
    """A single-broker cluster's only broker (see the module docstring)."""

    def __init__(self, config: BrokerConfig | None = None, *, data_dir: str | None = None, now_ms: int = 0,
                 coordinator_epoch: int = 0, fsync: bool = False, recover_corruption: bool = False,
                 durability: Durability | None = None, rules: Rules = KAFKA) -> None:
        """``rules``: the replaceable rules its partitions and coordinators follow (Kafka's by default)."""
        self.config = config or BrokerConfig()
        self.rules = rules
        if not 2 <= self.config.max_producer_epoch <= SHORT_MAX:
            raise ValueError(f"max_producer_epoch must be 2 to {SHORT_MAX} (Short.MAX_VALUE), "
                             f"got {self.config.max_producer_epoch!r}")
        self.data_dir = data_dir
        self.fsync = fsync
        self.durability = durability or _durability.DEFAULT
        self.checkpoints: Checkpoints | None = None
        self.partitions: dict[str, Partition] = {}
        self.closed = False
        self._opening = True  # partitions made while opening are checkpointed once, at the end
        self.storage_failures: list[KafkaStorageException] = []  # every failed write, oldest first
        self.recovery_reports: list[RecoveryReport] = []  # what recovery cut from each segment, if anything
        self._txn_log_failed = False
        self._appends_since_snapshot = 0
        next_pid = 0
        persist = None
        if data_dir is not None:
            try:
                next_pid, persist = self._open_data_dir(data_dir, recover_corruption)
            except BaseException:
                self._close_files()
                raise
        # a restarted coordinator must not be fenced by the markers it wrote before (its epoch may have
        # risen when a transaction-log write failed): it starts at the highest epoch the logs hold
        coordinator_epoch = max([coordinator_epoch] + [b.coordinator_epoch for p in self.partitions.values()
                                                       for b in p.log.batches if b.is_control])
        txn_parts = [self.partition(TopicPartition(TRANSACTION_STATE_TOPIC, i))
                     for i in range(self.config.num_txn_log_partitions)]
        self.coordinator_config = CoordinatorConfig(
            txn_max_timeout_ms=self.config.txn_max_timeout_ms,
            transactional_id_expiration_ms=self.config.transactional_id_expiration_ms,
            transaction_version=self.config.transaction_version,
            num_txn_log_partitions=self.config.num_txn_log_partitions,
            num_offsets_partitions=self.config.num_offsets_partitions,
            max_producer_epoch=self.config.max_producer_epoch,
            resend_prepared_markers=self.durability.resend_prepared_markers,
            transaction_two_phase_commit_enable=self.config.transaction_two_phase_commit_enable)
        self.producer_ids = ProducerIdManager(next_pid, persist)
        recovery = None
        if data_dir is not None:  # a transaction log cut behind the data logs (lost power without fsync)
            from txnspec.impl.txn_recovery import TxnLogRecovery
            recovery = TxnLogRecovery(self.partitions)
        self.txn_coordinator = TransactionCoordinator(txn_parts, self.producer_ids, self.coordinator_config,
                                                      coordinator_epoch=coordinator_epoch, now_ms=now_ms,
                                                      recovery=recovery, rules=rules)
        # what the first load settled (impl/txn_recovery.py), one line per transactional id; empty if consistent
        self.txn_log_recovery_notes: list[str] = recovery.notes if recovery is not None else []
        self.txn_coordinator.recovery = None  # only the first load can find the log behind: later ones reload
        # what this broker wrote itself
        offsets: dict[str, Partition] = {
            tp: self.partition(tp)
            for tp in (TopicPartition(GROUP_METADATA_TOPIC, i) for i in range(self.config.num_offsets_partitions))}
        self.group_coordinator = GroupCoordinator(offsets, self.config.num_offsets_partitions, rules=rules)
        self.group_coordinator.load()
        self.membership = Membership()  # classic group membership; its checks apply to commits naming a member
        self.group_coordinator.membership = self.membership
        self.consumer_groups = ConsumerGroups()  # KIP-848's groups: their commits are checked by member epoch
        self.group_coordinator.consumer_groups = self.consumer_groups
        if data_dir is not None:
            try:
                self._check_producer_id_block()
                self._checkpoint_all()
            except BaseException:
                self._close_files()
                raise
        self._opening = False

    def _partition_kwargs(self) -> dict[str, Any]:
        return {"producer_id_expiration_ms": self.config.producer_id_expiration_ms,
                "max_message_bytes": self.config.max_message_bytes,
                "max_producer_epoch": self.config.max_producer_epoch, "rules": self.rules}

    def partition(self, name: str) -> Partition:
        """The partition called ``name`` (created empty on first use)."""
        p = self.partitions.get(name)
        if p is None:
            p = self._new_durable_partition(name) if self.data_dir is not None \
                else Partition(name, **self._partition_kwargs())
            self.partitions[name] = p
        return p

    # --- failover of the coordinators ---

    def crash_coordinators(self) -> None:
        self.txn_coordinator.resign()
        self.group_coordinator.active = False

    def restart_coordinators(self, now_ms: int) -> None:
        """A new coordinator epoch loads the transaction and offsets logs (``onElection``)."""
        self.txn_coordinator.load(self.txn_coordinator.coordinator_epoch + 1, now_ms)
        self.group_coordinator.load()

    # --- requests ---

    def handle(self, request: Request, now_ms: int) -> Response:
        """Answer one request (``KafkaApis.handle``); a malformed one gets INVALID_REQUEST, never an exception."""
        response = self._handle(request, now_ms)
        self._after_storage_failure(now_ms)
        return response

    def _handle(self, request: Request, now_ms: int) -> Response:
        tc = self.txn_coordinator
        rid = getattr(request, "correlation_id", 0)
        problem = validate_request(request)
        if problem:
            return Response(Errors.INVALID_REQUEST, extra={"message": problem},
                            correlation_id=rid if isinstance(rid, int) else 0)
        if isinstance(request, FindCoordinator):
            ok = tc.txn_manager.active if request.key_type.value == "TRANSACTION" else self.group_coordinator.active
            return Response(Errors.NONE if ok else Errors.COORDINATOR_NOT_AVAILABLE, correlation_id=rid)
        if isinstance(request, InitProducerId):
            r = tc.handle_init_producer_id(request.transactional_id, request.transaction_timeout_ms,
                                           request.producer_id, request.producer_epoch, now_ms=now_ms,
                                           enable_two_pc=request.enable_two_pc,
                                           keep_prepared_txn=request.keep_prepared_txn)
            return Response(r.error, r.producer_id, r.producer_epoch, correlation_id=rid)
        if isinstance(request, AddPartitionsToTxn):
            err = tc.handle_add_partitions_to_txn(request.transactional_id, request.producer_id,
                                                  request.producer_epoch, request.partitions, 0, now_ms=now_ms)
            return Response(err, partition_errors=tuple((p, err) for p in request.partitions), correlation_id=rid)
        if isinstance(request, AddOffsetsToTxn):
            err = tc.handle_add_offsets_to_txn(request.transactional_id, request.producer_id, request.producer_epoch,
                                               request.group_id, now_ms=now_ms)
            return Response(err, correlation_id=rid)
        if isinstance(request, EndTxn):
            e = tc.handle_end_txn(request.transactional_id, request.producer_id, request.producer_epoch,
                                  request.result, request.transaction_version, now_ms=now_ms)
            epoch = e.producer_epoch
            if not self.rules.end_txn_answers_bumped_epoch and epoch > 0 and request.transaction_version >= 2:
                epoch -= 1
            return Response(e.error, e.producer_id, epoch, correlation_id=rid)
        if isinstance(request, TxnOffsetCommit):
            return self._txn_offset_commit(request, now_ms)
        if isinstance(request, Produce):
            return self._produce(request, now_ms)
        if isinstance(request, Fetch):
            f = self.partition(request.partition).read(request.offset, request.isolation, request.max_batches)
            return Response(f.error, base_offset=f.high_watermark, extra={"fetch": f}, correlation_id=rid)
        if isinstance(request, OffsetFetch):
            err, offsets = self.group_coordinator.fetch_offsets(request.group_id, request.partitions,
                                                                request.require_stable)
            return Response(err, offsets=tuple(sorted(offsets.items())), correlation_id=rid)
        return Response(Errors.INVALID_REQUEST, correlation_id=rid)

    def _txn_offset_commit(self, request: TxnOffsetCommit, now_ms: int) -> Response:
        rid = request.correlation_id
        partition = self.group_coordinator.partition_for(request.group_id)
        offsets_log = self.group_coordinator.partitions[partition]
        # as UnifiedLog.maybeStartTransactionVerification: no verification while the offsets partition already
        # has this producer's transaction open
        err = self._verify_txn_offset_commit(request, partition, offsets_log, now_ms)
        if err is not Errors.NONE:
            return Response(err, partition_errors=tuple((tp, err) for tp, _ in request.offsets), correlation_id=rid)
        errors = self.group_coordinator.handle_txn_offset_commit(request.group_id, request.producer_id,
                                                                 request.producer_epoch, dict(request.offsets),
                                                                 now_ms=now_ms, member=request.member,
                                                                 api_version=self._txn_offset_commit_version(request))
        first = next(iter(errors.values()), Errors.NONE)
        return Response(first, partition_errors=tuple(sorted(errors.items())), correlation_id=rid)

    def _txn_offset_commit_version(self, request: TxnOffsetCommit) -> int:
        """The request's version; without a wire version, the one Kafka 4.4's client sends at the broker's
        transaction version (``TxnOffsetCommitRequest.Builder``: a TV1 producer is capped at
        ``LAST_STABLE_VERSION_BEFORE_TRANSACTION_V2``, 4; a TV2 one sends the newest, 6). It decides how a
        consumer group's stale member epoch is answered (ILLEGAL_GENERATION before v6)."""
        if request.api_version is not None:
            return request.api_version
        return TXN_OFFSET_COMMIT_VERSION_LATEST if self.config.transaction_version >= TV_2 \
            else TXN_OFFSET_COMMIT_VERSION_GENERIC_ERROR

    def _verify_txn_offset_commit(self, request: TxnOffsetCommit, partition: str, offsets_log: Partition,
                                  now_ms: int) -> Errors:
        """``CoordinatorPartitionWriter.maybeStartTransactionVerification`` (TV1 with verification enabled; TV2
        adds the offsets partition to the transaction), answered as ``GroupCoordinatorService
        .commitTransactionalOffsets`` answers it (``txn_offset_commit_verification_error``): unlike a Produce, no
        broker-side retry of CONCURRENT_TRANSACTIONS and no NOT_ENOUGH_REPLICAS. The verification entry the leader
        starts (sequence -1) is left out: a coordinator-origin append checks no sequence and clears it."""
        # txnOffsetCommitRequestVersionToTransactionSupportedOperation: v5+ adds the partition (TV2), v4 handles
        # TRANSACTION_ABORTABLE, whatever the finalized level; without a wire version, the broker's level decides
        tv2 = (self.config.transaction_version >= TV_2 if request.api_version is None
               else request.api_version >= TXN_OFFSET_COMMIT_VERSION_ADD_PARTITION)
        generic = request.api_version is None or request.api_version >= TXN_OFFSET_COMMIT_VERSION_GENERIC_ERROR
        if not tv2 and not self.config.partition_verification:
            return Errors.NONE
        entry = offsets_log.producer_state.last_entry(request.producer_id)
        if entry is not None and request.producer_epoch < entry.producer_epoch:
            return Errors.INVALID_PRODUCER_EPOCH  # UnifiedLog.maybeStartTransactionVerification refuses it first
        if offsets_log.producer_state.has_ongoing_transaction(request.producer_id, request.producer_epoch):
            return Errors.NONE
        if tv2:
            err = self.txn_coordinator.handle_add_partitions_to_txn(
                request.transactional_id, request.producer_id, request.producer_epoch, [partition], TV_2,
                now_ms=now_ms)
        else:
            err = self._verify_only(request.transactional_id, request.producer_id, request.producer_epoch, partition)
        return txn_offset_commit_verification_error(err, generic_error_supported=generic)

    def _produce(self, request: Produce, now_ms: int) -> Response:
        rid = request.correlation_id
        if TopicPartition.of(request.partition).topic in (TRANSACTION_STATE_TOPIC, GROUP_METADATA_TOPIC):
            return Response(Errors.INVALID_REQUEST, correlation_id=rid)  # internal topics are not produced to
        p = self.partition(request.partition)
        if request.is_transactional and request.transactional_id:
            err = self._verify_or_add(request, now_ms)
            if err is not Errors.NONE:
                return Response(err, correlation_id=rid)
        r = p.append_records(request.producer_id, request.producer_epoch, request.base_sequence, request.records,
                             request.is_transactional, now_ms=now_ms)
        self._maybe_snapshot(p)
        return Response(r.error, request.producer_id, request.producer_epoch, r.base_offset,
                        extra={"duplicate": r.duplicate, "message": r.message}, correlation_id=rid)

    def _verify_or_add(self, request: Produce, now_ms: int) -> Errors:
        tc = self.txn_coordinator
        tid = request.transactional_id or ""
        p = self.partition(request.partition)
        if p.producer_state.has_ongoing_transaction(request.producer_id, request.producer_epoch):
            return Errors.NONE
        tv2 = request.transaction_version >= TV_2
        if not tv2 and not self.config.partition_verification:
            return Errors.NONE
        err = p.maybe_start_transaction_verification(request.producer_id, request.base_sequence,
                                                     request.producer_epoch, tv2, now_ms)
        if err is not Errors.NONE:
            return err
        if tv2:
            err = tc.handle_add_partitions_to_txn(tid, request.producer_id, request.producer_epoch,
                                                  [request.partition], TV_2, now_ms=now_ms)
        else:
            err = self._verify_only(tid, request.producer_id, request.producer_epoch, request.partition)
        return verification_error(err, _generic_error_supported(request), tv2)

    def _verify_only(self, tid: str, producer_id: int, producer_epoch: int, partition: str) -> Errors:
        """A TV1 leader's ``verifyOnly`` AddPartitionsToTxn as the coordinator answers it
        (``handleVerifyPartitionsInTransaction``); the caller maps the answer for its request."""
        err, md = self.txn_coordinator.txn_manager.get_transaction_state(tid)
        if err is not Errors.NONE:
            return err
        if md is None or md.producer_id != producer_id:
            return Errors.INVALID_PRODUCER_ID_MAPPING
        if md.producer_epoch != producer_epoch:
            return Errors.PRODUCER_FENCED
        if md.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            return Errors.CONCURRENT_TRANSACTIONS
        if partition not in md.topic_partitions:
            # handleVerifyPartitionsInTransaction: TRANSACTION_ABORTABLE for a partition not in the transaction
            return Errors.TRANSACTION_ABORTABLE
        return Errors.NONE

    # --- markers ---

    def deliver_markers(self, now_ms: int,
                        markers: Iterable[TxnMarker] | None = None) -> list[tuple[TxnMarker, Errors]]:
        """Write the coordinator's pending markers (or ``markers``) and feed the answers back."""
        out = []
        for m in list(self.txn_coordinator.marker_channel.drain_markers() if markers is None else markers):
            out.append((m, self.write_marker(m, now_ms)))
        return out

    def write_marker(self, m: TxnMarker, now_ms: int) -> Errors:
        """``WriteTxnMarkers`` for one partition, then the completion handler on the coordinator."""
        err = self.append_marker(m, now_ms)
        self.txn_coordinator.marker_channel.on_marker_response(m, err, now_ms)
        self._after_storage_failure(now_ms)
        return err

    def append_marker(self, m: TxnMarker, now_ms: int) -> Errors:
        """The partition leader's side of ``WriteTxnMarkers``: append the marker; the answer is returned, not
        yet given to the coordinator (a caller that models the response's flight gives it later)."""
        if TopicPartition.of(m.partition).topic == GROUP_METADATA_TOPIC:
            err = self.group_coordinator.write_txn_marker(m.partition, m.producer_id, m.producer_epoch,
                                                          m.coordinator_epoch, m.result, m.transaction_version,
                                                          now_ms=now_ms)
        else:
            err = self.partition(m.partition).write_txn_marker(m.producer_id, m.producer_epoch, m.coordinator_epoch,
                                                               m.result, m.transaction_version, now_ms=now_ms).error
        return err

    def tick(self, now_ms: int, timed_out: str | None = None) -> None:
        """Periodic work: abort timed-out transactions (only ``timed_out``'s, when a test names one id whose
        timeout fires), expire ids and producers, retry completions."""
        self.txn_coordinator.abort_timed_out_transactions(now_ms, timed_out)
        self.txn_coordinator.expire_transactional_ids(now_ms)
        self.txn_coordinator.marker_channel.retry_completions(now_ms)
        for p in self.partitions.values():
            p.remove_expired_producers(now_ms)
        self._after_storage_failure(now_ms)

    def delete_records(self, name: str, offset: int) -> tuple[Errors, int]:
        """DeleteRecords on partition ``name`` (``ReplicaManager.deleteRecords``): its log start offset moves up
        to ``offset`` (-1: the high watermark) and is checkpointed (``log-start-offset-checkpoint``), so a restart
        does not read below it. Returns the error and the low watermark."""
        error, low = self.partition(name).delete_records_before(offset)
        if error is Errors.NONE and self.checkpoints is not None:
            self.checkpoints.log_starts[name] = low
            self.checkpoints.write()
        return error, low

    def __enter__(self) -> Broker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


PRODUCE_VERSION_GENERIC_ERROR = 11
PRODUCE_VERSION_ADD_PARTITION = 12  # ADD_PARTITION: the leader adds the partition itself (transaction version 2)
TXN_OFFSET_COMMIT_VERSION_GENERIC_ERROR, TXN_OFFSET_COMMIT_VERSION_ADD_PARTITION = 4, 5
TXN_OFFSET_COMMIT_VERSION_LATEST = 6  # Kafka 4.4's newest (topics by id; STALE_MEMBER_EPOCH)


def _generic_error_supported(request: Produce) -> bool:
    """A Produce without an API version is taken as the newest a client of its transaction version sends."""
    return request.api_version is None or request.api_version >= PRODUCE_VERSION_GENERIC_ERROR


def verification_error(err: Errors, generic_error_supported: bool, supports_epoch_bump: bool = False) -> Errors:
    """How a leader maps a coordinator's answer to its verification of a Produce for the producer:
    ``AddPartitionsToTxnManager`` (:func:`add_partitions_manager_error`), then ``ReplicaManager.appendRecords``
    (a verification that did not complete is NOT_ENOUGH_REPLICAS, and so is CONCURRENT_TRANSACTIONS for a
    request that cannot bump the epoch: Produce v11 and older)."""
    err = add_partitions_manager_error(err, generic_error_supported)
    if err in (Errors.NETWORK_EXCEPTION, Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.COORDINATOR_NOT_AVAILABLE,
               Errors.NOT_COORDINATOR) or (err is Errors.CONCURRENT_TRANSACTIONS and not supports_epoch_bump):
        return Errors.NOT_ENOUGH_REPLICAS
    return err


assert ControlType.COMMIT  # re-exported for users of deliver_markers

__all__ = ["Broker", "BrokerConfig"]
