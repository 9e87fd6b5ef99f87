"""Anomalies in a chaos history (:mod:`.history`), each with a minimal witness: the few events that show it.

What it models
    Jepsen's Kafka workload classes where Kafka promises them, and the exactly-once classes the spec names
    (:data:`KINDS`, one sentence each). A transaction's fate is read from its calls (:func:`fates`):
    ``committed`` (a commit returned ok), ``aborted`` (an abort returned ok, or a commit failed with an
    abortable or fatal error, which Kafka answers only when it did not commit), ``uncommitted`` (commit
    never invoked: it may never become visible), or ``unknown`` (a commit invoked whose answer never
    came: either is allowed). The final read_committed and read_uncommitted reads (after healing, every
    partition to its end) are the log the other calls are judged against.

Assumes
    Every value is written once (a value names its send and its transaction); the final reads happen after
    every client stopped, the cluster healed and ``transaction.timeout.ms`` passed, so a transaction still
    open then is hanging; a consume-transform-produce output's send names its input record's value (``input``).
    A transaction's name is opaque: its ``begin`` call says whose (``tid``, ``instance``); nothing is read out of
    a name or a value (:func:`check` refuses a history whose outputs do not name their input).

Leaves out
    Anti-dependency cycles (G2, G-single; :mod:`.cycles` finds G0 and G1c). Jepsen's int-send-skip in its strict
    form (another transaction's record between two records of one transaction) is allowed by Kafka and not flagged;
    ``send_skip`` flags the form Kafka rules out (the same producer's own records out of its send order).

Long because each anomaly of :data:`KINDS` is a short check over the same fates and final reads, read as one
catalogue as Jepsen's Kafka checker keeps them; the cycle search is :mod:`.cycles`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from txnspec.audit.chaos import cycles
from txnspec.audit.chaos.history import Event, HistoryError, Op, pair

KINDS: dict[str, str] = {
    "lost_write": "an acknowledged send of a committed transaction (or an acknowledged input record) is in the "
                  "final read_committed read",
    "duplicate": "a value is read at most once per read, and an input record's output is committed at most once",
    "aborted_read": "a read_committed read or poll never returns a record of an aborted transaction, nor of one "
                    "whose commit was never invoked (G1a)",
    "non_monotonic_send": "one producer's acknowledged sends to a partition get increasing offsets",
    "non_monotonic_poll": "one consumer's polls of a partition return increasing offsets between seeks",
    "poll_skip": "consecutive polled records of a partition skip no record the final read_committed read has "
                 "between them",
    "send_skip": "no record of the same producer instance lies between two consecutive sends of one of its "
                 "transactions to a partition",
    "inconsistent_offsets": "every acknowledgement, poll and read agrees on the value at each (partition, offset), "
                            "and a value sits at one offset",
    "fenced_commit": "a producer instance fenced by a newer instance's init never commits",
    "zombie_write": "a record a fenced instance sent after its successor initialised is never visible",
    "torn_transaction": "a transaction's records are visible on every partition it wrote or on none",
    "output_without_offsets": "a consumed record's committed output comes with the group offset past it",
    "offsets_without_output": "a group offset past a consumed record comes with that record's committed output",
    "G0": "no cycle of write dependencies between transactions Kafka orders (one committed before the other "
          "began): the log contradicts the order of their commits (:mod:`.cycles`)",
    "G1c": "no cycle of write and read dependencies: a transaction that read another's record never writes "
           "before it (:mod:`.cycles`)",
    "hanging_transaction": "after healing and the transaction timeout, the last stable offset reaches the high "
                           "watermark of every partition",
}


@dataclass
class Anomaly:
    kind: str
    detail: str
    witness: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "detail": self.detail, "witness": self.witness}


@dataclass
class Txn:
    name: str
    tid: str
    instance: int
    process: str
    begin: Op | None = None
    sends: list[Op] = field(default_factory=list)
    offsets: list[Op] = field(default_factory=list)
    ends: list[Op] = field(default_factory=list)
    fate: str = "uncommitted"

    @property
    def commit_invoked(self) -> float | None:
        times = [o.invoke.time for o in self.ends if o.f == "commit"]
        return min(times) if times else None


def _w(op: Op) -> list[dict[str, Any]]:
    return [e.brief() for e in (op.invoke, op.done) if e.index >= 0]


def fates(ops: list[Op]) -> dict[str, Txn]:
    """Every transaction of the history with its calls and its fate (module docstring)."""
    txns: dict[str, Txn] = {}
    for op in ops:
        if op.f not in ("begin", "send", "offsets", "commit", "abort"):
            continue
        name = op.invoke.value.get("txn")
        if not name:
            continue
        t = txns.get(name)
        if t is None:
            t = txns[name] = Txn(name, "", -1, op.process)
        if op.f == "begin":  # the name is opaque: the begin call says whose transaction it is
            t.begin = op
            t.tid, t.instance = str(op.invoke.value.get("tid", "")), int(op.invoke.value.get("instance", -1))
        elif op.f == "send":
            t.sends.append(op)
        elif op.f == "offsets":
            t.offsets.append(op)
        else:
            t.ends.append(op)
    for t in txns.values():
        t.fate = _fate(t)
    return txns


def _fate(t: Txn) -> str:
    if any(o.f == "commit" and o.outcome == "ok" for o in t.ends):
        return "committed"
    commits = [o for o in t.ends if o.f == "commit"]
    definite_fail = all(o.outcome == "fail" and o.done.value.get("class") in ("abortable", "fatal") for o in commits)
    if any(o.f == "abort" and o.outcome == "ok" for o in t.ends) and definite_fail:
        return "aborted"
    if not commits:
        return "uncommitted"
    return "aborted" if definite_fail else "unknown"


@dataclass
class Final:
    """The final reads: records per partition (offset -> value) at each isolation, and the read ops."""

    committed: dict[str, dict[int, str]]
    uncommitted: dict[str, dict[int, str]]
    ops: dict[str, Op]
    groups: dict[str, dict[str, int]]


def final_reads(ops: list[Op]) -> Final:
    rc: dict[str, dict[int, str]] = defaultdict(dict)
    ru: dict[str, dict[int, str]] = defaultdict(dict)
    read_ops: dict[str, Op] = {}
    groups: dict[str, dict[str, int]] = {}
    for op in ops:
        if op.f == "read" and op.outcome in ("ok", "info"):
            isolation = op.invoke.value.get("isolation")
            read_ops[str(isolation)] = op
            target = rc if isolation == "read_committed" else ru
            for topic, partition, offset, value in op.done.value.get("records", []):
                target[f"{topic}/{partition}"].setdefault(int(offset), str(value))
        if op.f == "committed" and op.outcome == "ok":
            groups[str(op.invoke.value.get("group"))] = {k: int(v) for k, v in op.done.value["offsets"].items()}
    return Final(dict(rc), dict(ru), read_ops, groups)


def check(events: list[Event]) -> tuple[list[Anomaly], dict[str, int]]:
    """Every anomaly of :data:`KINDS` in the history, and how often each kind was checked."""
    ops = pair(events)
    _require_inputs(ops)
    txns = fates(ops)
    final = final_reads(ops)
    checked: dict[str, int] = {kind: 0 for kind in KINDS}
    found: list[Anomaly] = []
    by_value: dict[str, Op] = {}
    for op in ops:
        if op.f == "send":
            by_value[str(op.invoke.value.get("value"))] = op
    txn_of = {str(s.invoke.value.get("value")): t for t in txns.values() for s in t.sends}
    for checker in (_reads, _lost, _monotonic, _offsets, _fencing, _torn, _ctp, _hanging, _cycles):
        checker(ops, txns, final, by_value, txn_of, checked, found)
    return found, checked


def _require_inputs(ops: list[Op]) -> None:
    """A consume-transform-produce member (a process that polls for a group) names each output's input; a history
    recorded before sends carried ``input`` (docs/chaos.md) cannot be judged on exactly-once processing."""
    members = {op.process for op in ops if op.f == "poll" and op.invoke.value.get("group")}
    for op in ops:
        if op.f == "send" and op.process in members and op.invoke.value.get("txn") and "input" not in op.invoke.value:
            raise HistoryError(f"event {op.invoke.index}: the send of consume-transform-produce member {op.process} "
                               "names no input (its value's 'input' field, docs/chaos.md): a history recorded "
                               "before that field; record it again")


def _visible(final: Final) -> dict[str, tuple[str, int]]:
    return {v: (tp, o) for tp, recs in final.committed.items() for o, v in recs.items()}


def _reads(ops: list[Op], txns: dict[str, Txn], final: Final, by_value: dict[str, Op], txn_of: dict[str, Txn],
           checked: dict[str, int], found: list[Anomaly]) -> None:
    """duplicate and aborted_read over the final reads and the read_committed polls."""
    for isolation, op in final.ops.items():
        seen: dict[str, tuple[str, int]] = {}
        for topic, partition, offset, value in op.done.value.get("records", []):
            checked["duplicate"] += 1
            here = (f"{topic}/{partition}", int(offset))
            if value in seen and seen[value] != here:
                found.append(Anomaly("duplicate", f"{value!r} read twice by the final {isolation} read, at "
                                     f"{seen[value]} and {here}", _w(op)[:1] + _w(by_value[value])
                                     if value in by_value else _w(op)[:1]))
            seen[value] = here
    polls = [op for op in ops if op.f == "poll" and op.outcome == "ok"]
    sources = [(op, op.done.value.get("records", [])) for op in polls]
    sources += [(final.ops["read_committed"], final.ops["read_committed"].done.value.get("records", []))] \
        if "read_committed" in final.ops else []
    for op, records in sources:
        for _, _, _, value in records:
            t = txn_of.get(value)
            if t is None:
                continue
            checked["aborted_read"] += 1
            if t.fate in ("aborted", "uncommitted"):
                found.append(Anomaly("aborted_read", f"{value!r} of {t.fate} transaction {t.name} read at "
                                     "read_committed", [e for o in (op, *t.ends[-1:]) for e in _w(o)]
                                     if t.ends else _w(op)))


def _lost(ops: list[Op], txns: dict[str, Txn], final: Final, by_value: dict[str, Op], txn_of: dict[str, Txn],
          checked: dict[str, int], found: list[Anomaly]) -> None:
    if "read_committed" not in final.ops:
        return
    visible = _visible(final)
    read = final.ops["read_committed"]
    for value, send in by_value.items():
        if send.outcome != "ok":
            continue
        t = txn_of.get(value)
        if t is not None and t.fate != "committed":
            continue
        if t is not None and any(str(s.invoke.value.get("value")) in visible for s in t.sends):
            continue  # some of it is visible: torn_transaction judges it
        checked["lost_write"] += 1
        if value not in visible:
            why = f"committed transaction {t.name}" if t else "an acknowledged idempotent send"
            witness = _w(send) + ([e for o in t.ends if o.outcome == "ok" for e in _w(o)] if t else [])
            found.append(Anomaly("lost_write", f"{value!r} ({why}, offset {send.done.value.get('offset')}) is "
                                 "not in the final read_committed read", witness + _w(read)[:1]))


def _monotonic(ops: list[Op], txns: dict[str, Txn], final: Final, by_value: dict[str, Op], txn_of: dict[str, Txn],
               checked: dict[str, int], found: list[Anomaly]) -> None:
    """non_monotonic_send, send_skip, non_monotonic_poll, poll_skip, inconsistent_offsets."""
    last_send: dict[tuple[str, str], Op] = {}
    for op in ops:
        if op.f != "send" or op.outcome != "ok":
            continue
        tp = f"{op.invoke.value['topic']}/{op.invoke.value['partition']}"
        offset = int(op.done.value["offset"])
        key = (op.process, tp)
        earlier = last_send.get(key)
        if earlier is not None:
            checked["non_monotonic_send"] += 1
            before = int(earlier.done.value["offset"])
            if offset <= before:
                found.append(Anomaly("non_monotonic_send", f"{op.process} sent to {tp} at offset {offset} after "
                                     f"offset {before}", _w(earlier) + _w(op)))
            elif earlier.invoke.value.get("txn") == op.invoke.value.get("txn"):
                checked["send_skip"] += 1
                mine = [o for o in range(before + 1, offset) if _process_of(final.uncommitted.get(tp, {}).get(o),
                                                                           by_value) == op.process]
                if mine:
                    found.append(Anomaly("send_skip", f"{op.process}'s own record at {tp} offset {mine[0]} lies "
                                         f"between two consecutive sends of one transaction ({before}, {offset})",
                                         _w(earlier) + _w(op)))
        last_send[key] = op
    # polls: positions per (process, partition), reset by a seek of that partition. In completion order: a
    # rebalance's seek is logged from librdkafka's assign callback inside the poll that returns the new
    # assignment's records, so it is invoked after that poll and completes before it
    last_poll: dict[tuple[str, str], tuple[int, Op]] = {}
    for op in sorted(ops, key=lambda o: o.done.time):
        if op.f == "seek" and op.outcome == "ok":
            for tp in op.done.value.get("positions", {}):
                last_poll.pop((op.process, tp), None)
            if op.invoke.value.get("why") == "abort" or not op.done.value.get("positions"):
                for key in [k for k in last_poll if k[0] == op.process]:
                    last_poll.pop(key)
            continue
        if op.f != "poll" or op.outcome != "ok":
            continue
        for topic, partition, offset, _ in op.done.value.get("records", []):
            tp, offset = f"{topic}/{partition}", int(offset)
            earlier = last_poll.get((op.process, tp))
            if earlier is not None:
                checked["non_monotonic_poll"] += 1
                if offset <= earlier[0]:
                    found.append(Anomaly("non_monotonic_poll", f"{op.process} polled {tp} offset {offset} after "
                                         f"offset {earlier[0]} with no seek between", _w(earlier[1]) + _w(op)))
                else:
                    checked["poll_skip"] += 1
                    skipped = [o for o in final.committed.get(tp, {}) if earlier[0] < o < offset]
                    if skipped:
                        found.append(Anomaly("poll_skip", f"{op.process} polled {tp} offsets {earlier[0]} then "
                                             f"{offset}, skipping committed offset {min(skipped)} "
                                             f"({final.committed[tp][min(skipped)]!r})", _w(earlier[1]) + _w(op)))
            last_poll[(op.process, tp)] = (offset, op)
    _consistent(ops, final, checked, found)


def _process_of(value: str | None, by_value: dict[str, Op]) -> str | None:
    op = by_value.get(value) if value is not None else None
    return op.process if op is not None else None


def _consistent(ops: list[Op], final: Final, checked: dict[str, int], found: list[Anomaly]) -> None:
    at: dict[tuple[str, int], tuple[str, Op]] = {}
    where: dict[str, tuple[tuple[str, int], Op]] = {}

    def note(tp: str, offset: int, value: str, op: Op) -> None:
        checked["inconsistent_offsets"] += 1
        earlier = at.setdefault((tp, offset), (value, op))
        if earlier[0] != value:
            found.append(Anomaly("inconsistent_offsets", f"{tp} offset {offset} holds {earlier[0]!r} and {value!r}",
                                 _w(earlier[1]) + _w(op)))
        place = where.setdefault(value, ((tp, offset), op))
        if place[0] != (tp, offset):
            found.append(Anomaly("inconsistent_offsets", f"{value!r} at {place[0]} and at {(tp, offset)}",
                                 _w(place[1]) + _w(op)))

    for op in ops:
        if op.f == "send" and op.outcome == "ok":
            note(f"{op.invoke.value['topic']}/{op.invoke.value['partition']}", int(op.done.value["offset"]),
                 str(op.invoke.value["value"]), op)
        elif op.f in ("poll", "read") and op.outcome in ("ok", "info"):
            for topic, partition, offset, value in op.done.value.get("records", []):
                note(f"{topic}/{partition}", int(offset), str(value), op)


def _offsets(ops: list[Op], txns: dict[str, Txn], final: Final, by_value: dict[str, Op], txn_of: dict[str, Txn],
             checked: dict[str, int], found: list[Anomaly]) -> None:
    """nothing here: the group offsets are judged with the output in :func:`_ctp`."""


def _fencing(ops: list[Op], txns: dict[str, Txn], final: Final, by_value: dict[str, Op], txn_of: dict[str, Txn],
             checked: dict[str, int], found: list[Anomaly]) -> None:
    """An instance is surely fenced once another instance of its transactional id invoked init after its own init
    returned, and that init finished (ok). Not by the instances' numbers: a JVM slow to start may call init after
    the instance started after it (run tv1-seed211), and two overlapping inits may reach the coordinator in
    either order (then neither is judged here; the validations replay them)."""
    inits: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        if op.f == "init" and op.outcome == "ok":
            inits[str(op.invoke.value.get("tid"))].append(op)
    visible = _visible(final)
    own = {(str(i.invoke.value.get("tid")), int(i.invoke.value.get("instance", -1))): i.done.time
           for mine in inits.values() for i in mine}
    for t in txns.values():
        mine = own.get((t.tid, t.instance))
        newer = [i for i in inits.get(t.tid, []) if int(i.invoke.value.get("instance", -1)) != t.instance
                 and mine is not None and i.invoke.time > mine]
        if not newer:
            continue
        fenced_at = min(i.done.time for i in newer)
        successor = min(newer, key=lambda i: i.done.time)
        commit_at = t.commit_invoked
        if commit_at is not None and commit_at > fenced_at:
            checked["fenced_commit"] += 1
            if t.fate == "committed":
                found.append(Anomaly("fenced_commit", f"{t.name} committed although {successor.process} had "
                                     f"initialised {t.tid} before its commit was invoked",
                                     _w(successor) + [e for o in t.ends if o.f == "commit" for e in _w(o)]))
        for send in t.sends:
            if send.invoke.time <= fenced_at:
                continue
            checked["zombie_write"] += 1
            value = str(send.invoke.value.get("value"))
            if value in visible:
                found.append(Anomaly("zombie_write", f"{value!r}, sent by fenced {t.process} after "
                                     f"{successor.process} initialised, is visible at {visible[value]}",
                                     _w(successor) + _w(send)))


def _torn(ops: list[Op], txns: dict[str, Txn], final: Final, by_value: dict[str, Op], txn_of: dict[str, Txn],
          checked: dict[str, int], found: list[Anomaly]) -> None:
    if "read_committed" not in final.ops:
        return
    visible = _visible(final)
    for t in txns.values():
        acked = [s for s in t.sends if s.outcome == "ok"]
        if len(acked) < 2 or t.fate not in ("committed", "unknown"):
            continue
        checked["torn_transaction"] += 1
        shown = [s for s in acked if str(s.invoke.value.get("value")) in visible]
        if shown and len(shown) < len(acked):
            missing = next(s for s in acked if s not in shown)
            found.append(Anomaly("torn_transaction", f"{t.name} ({t.fate}) is visible at "
                                 f"{visible[str(shown[0].invoke.value['value'])]} but its acknowledged "
                                 f"{missing.invoke.value['value']!r} is not", _w(shown[0]) + _w(missing)))


def _ctp(ops: list[Op], txns: dict[str, Txn], final: Final, by_value: dict[str, Op], txn_of: dict[str, Txn],
         checked: dict[str, int], found: list[Anomaly]) -> None:
    """Exactly-once consume-transform-produce: each consumed input record below the group's committed offset
    has exactly one committed output, and none above it."""
    visible = _visible(final)
    group_of = _groups(ops, txns)
    # per group: each group consumes the input once (several groups may transform the same input)
    by_group: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for value in visible:
        send, t = by_value.get(value), txn_of.get(value)
        source = None if send is None else send.invoke.value.get("input")
        if source is not None:
            by_group[group_of.get(t.tid, "") if t is not None else ""][str(source)].append(value)
    for group, outputs in by_group.items():
        for source, outs in outputs.items():
            checked["duplicate"] += 1
            if len(outs) > 1:
                found.append(Anomaly("duplicate", f"input {source!r} has {len(outs)} committed outputs"
                                     + (f" in group {group}" if group else "") + f": {sorted(outs)}",
                                     [e for v in sorted(outs)[:2] if v in by_value for e in _w(by_value[v])]))
    for group in sorted(set(group_of.values())):
        committed = final.groups.get(group)
        if committed is None:
            continue
        outputs = by_group.get(group, {})
        for tp, records in final.committed.items():
            if tp not in committed:
                continue
            end = committed[tp]
            for offset, value in records.items():
                checked["offsets_without_output"] += 1
                if offset < end and value not in outputs:
                    found.append(Anomaly("offsets_without_output", f"group {group} committed {tp} offset {end} but "
                                         f"input {value!r} at offset {offset} has no committed output",
                                         _w(final.ops["read_committed"])[:1]))
                elif offset >= end and value in outputs:
                    checked["output_without_offsets"] += 1
                    found.append(Anomaly("output_without_offsets", f"input {value!r} at {tp} offset {offset} has "
                                         f"committed output {outputs[value][0]!r} but group {group}'s offset is "
                                         f"{end}", [e for v in outputs[value][:1] if v in by_value
                                                    for e in _w(by_value[v])]))


def _groups(ops: list[Op], txns: dict[str, Txn]) -> dict[str, str]:
    """Each consume-transform-produce transactional id's consumer group: from its offsets calls, else from its
    process's polls, else the one group of the history."""
    group_of = {t.tid: str(o.invoke.value.get("group")) for t in txns.values() for o in t.offsets}
    polled = {op.process: str(op.invoke.value["group"]) for op in ops
              if op.f == "poll" and op.invoke.value.get("group")}
    known = set(group_of.values()) | set(polled.values())
    for t in txns.values():
        if t.tid not in group_of and any("input" in s.invoke.value for s in t.sends):
            group_of[t.tid] = polled.get(t.process, next(iter(known)) if len(known) == 1 else "")
    return group_of


