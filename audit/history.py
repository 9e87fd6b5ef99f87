"""Histories of a Kafka client workload and the anomalies a transactional broker must never show.

A history is a list of completed operations, JSON Lines on disk, one object per line::

    {"index": 3, "process": "txn-a#0", "f": "txn", "outcome": "ok", "invoked": 1.25, "completed": 1.31,
     "value": {"end": "commit", "writes": [["out", 0, "a-3"]], "offsets": {"in/0": 4}, "group": "g"}}

``f`` is one of ``init`` (a producer instance initialised a transactional id: ``value.transactional_id``),
``txn`` (a transaction: its writes, the consumer offsets it sent, how it ended), ``write`` (an idempotent,
non-transactional write), ``read`` (a read to the end of some partitions: ``value.isolation``,
``value.records`` as ``[topic, partition, offset, value]`` in poll order, ``value.partitions`` it covered)
and ``offsets`` (a group's committed offsets, ``value.offsets``). ``outcome`` is ``ok``, ``fail`` (it
certainly did not take effect) or ``info`` (indefinite: it may or may not have). Times are seconds on one
monotonic clock. Every written value is unique, so a value names its write.

The checker (:func:`check`) follows Elle's vocabulary where it applies (G1a aborted read, lost write,
duplicate) and Kafka's guarantees for the rest; each anomaly kind is one
:class:`~txnspec.audit.report.RuleResult` (``history.<kind>``) whose examples list the
operations involved. It is pure: only :func:`load` and :func:`save` touch files.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from txnspec.audit.report import RuleResult

KINDS = ("init", "txn", "write", "read", "offsets")
OUTCOMES = ("ok", "fail", "info")


class HistoryError(ValueError):
    """A malformed history; the message names the line and what was wrong."""


@dataclass
class Op:
    index: int
    process: str
    f: str
    outcome: str
    invoked: float
    completed: float
    value: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def brief(self) -> dict[str, Any]:
        return {"index": self.index, "process": self.process, "f": self.f, "outcome": self.outcome,
                **({"error": self.error} if self.error else {}), "value": self.value}


def op_from_json(data: Any, where: str) -> Op:
    if not isinstance(data, dict):
        raise HistoryError(f"{where}: an operation must be a JSON object, not {type(data).__name__}")
    missing = [k for k in ("index", "process", "f", "outcome", "invoked", "completed") if k not in data]
    if missing:
        raise HistoryError(f"{where}: missing field(s) {', '.join(missing)}")
    if data["f"] not in KINDS:
        raise HistoryError(f"{where}: unknown operation {data['f']!r}; known: {', '.join(KINDS)}")
    if data["outcome"] not in OUTCOMES:
        raise HistoryError(f"{where}: unknown outcome {data['outcome']!r}; known: {', '.join(OUTCOMES)}")
    value = data.get("value", {})
    if not isinstance(value, dict):
        raise HistoryError(f"{where}: 'value' must be an object")
    try:
        op = Op(int(data["index"]), str(data["process"]), data["f"], data["outcome"], float(data["invoked"]),
                float(data["completed"]), value, data.get("error"))
    except (TypeError, ValueError) as exc:
        raise HistoryError(f"{where}: {exc}") from None
    if op.f == "read" and not isinstance(value.get("records", []), list):
        raise HistoryError(f"{where}: a read's 'records' must be a list")
    return op


def load(path: Path) -> list[Op]:
    ops = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise HistoryError(f"{path}:{number}: not JSON ({exc.msg})") from None
        ops.append(op_from_json(data, f"{path}:{number}"))
    return ops


def save(ops: Iterable[Op], path: Path) -> None:
    path.write_text("".join(json.dumps(asdict(op), sort_keys=True) + "\n" for op in ops))


# --- the checker ---------------------------------------------------------------------------------------

RULES = {
    "aborted_read": "a read_committed read never returns a value of a transaction that aborted (G1a)",
    "open_read": "a read_committed read never returns a value of a transaction whose commit was not yet invoked",
    "torn_transaction": "a read_committed read to the end sees all of a committed transaction's writes or none",
    "lost_write": "an acknowledged write or committed transaction is in every read_committed read to the end "
                  "that started after it completed",
    "duplicate": "a value sent once is read at most once",
    "inconsistent_offsets": "two reads agree on the value at each (topic, partition, offset)",
    "non_monotonic_offsets": "offsets of one partition increase within a read",
    "fenced_write_accepted": "no transaction of a producer instance fenced by a newer instance commits, and none of "
                             "its writes becomes visible",
    "offsets_without_output": "a group offset committed by a transaction is visible only with that transaction's "
                              "output",
    "offsets_lost": "after a transaction that sent consumer offsets commits, the group's committed offset is at "
                    "least those offsets",
}


@dataclass
class _Txn:
    op: Op

    @property
    def writes(self) -> list[tuple[str, int, str]]:
        return [(str(t), int(p), str(v)) for t, p, v in self.op.value.get("writes", [])]

    @property
    def values(self) -> set[str]:
        return {v for _, _, v in self.writes}

    @property
    def end(self) -> str:
        return str(self.op.value.get("end", ""))

    @property
    def committed(self) -> bool:
        return self.end == "commit" and self.op.outcome == "ok"

    @property
    def aborted(self) -> bool:
        return (self.end == "abort" and self.op.outcome == "ok") or self.op.outcome == "fail"

    @property
    def end_invoked(self) -> float:
        return float(self.op.value.get("end_invoked", self.op.completed))


def _rule(kind: str) -> RuleResult:
    return RuleResult("client", f"history.{kind}", RULES[kind])


def _flag(rule: RuleResult, example: dict[str, Any]) -> None:
    rule.violations += 1
    if len(rule.examples) < 3:
        rule.examples.append(example)


def check(ops: list[Op]) -> list[RuleResult]:
    """Every anomaly kind of :data:`RULES`, checked over the history."""
    rules = {kind: _rule(kind) for kind in RULES}
    txns = [_Txn(op) for op in ops if op.f == "txn"]
    writer: dict[str, _Txn | Op] = {}
    for t in txns:
        for value in t.values:
            writer[value] = t
    for op in ops:
        if op.f == "write":
            writer[str(op.value.get("value"))] = op
    reads = [op for op in ops if op.f == "read" and op.outcome == "ok"]
    committed_reads = [r for r in reads if r.value.get("isolation") == "read_committed"]

    _check_reads(rules, reads, committed_reads, writer)
    _check_completeness(rules, txns, ops, committed_reads)
    _check_fencing(rules, ops, txns, committed_reads)
    _check_offsets(rules, ops, txns, committed_reads)
    return list(rules.values())


def _records(read: Op) -> list[tuple[str, int, int, str]]:
    return [(str(t), int(p), int(o), str(v)) for t, p, o, v in read.value.get("records", [])]


def _covers(read: Op, topic: str, partition: int) -> bool:
    return [topic, partition] in read.value.get("partitions", []) or f"{topic}/{partition}" in read.value.get(
        "partitions", [])


def _check_reads(rules: dict[str, RuleResult], reads: list[Op], committed_reads: list[Op],
                 writer: dict[str, _Txn | Op]) -> None:
    at_offset: dict[tuple[str, int, int], tuple[str, Op]] = {}
    for read in reads:
        seen: dict[str, int] = defaultdict(int)
        last: dict[tuple[str, int], int] = {}
        for topic, partition, offset, value in _records(read):
            seen[value] += 1
            rules["duplicate"].checked += 1
            if seen[value] == 2:
                _flag(rules["duplicate"], {"value": value, "read": read.brief(),
                                           "written_by": _brief(writer.get(value))})
            rules["non_monotonic_offsets"].checked += 1
            key = (topic, partition)
            if key in last and offset <= last[key]:
                _flag(rules["non_monotonic_offsets"], {"partition": f"{topic}/{partition}", "offset": offset,
                                                       "after": last[key], "read": read.index})
            last[key] = offset
            rules["inconsistent_offsets"].checked += 1
            earlier = at_offset.setdefault((topic, partition, offset), (value, read))
            if earlier[0] != value:
                _flag(rules["inconsistent_offsets"], {"partition": f"{topic}/{partition}", "offset": offset,
                                                      "values": [earlier[0], value],
                                                      "reads": [earlier[1].index, read.index]})
    for read in committed_reads:
        for _, _, _, value in _records(read):
            w = writer.get(value)
            if not isinstance(w, _Txn):
                continue
            rules["aborted_read"].checked += 1
            if w.aborted:
                _flag(rules["aborted_read"], {"value": value, "read": read.index, "transaction": w.op.brief()})
            rules["open_read"].checked += 1
            if read.completed < w.end_invoked:
                _flag(rules["open_read"], {"value": value, "read": read.brief(), "transaction": w.op.brief()})


def _brief(w: _Txn | Op | None) -> dict[str, Any] | None:
    if w is None:
        return None
    return w.op.brief() if isinstance(w, _Txn) else w.brief()


def _check_completeness(rules: dict[str, RuleResult], txns: list[_Txn], ops: list[Op],
                        committed_reads: list[Op]) -> None:
    acked_writes = [op for op in ops if op.f == "write" and op.outcome == "ok"]
    for read in committed_reads:
        visible = {v for _, _, _, v in _records(read)}
        for t in txns:
            if read.invoked < t.op.completed:
                continue
            covered = [(tp, p, v) for tp, p, v in t.writes if _covers(read, tp, p)]
            if not covered:
                continue
            seen = [v for _, _, v in covered if v in visible]
            if t.committed:
                rules["torn_transaction"].checked += 1
                rules["lost_write"].checked += 1
                if seen and len(seen) < len(covered):
                    _flag(rules["torn_transaction"], {"transaction": t.op.brief(), "read": read.index,
                                                      "seen": seen,
                                                      "missing": [v for _, _, v in covered if v not in visible]})
                elif not seen:
                    _flag(rules["lost_write"], {"transaction": t.op.brief(), "read": read.index})
            elif t.op.outcome == "info" and seen and len(seen) < len(covered):
                rules["torn_transaction"].checked += 1
                _flag(rules["torn_transaction"], {"transaction": t.op.brief(), "read": read.index, "seen": seen})
        for w in acked_writes:
            if read.invoked < w.completed or not _covers(read, str(w.value.get("topic")),
                                                         int(w.value.get("partition", -1))):
                continue
            rules["lost_write"].checked += 1
            if str(w.value.get("value")) not in visible:
                _flag(rules["lost_write"], {"write": w.brief(), "read": read.index})


def _check_fencing(rules: dict[str, RuleResult], ops: list[Op], txns: list[_Txn], committed_reads: list[Op]) -> None:
    """An instance is fenced once a newer instance's init of the same transactional id completed."""
    inits = [op for op in ops if op.f == "init" and op.outcome == "ok"]
    visible = {v for read in committed_reads for _, _, _, v in _records(read)}
    for t in txns:
        tid = t.op.value.get("transactional_id")
        fenced_at = min((i.completed for i in inits if i.value.get("transactional_id") == tid
                         and i.process != t.op.process and i.invoked > _init_time(inits, t.op.process)),
                        default=None)
        if fenced_at is None or t.end_invoked < fenced_at:
            continue
        rules["fenced_write_accepted"].checked += 1
        leaked = sorted(t.values & visible)
        if t.committed or leaked:
            _flag(rules["fenced_write_accepted"], {"transaction": t.op.brief(), "fenced_at": fenced_at,
                                                   "visible": leaked})


