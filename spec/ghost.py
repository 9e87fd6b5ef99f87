"""Ghost state of the system model: what the properties need to know and the protocol never reads.

System
    Every produce carries the tag ``(producer, incarnation, transaction number)`` of the transaction the
    application sent it in (:data:`~txnspec.spec.network.Tag`); :class:`Ghost` records which tag each
    appended batch had, the coordinator's decisions with the tag of the transaction decided, what the
    application was told, and which producer instance last initialised each transactional id.

Assumptions
    Ghost fields never influence a guard or an effect of the protocol: removing them would not change which
    actions are enabled (they only split states that the properties must tell apart).

    No property reads the order in which batches were appended to *different* partitions, in which
    different transactions were decided, or in which different applications were told their outcomes: the
    histories are kept in a canonical order (batches by partition and offset, decisions and outcomes sorted),
    so runs that differ only in that order are one state. (Three producers: 828,940 states become 398,620.)
"""

from __future__ import annotations

from bisect import insort
from typing import Any

from txnspec.spec import constants, two_phase
from txnspec.spec import coordinator_state as coord_state
from txnspec.spec.errors import Errors
from txnspec.spec.messages import EndTxn, InitProducerId, InitProducerIdResponse, TransactionResult
from txnspec.spec.network import Envelope, Tag
from txnspec.spec.txn_state import ONGOING, PREPARE_ABORT, PREPARE_COMMIT, PREPARE_STATES
from txnspec.spec.values import replace, value


@value
class AppendedBatch:
    """Ghost record of one data batch appended to a partition, with the transaction it was sent in."""

    partition: str
    base_offset: int
    producer_id: int
    producer_epoch: int
    first_seq: int
    last_seq: int
    transactional: bool
    tag: Tag | None
    fenced_at_append: bool  # the coordinator had already moved past (pid, epoch) when it was appended


Decision = tuple[str, Tag | None, TransactionResult, Tag | None]
NO_TAG: Tag = (-1, -1, -1)  # sorts a missing tag first


def batch_order(b: AppendedBatch) -> tuple[str, int]:
    """Batches in log order per partition, partitions by name."""
    return b.partition, b.base_offset


def decision_order(d: Decision) -> tuple[str, Tag, str, Tag]:
    tid, opened, result, by = d
    return tid, opened or NO_TAG, result.value, by or NO_TAG


def in_order(history: tuple[Any, ...], entry: Any, key: Any = None) -> tuple[Any, ...]:
    """``history`` (sorted by ``key``) with ``entry`` inserted where it sorts (after equal entries)."""
    entries = list(history)
    insort(entries, entry, key=key)
    return tuple(entries)


@value
class Ghost:
    batches: tuple[AppendedBatch, ...] = ()  # sorted by batch_order
    open_txn: tuple[tuple[str, Tag], ...] = ()  # tid -> the transaction the coordinator has Ongoing
    # (tid, the transaction the coordinator had open, the result, the transaction of the request that decided
    # it: None when the coordinator decided by itself, on a timeout or when fencing), sorted by decision_order
    decisions: tuple[Decision, ...] = ()
    told: tuple[tuple[Tag, str], ...] = ()  # what the application was told ("committed", "aborted", "fatal"), sorted
    owner: tuple[tuple[str, tuple[int, int]], ...] = ()  # tid -> (producer, incarnation) last initialised
    fenced_commit: bool = False  # a commit was decided for a request from a fenced instance
    # KIP-447: producers whose pending offsets the group took from a member fenced by a rebalance; whether such
    # offsets were committed; whether offsets were committed once a rebalance had moved the generation on
    fenced_offsets: frozenset[int] = frozenset()
    fenced_offsets_committed: bool = False
    committed_after_rebalance: bool = False
    # issue 31's expiries and plain commits (constant in a scenario without them): the (partition, producer id)
    # entries a partition expired and whether one of those producers appended there again; the producer ids of
    # expired transactional ids and whether an expired id was initialised again; the record offset of each plain
    # OffsetCommit per (group, partition), and whether one landed while an older transactional offset was pending
    expired_producers: frozenset[tuple[str, int]] = frozenset()
    appended_after_expiry: bool = False
    retired_producer_ids: frozenset[int] = frozenset()
    expired_ids: frozenset[str] = frozenset()
    reinitialised_after_expiry: bool = False
    plain_commits: tuple[tuple[tuple[str, str], int], ...] = ()
    plain_overtook_pending: bool = False
    # KIP-939: the coordinator's timeout aborted a two-phase-commit transaction; the (producer id, epoch) pairs of
    # transactions kept by an InitProducerId with keepPreparedTxn, and whether a batch was appended under one of
    # them after it was kept: (partition, offset)
    two_phase_timed_out: bool = False
    kept: frozenset[tuple[int, int]] = frozenset()
    written_under_kept: frozenset[tuple[str, int]] = frozenset()
    # the (partition, producer id) of every open transaction an admin aborted (Admin.abortTransaction)
    admin_aborted: frozenset[tuple[str, int]] = frozenset()

    def tell(self, tag: Tag, outcome: str) -> Ghost:
        return replace(self, told=in_order(self.told, (tag, outcome)))

    def appended(self, batch: AppendedBatch) -> Ghost:
        again = (batch.partition, batch.producer_id) in self.expired_producers
        under_kept = self.written_under_kept
        if (batch.producer_id, batch.producer_epoch) in self.kept:
            under_kept = under_kept | {(batch.partition, batch.base_offset)}
        return replace(self, batches=in_order(self.batches, batch, batch_order),
                       appended_after_expiry=self.appended_after_expiry or again, written_under_kept=under_kept)

    def offsets_accepted(self, producer_id: int, fenced: bool) -> Ghost:
        """The group took pending offsets from ``producer_id`` (``fenced``: its member was not current)."""
        return replace(self, fenced_offsets=self.fenced_offsets | {producer_id}) if fenced else self

    def offsets_settled(self, producer_id: int, commit: bool, rebalanced: bool) -> Ghost:
        """A marker settled ``producer_id``'s pending offsets (``rebalanced``: the group's generation had moved)."""
        fenced = producer_id in self.fenced_offsets
        if not fenced and not (commit and rebalanced):
            return self
        return replace(self, fenced_offsets=self.fenced_offsets - {producer_id},
                       fenced_offsets_committed=self.fenced_offsets_committed or (commit and fenced),
                       committed_after_rebalance=self.committed_after_rebalance or (commit and rebalanced))