def _hanging(ops: list[Op], txns: dict[str, Txn], final: Final, by_value: dict[str, Op], txn_of: dict[str, Txn],
             checked: dict[str, int], found: list[Anomaly]) -> None:
    read = final.ops.get("read_committed")
    if read is None:
        return
    ends = read.done.value.get("ends", {})
    positions = read.done.value.get("positions", {})
    for tp, end in ends.items():
        checked["hanging_transaction"] += 1
        if int(positions.get(tp, -1)) < int(end):
            found.append(Anomaly("hanging_transaction", f"{tp}: read_committed stopped at offset "
                                 f"{positions.get(tp)} below the high watermark {end} after the transaction "
                                 "timeout (the last stable offset is stuck)", _w(read)))


def _cycles(ops: list[Op], txns: dict[str, Txn], final: Final, by_value: dict[str, Op], txn_of: dict[str, Txn],
            checked: dict[str, int], found: list[Anomaly]) -> None:
    """G0 and G1c over the committed transactions (and those of unknown outcome that are visible)."""
    if "read_committed" not in final.ops:
        return
    visible = _visible(final)
    spans: dict[str, cycles.Span] = {}
    for t in txns.values():
        shown = [s for s in t.sends if str(s.invoke.value.get("value")) in visible]
        if t.begin is None or not (t.fate == "committed" or (t.fate == "unknown" and shown)):
            continue
        ends = [o.done.time for o in t.ends if o.f == "commit" and o.outcome == "ok"]
        span = spans[t.name] = cycles.Span(t.name, t.begin.invoke.time, min(ends) if ends else float("inf"))
        for s in shown:
            tp, offset = visible[str(s.invoke.value["value"])]
            span.records.setdefault(tp, []).append((offset, s))
    last_poll: dict[str, Op] = {}  # a consume-transform-produce member's poll feeds its next transaction
    for op in ops:
        if op.f == "poll" and op.outcome == "ok" and op.done.value.get("records"):
            last_poll[op.process] = op
        elif op.f == "begin" and op.process in last_poll:
            poll = last_poll.pop(op.process)
            name = str(op.invoke.value.get("txn"))
            if name in spans:
                spans[name].reads = [(str(r[3]), poll) for r in poll.done.value["records"]]
    writer = {v: t.name for v, t in txn_of.items()}
    found_cycles, edges = cycles.cycles(spans, writer, by_value)
    checked["G0"] += edges["ww"] + edges["rt"]
    checked["G1c"] += edges["wr"]
    for cycle in found_cycles:
        kind = "G1c" if any(e.kind == "wr" for e in cycle) else "G0"
        steps = "; ".join(f"{e.source} -{e.kind}-> {e.target} ({e.why})" for e in cycle)
        witness = [ev for e in cycle for op in e.ops for ev in _w(op)]
        found.append(Anomaly(kind, f"a cycle of {len(cycle)} transactions: {steps}", witness))
