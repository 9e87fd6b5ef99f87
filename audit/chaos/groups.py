"""Trace validation of the group coordinator: are the committed offsets the consumers read back a behaviour of the
spec's group coordinator (:mod:`txnspec.spec.group`), given the transactions' decisions?

What it checks
    Per consumer group (:func:`validate_groups`), each ``send_offsets_to_transaction`` is a ``TxnOffsetCommit`` held
    pending by the spec's group coordinator (``handle_txn_offset_commit``), in the order the calls completed (one
    that failed or gave no answer is settled as aborted: the workload aborts its transaction); each transaction's
    decision completes it (``complete_pending_txn_offset_commit``: COMMIT materialises it unless a newer record is
    committed). The final read of the group's committed offsets must be the spec's ``fetch_offsets``, and so must
    every read-back during the run (a member's rewind after an abort), up to when the reading consumer could have
    seen a transaction's markers: no earlier than its commit was invoked, no later than its transactional id went on
    (the coordinator starts nothing new for an id whose markers are unwritten).

How it scales
    No search: the offsets calls are replayed once in completion order (linear); each read-back is compared
    with the states its time window allows (at most the commits that overlap it).

Leaves out
    The member and generation checks of ``TxnOffsetCommit`` (a refused commit failed, and a failed commit is not
    replayed: the anomaly checker's ``fenced_commit`` and the partitions judge its transaction), the order of
    overlapping ``TxnOffsetCommit`` calls (taken by completion), ``require_stable`` (a read-back waits or not:
    both are allowed by the window), plain ``OffsetCommit`` (the workload commits offsets only in transactions).
"""

from __future__ import annotations

from dataclasses import dataclass

from txnspec.audit.chaos.anomalies import Final, Txn
from txnspec.audit.chaos.coordination import Verdict
from txnspec.audit.chaos.history import Op
from txnspec.spec.group import GroupState, complete_pending_txn_offset_commit, fetch_offsets, handle_txn_offset_commit
from txnspec.spec.messages import TxnOffsetCommit

RECORDS = 1_000  # __consumer_offsets record offsets per TxnOffsetCommit (one record per partition)


@dataclass
class _Commit:
    """One transaction's offsets for one group: when its TxnOffsetCommit was written, when its markers could
    have landed (from its commit's invoke to its id's next call), and the decision."""

    txn: Txn
    op: Op
    offsets: tuple[tuple[str, int], ...]
    visible_from: float
    visible_by: float
    commit: bool


