"""The group coordinator's offset store: plain and transactional offset commits in ``__consumer_offsets``.

Follows Kafka's ``GroupMetadataManager`` (``storeOffsets`` for ``OffsetCommit`` and ``TxnOffsetCommit``,
``handleTxnCompletion``, ``getOffsets`` with ``requireStable``, offset loading) as used through
``GroupCoordinator.handleTxnCommitOffsets`` / ``scheduleHandleTxnCompletion`` (KIP-98, KIP-447).

What is modelled: offsets are records in the group's ``__consumer_offsets-N`` partition (the same
:class:`~txnspec.impl.partition.Partition` machinery as every other partition); a ``TxnOffsetCommit``
writes a *transactional* batch with the producer's id and epoch (origin COORDINATOR: epoch-checked, so a
zombie's commit is fenced with INVALID_PRODUCER_EPOCH) and the offsets stay pending, invisible to
``OffsetFetch``, until the transaction marker arrives on that partition: COMMIT materializes them, ABORT
drops them. Pending offsets are kept per producer, then per group and partition (``Offsets.offsetsByGroup``), so
one marker settles every group the transaction committed for. Each offset remembers the offset of its record in
``__consumer_offsets``: a COMMIT marker materializes a transactional offset only if its record is newer than the
committed one's (``OffsetMetadataManager.replayEndTransactionMarker``: a plain commit written after the
transactional one wins). ``OffsetFetch`` with ``require_stable`` answers UNSTABLE_OFFSET_COMMIT while a partition has
pending transactional offsets. Loading replays the partitions, so pending and committed offsets survive a
restart.

Group membership (generations, member ids, static members) is :mod:`txnspec.impl.membership`; when a
:class:`~txnspec.impl.membership.Membership` is attached, a commit that names its member is checked by it
before anything is written (``ClassicGroup.validateOffsetCommit``); a commit to a consumer group of KIP-848
(:class:`~txnspec.impl.consumer_groups.ConsumerGroups`, when attached) is checked by its member epoch instead
(``ConsumerGroup.validateOffsetCommit``, errors per request version). Left out: offset expiration and
metadata; append errors are mapped as ``storeOffsets`` maps them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from txnspec.impl.consumer_groups import ConsumerGroups
from txnspec.impl.errors import Errors
from txnspec.impl.internal_topics import offsets_partition_for
from txnspec.impl.log import ControlType, Record
from txnspec.impl.membership import MemberIdentity, Membership
from txnspec.impl.partition import Partition
from txnspec.impl.policy import KAFKA, Rules
from txnspec.impl.producer_state import AppendOrigin

_STORE_ERROR_MAPPING = {
    Errors.UNKNOWN_TOPIC_OR_PARTITION: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_LEADER_OR_FOLLOWER: Errors.NOT_COORDINATOR,
    Errors.KAFKA_STORAGE_ERROR: Errors.NOT_COORDINATOR,
}

LATEST_TXN_OFFSET_COMMIT = 6  # the newest versions Kafka 4.4 knows: a request without a version is taken as one
LATEST_OFFSET_COMMIT = 10


# CoordinatorOperationExceptionHelper.handleOperationException: how GroupCoordinatorService answers a
# TxnOffsetCommit whose operation failed, its transaction verification included; any other error as it is
_OPERATION_ERROR_MAPPING = {
    Errors.NETWORK_EXCEPTION: Errors.COORDINATOR_LOAD_IN_PROGRESS,
    Errors.UNKNOWN_TOPIC_OR_PARTITION: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.REQUEST_TIMED_OUT: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_LEADER_OR_FOLLOWER: Errors.NOT_COORDINATOR,
    Errors.KAFKA_STORAGE_ERROR: Errors.NOT_COORDINATOR,
    Errors.MESSAGE_TOO_LARGE: Errors.UNKNOWN_SERVER_ERROR,
    Errors.RECORD_LIST_TOO_LARGE: Errors.UNKNOWN_SERVER_ERROR,
}


def add_partitions_manager_error(err: Errors, generic_error_supported: bool) -> Errors:
    """What ``AddPartitionsToTxnManager.AddPartitionsToTxnHandler.onComplete`` hands back for one verified
    partition: PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH; TRANSACTION_ABORTABLE becomes INVALID_TXN_STATE
    for a request older than the generic-error version (``DEFAULT_ERROR``); anything else as it is."""
    if err is Errors.PRODUCER_FENCED:
        return Errors.INVALID_PRODUCER_EPOCH
    if err is Errors.TRANSACTION_ABORTABLE and not generic_error_supported:
        return Errors.INVALID_TXN_STATE
    return err


def txn_offset_commit_verification_error(err: Errors, generic_error_supported: bool) -> Errors:
    """A TxnOffsetCommit whose verification the coordinator answered ``err``:
    ``CoordinatorPartitionWriter.maybeStartTransactionVerification`` fails with the manager's answer, which
    ``GroupCoordinatorService.commitTransactionalOffsets`` maps with ``handleOperationException``
    (CONCURRENT_TRANSACTIONS reaches the client, which retries)."""
    err = add_partitions_manager_error(err, generic_error_supported)
    return _OPERATION_ERROR_MAPPING.get(err, err)


def _key(group_id: str, partition: str) -> str:
    return json.dumps([group_id, partition])


@dataclass
class GroupCoordinator:
    """Committed and pending offsets of every group.

    >>> from txnspec.impl.partition import Partition
    >>> parts = {f"__consumer_offsets-{i}": Partition(f"__consumer_offsets-{i}") for i in range(50)}
    >>> g = GroupCoordinator(parts)
    >>> g.handle_txn_offset_commit("g", 7, 0, {"in-0": 5})
    {'in-0': <Errors.NONE: (0, False)>}
    >>> g.fetch_offsets("g", ["in-0"], require_stable=True)
    (<Errors.UNSTABLE_OFFSET_COMMIT: (88, True)>, {})
    >>> _ = g.write_txn_marker(g.partition_for("g"), 7, 0, 0, ControlType.COMMIT)
    >>> g.fetch_offsets("g", ["in-0"])
    (<Errors.NONE: (0, False)>, {'in-0': 5})
    """

    partitions: Mapping[str, Partition]
    num_partitions: int = 50
    committed: dict[tuple[str, str], int] = field(default_factory=dict)
    committed_record_offsets: dict[tuple[str, str], int] = field(default_factory=dict)  # OffsetAndMetadata.recordOffset
    # producer id -> (group, partition) -> (offset, record offset): pendingTransactionalOffsets
    pending: dict[int, dict[tuple[str, str], tuple[int, int]]] = field(default_factory=dict)
    active: bool = True
    membership: Membership | None = None  # the members' checks of commits (KIP-447), when attached
    consumer_groups: ConsumerGroups | None = None  # KIP-848's groups: their member-epoch checks, when attached
    rules: Rules = KAFKA

    def partition_for(self, group_id: str) -> str:
        return offsets_partition_for(group_id, self.num_partitions)

    def handle_offset_commit(self, group_id: str, offsets: Mapping[str, int], *, now_ms: int = 0,
                             member: MemberIdentity | None = None, api_version: int | None = None
                             ) -> dict[str, Errors]:
        """A plain ``OffsetCommit``: offsets are visible once written. ``api_version`` (None: the newest) decides
        the errors of a consumer group's member check."""
        return self._store(group_id, offsets, -1, -1, now_ms, member, api_version)

    def handle_txn_offset_commit(self, group_id: str, producer_id: int, producer_epoch: int,
                                 offsets: Mapping[str, int], *, now_ms: int = 0,
                                 member: MemberIdentity | None = None, api_version: int | None = None
                                 ) -> dict[str, Errors]:
        """``TxnOffsetCommit``: a transactional batch; offsets pending until the marker."""
        if producer_id < 0 or producer_epoch < 0:
            return dict.fromkeys(offsets, Errors.INVALID_REQUEST)
        return self._store(group_id, offsets, producer_id, producer_epoch, now_ms, member, api_version)

    def _store(self, group_id: str, offsets: Mapping[str, int], producer_id: int, producer_epoch: int,
               now_ms: int, member: MemberIdentity | None = None, api_version: int | None = None
               ) -> dict[str, Errors]:
        if not self.active:
            return dict.fromkeys(offsets, Errors.COORDINATOR_NOT_AVAILABLE)
        if self.consumer_groups is not None and group_id in self.consumer_groups:
            # ConsumerGroup.validateOffsetCommit: TxnOffsetCommit's generation id is the member epoch
            who = member or MemberIdentity()
            tx = producer_id >= 0
            version = api_version if api_version is not None else (LATEST_TXN_OFFSET_COMMIT if tx
                                                                   else LATEST_OFFSET_COMMIT)
            checked = self.consumer_groups.validate_offset_commit(
                group_id, who.member_id, who.group_instance_id, who.generation_id, transactional=tx,
                partitions=tuple(sorted(offsets)), version=version)
            if checked is not Errors.NONE:
                return dict.fromkeys(offsets, checked)
        elif self.membership is not None and member is not None:
            checked = self.membership.validate_offset_commit(group_id, member.member_id, member.group_instance_id,
                                                             member.generation_id, transactional=producer_id >= 0)
            if checked is not Errors.NONE:
                return dict.fromkeys(offsets, checked)
        if not offsets:
            return {}
        records = [Record(_key(group_id, tp), str(o), now_ms) for tp, o in sorted(offsets.items())]
        tx = producer_id >= 0
        result = self.partitions[self.partition_for(group_id)].append_records(
            producer_id, producer_epoch, 0 if tx else -1, records, tx, now_ms=now_ms, origin=AppendOrigin.COORDINATOR)
        error = _STORE_ERROR_MAPPING.get(result.error, result.error)
        if error is Errors.NONE:
            immediate = not tx or not self.rules.txn_offsets_wait_for_marker
            for i, (tp, o) in enumerate(sorted(offsets.items())):
                self._replay(group_id, tp, o, result.base_offset + i, producer_id if not immediate else -1)
        return dict.fromkeys(offsets, error)

    def _replay(self, group_id: str, partition: str, offset: int | None, record_offset: int, producer_id: int) -> None:
        """An offset commit record (``OffsetMetadataManager.replay``): pending for its producer if transactional;
        a tombstone (``offset`` None) removes the committed offset."""
        if offset is None:
            self.committed.pop((group_id, partition), None)
            self.committed_record_offsets.pop((group_id, partition), None)
        elif producer_id >= 0:
            self.pending.setdefault(producer_id, {})[(group_id, partition)] = (offset, record_offset)
        else:
            self.committed[(group_id, partition)] = offset
            self.committed_record_offsets[(group_id, partition)] = record_offset

    def write_txn_marker(self, partition: str, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                         result: ControlType, transaction_version: int = 0, *, now_ms: int = 0) -> Errors:
        """A marker for an offsets partition (``handleTxnCompletion`` after the marker is written)."""
        answer = self.partitions[partition].write_txn_marker(producer_id, producer_epoch, coordinator_epoch, result,
                                                             transaction_version, now_ms=now_ms)
        if answer.error is Errors.NONE:
            self._complete(producer_id, partition, result)
        return answer.error

    def _complete(self, producer_id: int, partition: str, result: ControlType) -> None:
        pending = self.pending.get(producer_id, {})
        for key in [k for k in pending if self.partition_for(k[0]) == partition]:
            offset, record_offset = pending.pop(key)
            newer = record_offset > self.committed_record_offsets.get(key, -1)
            if (result is ControlType.COMMIT or not self.rules.abort_drops_txn_offsets) and newer:
                self.committed[key] = offset
                self.committed_record_offsets[key] = record_offset
        if not pending:
            self.pending.pop(producer_id, None)

    def delete_offsets(self, group_id: str, partitions: Iterable[str], now_ms: int = 0) -> Errors:
        """Tombstones for the group's committed offsets of ``partitions`` (``OffsetMetadataManager.
        deleteOffsets``, also DeleteGroups and a deleted topic): written, then gone from ``committed``."""
        if not self.active:
            return Errors.COORDINATOR_NOT_AVAILABLE
        wanted = sorted(tp for tp in partitions if (group_id, tp) in self.committed)
        if not wanted:
            return Errors.NONE
        result = self.partitions[self.partition_for(group_id)].append_records(
            -1, -1, -1, [Record(_key(group_id, tp), None, now_ms) for tp in wanted], False, now_ms=now_ms,
            origin=AppendOrigin.COORDINATOR)
        error = _STORE_ERROR_MAPPING.get(result.error, result.error)
        if error is Errors.NONE:
            for tp in wanted:
                self._replay(group_id, tp, None, -1, -1)
        return error

    def fetch_offsets(self, group_id: str, partitions: Iterable[str],
                      require_stable: bool = False) -> tuple[Errors, dict[str, int]]:
        if not self.active:
            return Errors.COORDINATOR_NOT_AVAILABLE, {}
        wanted = list(partitions)
        if require_stable and any((group_id, tp) in p for p in self.pending.values() for tp in wanted):
            return Errors.UNSTABLE_OFFSET_COMMIT, {}
        return Errors.NONE, {tp: self.committed[(group_id, tp)] for tp in wanted if (group_id, tp) in self.committed}

    def load(self, partition_names: Sequence[str] | None = None) -> None:
        """Rebuild committed and pending offsets by replaying the offsets partitions (``loadGroupsAndOffsets``)."""
        self.committed.clear()
        self.committed_record_offsets.clear()
        self.pending.clear()
        for name in partition_names or sorted(self.partitions):
            p = self.partitions[name]
            for batch in p.log.read(p.log_start_offset, p.log_end_offset + 1):
                if batch.control_type is not None:
                    self._complete(batch.producer_id, name, batch.control_type)
                    continue
                for i, rec in enumerate(batch.records):
                    try:
                        group_id, tp = json.loads(str(rec.key))
                        offset = None if rec.value is None else int(str(rec.value))
                    except (ValueError, TypeError):
                        continue
                    self._replay(group_id, tp, offset, batch.base_offset + i,
                                 batch.producer_id if batch.is_transactional else -1)
        self.active = True


__all__ = ["GroupCoordinator"]
