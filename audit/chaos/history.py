"""The chaos history: every call a client made, its outcome, every record it read, and every fault, as typed
events in JSON Lines (one object per line; docs/chaos.md documents the format).

What it models
    Jepsen's shape: a call is two events, an ``invoke`` and its completion (``ok``, ``fail`` with Kafka's
    or librdkafka's error name, or ``info``: it may or may not have taken effect). A process that dies
    (kill -9) leaves invokes without completion; :func:`merge` completes them as ``info`` at the end. The
    ``nemesis`` process records the faults the same way (``f`` = ``kill``, ``pause``, ``client``,
    ``timeout``). Times are ``time.monotonic()`` seconds (CLOCK_MONOTONIC, one clock for every process of
    the machine), relative to the run's start after :func:`merge`.

    ``f`` (the calls), each with its ``value``:

    ============  ==========================================================================================
    ``init``      ``{"tid", "instance"}``: ``init_transactions``
    ``begin``     ``{"tid", "instance", "txn"}``: ``begin_transaction``; ``txn`` names the transaction
                  (``"{tid}#{instance}.{n}"``, for people: the checkers take ``tid`` and ``instance`` from here)
    ``send``      ``{"topic", "partition", "value", "txn"?, "input"?}``; ``input``: the consumed record's value a
                  consume-transform-produce output transforms; completion adds ``"offset"`` (delivery report)
    ``offsets``   ``{"txn", "group", "offsets": {"topic/partition": offset}}``: ``send_offsets_to_transaction``
    ``commit``    ``{"txn"}``: ``commit_transaction``;   ``abort``: ``{"txn"}``: ``abort_transaction``
    ``poll``      ``{"group"?, "records": [[topic, partition, offset, value], ...]}`` in poll order
    ``seek``      ``{"positions": {"topic/partition": offset}}``: a consumer moved (rebalance or rewind)
    ``read``      the final reads: ``{"isolation", "records", "ends": {"topic/partition": high watermark},
                  "stable": {"topic/partition": last stable offset}}``
    ``committed`` ``{"group", "offsets": {"topic/partition": offset}}``: the group's committed offsets
    ============  ==========================================================================================

Assumes
    Every value a client writes is unique in the run, so a value names its write (and its transaction).

Leaves out
    Wall-clock time and client-internal retries (librdkafka retries below the calls are not seen).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

EventType = Literal["invoke", "ok", "fail", "info"]
TYPES: tuple[str, ...] = ("invoke", "ok", "fail", "info")
CALLS: tuple[str, ...] = ("init", "begin", "send", "offsets", "commit", "abort", "poll", "seek", "read", "committed")
FAULTS: tuple[str, ...] = ("kill", "pause", "network", "client", "timeout", "member")
NEMESIS = "nemesis"  # the node faults
NEMESIS_CLIENTS = "nemesis-clients"  # the client faults, which never wait for a node


def is_nemesis(process: str) -> bool:
    return process in (NEMESIS, NEMESIS_CLIENTS)


class HistoryError(ValueError):
    """A malformed history; the message names the line and what was wrong."""


@dataclass
class Event:
    index: int
    time: float
    process: str
    type: EventType
    f: str
    value: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    call: int = 0  # numbers the process's calls: an invoke and its completion share it

    def brief(self) -> dict[str, Any]:
        out = {"index": self.index, "time": round(self.time, 3), "process": self.process, "type": self.type,
               "f": self.f, "value": self.value}
        if self.error:
            out["error"] = self.error
        return out


@dataclass
class Op:
    """An invoke and its completion, as the checkers read them."""

    invoke: Event
    done: Event

    @property
    def f(self) -> str:
        return self.invoke.f

    @property
    def process(self) -> str:
        return self.invoke.process

    @property
    def outcome(self) -> str:
        return self.done.type

    @property
    def value(self) -> dict[str, Any]:
        return {**self.invoke.value, **self.done.value}


def event_from_json(data: Any, where: str) -> Event:
    if not isinstance(data, dict):
        raise HistoryError(f"{where}: an event must be a JSON object, not {type(data).__name__}")
    missing = [k for k in ("time", "process", "type", "f") if k not in data]
    if missing:
        raise HistoryError(f"{where}: missing field(s) {', '.join(missing)}")
    if data["type"] not in TYPES:
        raise HistoryError(f"{where}: unknown type {data['type']!r}; known: {', '.join(TYPES)}")
    if data["f"] not in CALLS + FAULTS:
        raise HistoryError(f"{where}: unknown f {data['f']!r}; known: {', '.join(CALLS + FAULTS)}")
    value = data.get("value", {})
    if not isinstance(value, dict):
        raise HistoryError(f"{where}: 'value' must be an object")
    try:
        return Event(int(data.get("index", -1)), float(data["time"]), str(data["process"]), data["type"],
                     data["f"], value, data.get("error"), int(data.get("call", 0)))
    except (TypeError, ValueError) as exc:
        raise HistoryError(f"{where}: {exc}") from None


def read_lines(path: Path) -> Iterator[Event]:
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(path.read_text().splitlines()):
                return  # a process killed mid-write leaves a torn last line: it never completed
            raise HistoryError(f"{path}:{number}: not JSON ({exc.msg})") from None
        yield event_from_json(data, f"{path}:{number}")


def load(path: Path) -> list[Event]:
    return list(read_lines(path))


def save(events: Iterable[Event], path: Path) -> None:
    path.write_text("".join(json.dumps(asdict(e), sort_keys=True) + "\n" for e in events))


def merge(streams: Iterable[Iterable[Event]], start: float, end: float | None = None) -> list[Event]:
    """One history from each process's events: sorted by time (ties by process), times relative to
    ``start``, indexes assigned, every invoke left open completed as ``info`` at the end (its process died
    or never heard back)."""
    events = sorted((e for s in streams for e in s), key=lambda e: (e.time, e.process, e.type != "invoke"))
    out: list[Event] = []
    open_calls: dict[tuple[str, int], Event] = {}
    for e in events:
        e = Event(len(out), round(e.time - start, 6), e.process, e.type, e.f, e.value, e.error, e.call)
        if e.type == "invoke":
            open_calls[(e.process, e.call)] = e
        else:
            open_calls.pop((e.process, e.call), None)
        out.append(e)
    last = out[-1].time if out else 0.0
    if end is not None:
        last = max(last, end - start)
    for e in list(open_calls.values()):
        out.append(_lost(e, last, len(out)))
    return out


def _lost(invoke: Event, at: float, index: int) -> Event:
    return Event(index, at, invoke.process, "info", invoke.f, {}, "no completion (the process died or hung)",
                 invoke.call)


def pair(events: list[Event]) -> list[Op]:
    """Every invoke with its completion (matched by process and call), in invocation order; an invoke never
    completed gets an ``info``; a completion without invoke is kept with an empty invoke."""
    ops: list[Op] = []
    pending: dict[tuple[str, int], Event] = {}
    for e in events:
        key = (e.process, e.call)
        if e.type == "invoke":
            pending[key] = e
        elif key in pending:
            ops.append(Op(pending.pop(key), e))
        else:
            ops.append(Op(Event(-1, e.time, e.process, "invoke", e.f, {}, None, e.call), e))
    for earlier in pending.values():
        ops.append(Op(earlier, _lost(earlier, earlier.time, -1)))
    ops.sort(key=lambda o: (o.invoke.time, o.invoke.index))
    return ops