def validate_groups(ops: list[Op], txns: dict[str, Txn], final: Final, decisions: dict[str, str]) -> Verdict:
    """The groups' committed offsets, replayed through the spec's group coordinator (module docstring)."""
    later: dict[str, list[float]] = {}  # each id's call completions: the markers of the one before had landed
    for op in ops:
        t = txns.get(str(op.invoke.value.get("txn"))) if op.invoke.value.get("txn") else None
        tid = t.tid if t is not None else (str(op.invoke.value.get("tid")) if op.f == "init" else None)
        if tid is not None and op.f in ("init", "send", "offsets") and op.outcome == "ok":
            later.setdefault(tid, []).append(op.done.time)
    pids = {tid: i + 1 for i, tid in enumerate(sorted({t.tid for t in txns.values()}))}
    commits: dict[str, list[_Commit]] = {}
    for t in txns.values():
        for op in t.offsets:
            decision = decisions.get(t.name, "COMMIT" if t.fate == "committed" else "ABORT")
            ends = [o.invoke.time for o in t.ends if o.f == "commit"]
            start = min(ends) if ends else float("inf")
            by = min((x for x in later.get(t.tid, []) if x > start), default=float("inf"))
            offsets = tuple(sorted((k.replace("/", "-"), int(v)) for k, v in op.invoke.value["offsets"].items()))
            commits.setdefault(str(op.invoke.value.get("group")), []).append(
                _Commit(t, op, offsets, start, by, decision == "COMMIT" and op.outcome == "ok"))
    reads = [op for op in ops if op.f == "seek" and op.outcome == "ok" and op.invoke.value.get("why") == "abort"]
    checked = 0
    for group, mine in sorted(commits.items()):
        mine.sort(key=lambda c: (c.op.done.time, c.op.invoke.index))
        members = {t.process for t in txns.values() for o in t.offsets if o.invoke.value.get("group") == group}
        # the spec's group after the first k commits were written and settled: the newest record wins
        states: list[GroupState] = [GroupState()]
        for k, c in enumerate(mine):
            req = TxnOffsetCommit(c.txn.tid, group, pids[c.txn.tid], 0, c.offsets)
            state, _ = handle_txn_offset_commit(states[-1], req, record_offset=k * RECORDS)
            states.append(complete_pending_txn_offset_commit(state, pids[c.txn.tid], c.commit))
        for read in [r for r in reads if r.process in members]:
            for key, value in read.done.value.get("positions", {}).items():
                checked += 1
                tp = key.replace("/", "-")
                allowed = _allowed(mine, states, group, tp, read.invoke.time, read.done.time)
                if int(value) not in allowed and not (int(value) == 0 and None in allowed):
                    return Verdict(False, True, len(commits), checked, 0, f"group {group}: {key} at event "
                                   f"{read.invoke.index}", f"{read.process} read back committed offset {value}; the "
                                   f"spec's group coordinator allows {sorted(a for a in allowed if a is not None)}"
                                   + (" or none" if None in allowed else ""), read.invoke.index)
        committed = final.groups.get(group)
        if committed is None:
            continue
        for key, value in sorted(committed.items()):
            checked += 1
            _, spec_value = fetch_offsets(states[-1], group, key.replace("/", "-"), False)
            if int(value) >= 0 and spec_value != int(value):
                last = next((c for c in reversed(mine) if c.commit and any(p == key.replace("/", "-")
                                                                            for p, _ in c.offsets)), None)
                return Verdict(False, True, len(commits), checked, 0, f"group {group}: {key} (final read)",
                               f"the group's committed offset is {value}; the spec's group coordinator, with "
                               f"every TxnOffsetCommit replayed, holds {spec_value}"
                               + (f" (from {last.txn.name})" if last is not None else ""),
                               last.op.invoke.index if last is not None else None)
    return Verdict(True, True, len(commits), checked, 0)


def _allowed(mine: list[_Commit], states: list[GroupState], group: str, tp: str, start: float, end: float
             ) -> set[int | None]:
    """The committed offsets of ``tp`` a read between ``start`` and ``end`` may return: the spec's value after
    every commit whose markers had surely landed, and after any that might have landed too."""
    values: set[int | None] = set()
    sure = [k + 1 for k, c in enumerate(mine) if c.visible_by < start]
    floor = max(sure, default=0)
    for k in range(floor, len(states)):
        if k > floor and mine[k - 1].visible_from > end:
            continue  # this commit cannot be visible yet; a later one may still be (overlapping transactions)
        values.add(fetch_offsets(_only(states, mine, k, floor, end), group, tp, False)[1])
    return values


def _only(states: list[GroupState], mine: list[_Commit], k: int, floor: int, end: float) -> GroupState:
    """The spec's group with commits up to ``floor`` and those up to ``k`` that could be visible by ``end``."""
    state = states[floor]
    for j in range(floor, k):
        c = mine[j]
        if c.visible_from > end:
            continue
        pid = j + 1_000_000  # a producer id of its own: settling one commit never touches another's pending offsets
        state, _ = handle_txn_offset_commit(state, TxnOffsetCommit(c.txn.tid, group_of(c), pid, 0, c.offsets),
                                            record_offset=j * RECORDS)
        state = complete_pending_txn_offset_commit(state, pid, c.commit)
    return state


def group_of(c: _Commit) -> str:
    return str(c.op.invoke.value.get("group"))
