"""The abstract state a system under test is compared on after every step, as typed data, and its comparison.

What it models
    :class:`AbstractState` is what the spec holds, component by component, in plain JSON values (so that a
    trace records it and any adapter can produce it):

    ``coordinator``
        Per transactional id the coordinator's ``TransactionMetadata``: state, pending state, producer id and
        epoch, last epoch, previous and next producer id, partitions, timeout, the client's transaction
        version (:class:`CoordinatorEntry`).
    ``txn_log``
        Per transactional id the last record of the transaction log (``TxnTransitMetadata``), as compaction
        leaves the log: an id whose last record is a tombstone (an expired transactional id) has none
        (:class:`TxnLogRecord`).
    ``partitions``
        Per partition (the data partitions and the group's ``__consumer_offsets`` partition) its log (each batch:
        offsets, producer id, epoch, sequences, transactional flag, control marker and its coordinator
        epoch), log end offset, high watermark, last stable offset, aborted-transaction index, producer state
        (epoch, coordinator epoch, the last five batches, the current transaction's first offset) and the
        verification entries of KIP-890 (:class:`PartitionView`).
    ``group``
        Committed offsets with their record offsets, pending transactional offsets per producer, and the
        groups' generations and member counts (:class:`GroupView`).
    ``producers``
        Per spec producer (``producer-k``) its client's ``TransactionManager``: state, producer id and epoch,
        the application's transaction number, the batches in flight, the partitions added to the transaction
        (:class:`ClientView`).

    :func:`of_spec` is the spec's abstraction of a :class:`~txnspec.spec.system_state.SystemState`;
    :func:`txnspec.conformance.adapters.impl_abstraction.of_cluster` the implementation's. :func:`compare`
    finds the first difference, naming component and field (``coordinator[t1].producer_epoch: spec 3, impl 2``).

Legitimate differences
    An adapter declares what its system holds otherwise as a table (``abstraction_differences``: a
    :data:`PathPattern`, a tuple of keys with :data:`ANY` for any key such as ``("txn_log", ANY,
    "prev_producer_id")``, or a component's name alone, to the reason); a path in the table is not compared,
    and a component the adapter does not return is a divergence unless the table names it. :data:`TIME` is the one every
    adapter shares: the spec's clock is abstract, so timestamps are not part of the abstraction at all.

Leaves out
    Timestamps, the ghost, the network (compared message by message by the replay), the fault budget.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from txnspec.spec.network import producer_address

JSON = Any
COMPONENTS = ("coordinator", "txn_log", "partitions", "group", "producers")
TIME = "the spec's time is abstract (TxnMetadata.txn_start_ms and the timestamps of batches are not compared)"


class CoordinatorEntry(TypedDict):
    state: str
    pending: str | None
    producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    prev_producer_id: int
    next_producer_id: int
    partitions: list[str]
    txn_timeout_ms: int
    transaction_version: int


class TxnLogRecord(TypedDict):
    state: str
    producer_id: int
    producer_epoch: int
    prev_producer_id: int
    next_producer_id: int
    partitions: list[str]
    txn_timeout_ms: int
    transaction_version: int


class ProducerEntryView(TypedDict):
    producer_epoch: int
    coordinator_epoch: int
    batches: list[list[int]]  # [first seq, last seq, first offset, last offset] of the last five batches
    current_txn_first_offset: int


class PartitionView(TypedDict):
    # [base offset, last offset, pid, epoch, base seq, last seq, transactional, control, coordinator epoch]
    log: list[list[Any]]
    log_end: int
    hw: int
    lso: int
    aborted: list[list[int]]  # [producer id, first offset, last offset, last stable offset]
    producers: dict[str, ProducerEntryView]  # by producer id (as text: JSON keys)
    verifying: dict[str, list[Any]]  # producer id -> [lowest sequence, epoch, supports epoch bump]


class GroupView(TypedDict):
    committed: dict[str, list[int]]  # "group/partition" -> [offset, record offset]
    # producer id -> "group/partition" -> [offset, record offset]; without the spec's PendingOffsets.producer_epoch,
    # which Kafka's pendingTransactionalOffsets (keyed by producer id) do not hold
    pending: dict[str, dict[str, list[int]]]
    groups: dict[str, dict[str, int]]  # group -> {"generation": ..., "members": count}
    # KIP-848: group -> {"epoch": group epoch, "members": member id -> {"epoch", "assigned", "revoking"}}, where
    # assigned and revoking map each partition to its assignment epoch
    consumer_groups: dict[str, dict[str, Any]]


class ClientView(TypedDict):
    phase: str
    producer_id: int
    epoch: int
    txn: int
    in_flight: list[list[Any]]  # [partition, producer id, epoch, base sequence], sorted
    added: list[str]  # TV1: the partitions the coordinator acknowledged in the transaction (TV2 keeps none)


class AbstractState(TypedDict):
    coordinator: dict[str, CoordinatorEntry]
    txn_log: dict[str, TxnLogRecord]
    partitions: dict[str, PartitionView]
    group: GroupView
    producers: dict[str, ClientView]


# --- the spec's abstraction ------------------------------------------------------------------------------

@functools.lru_cache(maxsize=4096)
def _coordinator_entry(md: Any) -> CoordinatorEntry:
    return {"state": str(md.state), "pending": None if md.pending_state is None else str(md.pending_state),
            "producer_id": md.producer_id, "producer_epoch": md.producer_epoch,
            "last_producer_epoch": md.last_producer_epoch, "prev_producer_id": md.prev_producer_id,
            "next_producer_id": md.next_producer_id, "partitions": sorted(md.partitions),
            "txn_timeout_ms": md.txn_timeout_ms, "transaction_version": md.transaction_version}


@functools.lru_cache(maxsize=4096)
def _log_record(t: Any) -> TxnLogRecord:
    return {"state": str(t.state), "producer_id": t.producer_id, "producer_epoch": t.producer_epoch,
            "prev_producer_id": t.prev_producer_id, "next_producer_id": t.next_producer_id,
            "partitions": sorted(t.partitions), "txn_timeout_ms": t.txn_timeout_ms,
            "transaction_version": t.transaction_version}


@functools.lru_cache(maxsize=4096)
def _partition_view(ps: Any) -> PartitionView:
    return {
        "log": [[b.base_offset, b.last_offset, b.producer_id, b.producer_epoch, b.base_sequence, b.last_sequence,
                 b.transactional, None if b.control is None else str(b.control), b.coordinator_epoch] for b in ps.log],
        "log_end": ps.log_end_offset, "hw": ps.hw, "lso": ps.last_stable_offset,
        "aborted": [[a.producer_id, a.first_offset, a.last_offset, a.last_stable_offset] for a in ps.aborted_index],
        "producers": {str(pid): {"producer_epoch": e.producer_epoch, "coordinator_epoch": e.coordinator_epoch,
                                 "batches": [[b.first_seq, b.last_seq, b.first_offset, b.last_offset]
                                             for b in e.batches],
                                 "current_txn_first_offset": e.current_txn_first_offset}
                      for pid, e in sorted(ps.producers)},
        "verifying": {str(pid): [v.lowest_sequence, v.epoch, v.supports_epoch_bump] for pid, v in sorted(ps.verifying)},
    }


@functools.lru_cache(maxsize=4096)
def _group_view(g: Any) -> GroupView:
    pending: dict[str, dict[str, list[int]]] = {}
    for p in g.pending:
        entry = pending.setdefault(str(p.producer_id), {})
        for partition, record in p.offsets:
            entry[f"{p.group_id}/{partition}"] = [record.offset, record.record_offset]
    return {"committed": {f"{group}/{p}": [r.offset, r.record_offset] for (group, p), r in g.committed},
            "pending": pending,
            "groups": {c.group_id: {"generation": c.generation_id, "members": len(c.members)} for c in g.groups},
            "consumer_groups": {c.group_id: consumer_group_view(c.group_epoch, (
                (m.member_id, m.member_epoch, dict(m.assigned), dict(m.revoking)) for m in c.members))
                for c in g.consumer_groups}}


def consumer_group_view(epoch: int, members: Any, offset: int = 0) -> dict[str, Any]:
    """A consumer group's view from its epoch and ``(member id, member epoch, assigned, revoking)`` tuples,
    every epoch less ``offset``."""
    return {"epoch": epoch - offset,
            "members": {m: {"epoch": e - offset, "assigned": {p: a - offset for p, a in sorted(assigned.items())},
                            "revoking": {p: a - offset for p, a in sorted(revoking.items())}}
                        for m, e, assigned, revoking in sorted(members)}}


@functools.lru_cache(maxsize=4096)
def _client_view(p: Any) -> ClientView:
    return {"phase": p.phase.value, "producer_id": p.producer_id, "epoch": p.producer_epoch, "txn": p.txn_no,
            "in_flight": sorted([list(b) for b in p.in_flight]), "added": sorted(p.added)}


def of_spec(state: Any) -> AbstractState:
    """The spec's abstract state of a :class:`txnspec.spec.system_state.SystemState`."""
    cs = state.coordinator
    return {"coordinator": {tid: _coordinator_entry(md) for tid, md in cs.cache},
            "txn_log": {tid: _log_record(t) for tid, t in cs.txn_log if t is not None},
            "partitions": {name: _partition_view(ps) for name, ps in state.partitions},
            "group": _group_view(state.group),
            "producers": {producer_address(p.index).text: _client_view(p) for p in state.producers}}