def set_pair(pairs: tuple[tuple[Any, Any], ...], key: Any, value: Any) -> tuple[tuple[Any, Any], ...]:
    """``pairs`` (a canonical, sorted map) with ``key`` mapped to ``value``."""
    kept = [(k, v) for k, v in pairs if k != key]
    kept.append((key, value))
    kept.sort(key=lambda kv: repr(kv[0]))
    return tuple(kept)


def get_pair(pairs: tuple[tuple[Any, Any], ...], key: Any, default: Any = None) -> Any:
    for k, v in pairs:
        if k == key:
            return v
    return default


def _completes_kept(ghost: Ghost, env: Envelope, owner: tuple[int, int]) -> bool:
    """The EndTxn is the owner's completion of a transaction it kept (KIP-939): it carries the tag of the
    predecessor that opened the transaction, under the bumped epoch, never the kept pair itself."""
    body = env.body
    assert env.tag is not None and isinstance(body, EndTxn)
    return (env.tag[:2] == (owner[0], owner[1] - 1) and (body.producer_id, body.producer_epoch) not in ghost.kept
            and any(pid == body.producer_id for pid, _ in ghost.kept))


def after_coordinator_step(ghost: Ghost, before: coord_state.CoordinatorState, result: coord_state.CoordinatorResult,
                           env: Envelope) -> Ghost:
    """Record which application transaction the coordinator opened or decided on ``env``."""
    for tid, record in result.appended:
        if record is None:
            continue
        previous = before.metadata(tid)
        if record.state is ONGOING and (previous is None or previous.state is not ONGOING) and env.tag is not None:
            ghost = replace(ghost, open_txn=set_pair(ghost.open_txn, tid, env.tag))
        if record.state in PREPARE_STATES:
            opened = get_pair(ghost.open_txn, tid)
            decided = TransactionResult.COMMIT if record.state is PREPARE_COMMIT else TransactionResult.ABORT
            decided_by = env.tag if isinstance(env.body, EndTxn) else None
            if env.body is None and record.state is PREPARE_ABORT and previous is not None \
                    and previous.txn_timeout_ms == two_phase.INT_MAX_TIMEOUT:  # the timeout scan (no request)
                ghost = replace(ghost, two_phase_timed_out=True)
            decision = (tid, opened, decided, decided_by)
            ghost = replace(ghost, decisions=in_order(ghost.decisions, decision, decision_order),
                            open_txn=tuple((t, g) for t, g in ghost.open_txn if t != tid))
            if decided is TransactionResult.COMMIT and isinstance(env.body, EndTxn) and env.tag is not None:
                owner = get_pair(ghost.owner, tid)
                if owner is not None and owner != env.tag[:2] and not _completes_kept(ghost, env, owner):
                    ghost = replace(ghost, fenced_commit=True)
    if isinstance(env.body, InitProducerId) and isinstance(result.response, InitProducerIdResponse) \
            and result.response.error is Errors.NONE and env.tag is not None and env.body.transactional_id:
        ghost = replace(ghost, owner=set_pair(ghost.owner, env.body.transactional_id, env.tag[:2]))
        if result.response.ongoing_txn_producer_id != constants.NO_PRODUCER_ID:
            kept = (result.response.ongoing_txn_producer_id, result.response.ongoing_txn_producer_epoch)
            ghost = replace(ghost, kept=ghost.kept | {kept})
        if env.body.transactional_id in ghost.expired_ids:
            ghost = replace(ghost, reinitialised_after_expiry=True)
    return ghost