def _init_time(inits: list[Op], process: str) -> float:
    return max((i.invoked for i in inits if i.process == process), default=float("-inf"))


def _check_offsets(rules: dict[str, RuleResult], ops: list[Op], txns: list[_Txn], committed_reads: list[Op]) -> None:
    visible = {v for read in committed_reads for _, _, _, v in _records(read)}
    for fetch in (op for op in ops if op.f == "offsets" and op.outcome == "ok"):
        group = fetch.value.get("group")
        fetched = dict(fetch.value.get("offsets", {}))
        for t in txns:
            if not t.committed or t.op.value.get("group") != group or t.op.completed > fetch.invoked:
                continue
            for tp, offset in dict(t.op.value.get("offsets", {})).items():
                rules["offsets_lost"].checked += 1
                if fetched.get(tp) is None or int(fetched[tp]) < int(offset):
                    _flag(rules["offsets_lost"], {"group": group, "partition": tp, "sent": offset,
                                                  "committed": fetched.get(tp), "transaction": t.op.brief()})
        for tp, offset in dict(fetch.value.get("offsets", {})).items():
            if offset is None or int(offset) < 0:
                continue
            sources = [t for t in txns if t.op.value.get("group") == group
                       and dict(t.op.value.get("offsets", {})).get(tp) == offset]
            if not sources:
                continue
            rules["offsets_without_output"].checked += 1
            if not any(t.committed or (t.op.outcome == "info" and t.values <= visible) for t in sources):
                _flag(rules["offsets_without_output"], {"group": group, "partition": tp, "offset": offset,
                                                        "transactions": [t.op.brief() for t in sources]})
            elif not any(t.values <= visible for t in sources) and committed_reads:
                _flag(rules["offsets_without_output"], {"group": group, "partition": tp, "offset": offset,
                                                        "missing_output": sorted(sources[0].values - visible)})