# --- comparison ----------------------------------------------------------------------------------------

Path = tuple[str, ...]


class _Any(enum.Enum):
    ANY = "*"

    def __str__(self) -> str:
        return "*"


ANY = _Any.ANY
"""In a :data:`PathPattern`: any key at that place (a transactional id, a partition, a producer)."""

PathPattern = tuple[str | _Any, ...]
"""A path of the abstract state with :data:`ANY` for any key, e.g. ``("txn_log", ANY, "prev_producer_id")``."""

Table = Mapping[PathPattern | str, str]
"""The legitimate differences of an adapter: pattern (or a component's name alone) -> reason."""


@dataclass(frozen=True)
class Absent:
    """What one side of a difference has where the other has a value: a key it lacks, a component not returned."""

    what: str

    def __str__(self) -> str:
        return f"({self.what})"


NONE, PRESENT, NOT_RETURNED = Absent("none"), Absent("present"), Absent("not returned by the adapter")


def render(path: Path) -> str:
    """``("coordinator", "t1", "producer_epoch")`` -> ``coordinator[t1].producer_epoch``."""
    if not path:
        return "(the whole state)"
    out = path[0]
    if len(path) > 1:
        out += f"[{path[1]}]"
    for part in path[2:]:
        out += f"[{part}]" if part.lstrip("-").isdigit() else f".{part}"
    return out


def patterns(table: Table) -> tuple[PathPattern, ...]:
    """The patterns of ``table``; a text key is one component's name (a dotted text is refused: say the path as a
    tuple, the keys of the abstract state may hold dots)."""
    out: list[PathPattern] = []
    for key in table:
        if isinstance(key, str):
            if key not in COMPONENTS:
                raise ValueError(f"abstraction_differences: {key!r} is not a component ({', '.join(COMPONENTS)}); "
                                 "a deeper path is a tuple such as ('txn_log', ANY, 'prev_producer_id')")
            out.append((key,))
        else:
            out.append(tuple(key))
    return tuple(out)


def _excluded(path: Path, table: tuple[PathPattern, ...]) -> bool:
    return any(len(parts) <= len(path) and all(p is ANY or p == q for p, q in zip(parts, path, strict=False))
               for parts in table)


def _walk(expected: Any, actual: Any, path: Path, table: tuple[PathPattern, ...]) -> Iterator[tuple[Path, Any, Any]]:
    if _excluded(path, table):
        return
    if isinstance(expected, dict) and isinstance(actual, dict):
        for k in list(expected) + [k for k in actual if k not in expected]:
            if k not in actual or k not in expected:
                if not _excluded((*path, str(k)), table):
                    yield (*path, str(k)), expected.get(k, NONE), actual.get(k, NONE)
                continue
            yield from _walk(expected[k], actual[k], (*path, str(k)), table)
        return
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual) \
            and any(isinstance(x, dict | list) for x in expected):
        for i, (x, y) in enumerate(zip(expected, actual, strict=True)):
            yield from _walk(x, y, (*path, str(i)), table)
        return
    if expected != actual:
        yield path, expected, actual


def differences(expected: Mapping[str, Any], actual: Mapping[str, Any],
                table: Table | None = None) -> list[tuple[Path, Any, Any]]:
    """Every difference between two abstract states outside ``table``, as (path, spec's, system's), in the
    order of :data:`COMPONENTS`. A component ``actual`` lacks and ``table`` does not name is one."""
    excluded = patterns(table or {})
    out: list[tuple[Path, Any, Any]] = []
    for component in COMPONENTS:
        if component not in expected or _excluded((component,), excluded):
            continue
        if component not in actual:
            out.append(((component,), PRESENT, NOT_RETURNED))
            continue
        if expected[component] == actual[component]:  # the common case, at C speed
            continue
        out.extend(_walk(expected[component], actual[component], (component,), excluded))
    return out


def compare(expected: Mapping[str, Any], actual: Mapping[str, Any], table: Table | None = None,
            *, system: str = "impl") -> str | None:
    """None when equal outside ``table``; else the first difference, ``coordinator[t1].producer_epoch: spec 3,
    impl 2`` (with how many more there are)."""
    found = differences(expected, actual, table)
    if not found:
        return None
    path, x, y = found[0]
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    return f"{render(path)}: spec {_text(x)}, {system} {_text(y)}{more}"


def _text(value: Any) -> str:
    import json

    return str(value) if isinstance(value, Absent) else json.dumps(value, sort_keys=True)
