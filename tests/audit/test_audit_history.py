"""The history checker: for each anomaly kind a hand-written history that has it (flagged, with the
operations involved) and one that does not; malformed histories are refused with the line named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from txnspec.audit import history as h

OUT = "out"


def txn(index: int, process: str, writes: list[tuple[int, str]], end: str = "commit", outcome: str = "ok",
        t: float = 0.0, **value: Any) -> h.Op:
    return h.Op(index, process, "txn", outcome, t, t + 1, {"transactional_id": process.split("#")[0],
                                                         "writes": [[OUT, p, v] for p, v in writes], "end": end,
                                                         "end_invoked": t + 0.5, **value})


def read(index: int, records: list[tuple[int, int, str]], t: float = 100.0,
         isolation: str = "read_committed") -> h.Op:
    return h.Op(index, "reader", "read", "ok", t, t + 1, {
        "isolation": isolation, "records": [[OUT, p, o, v] for p, o, v in records],
        "partitions": [f"{OUT}/0", f"{OUT}/1"]})


def init(index: int, process: str, t: float) -> h.Op:
    return h.Op(index, process, "init", "ok", t, t + 0.1, {"transactional_id": process.split("#")[0]})


def offsets(index: int, group: str, committed: dict[str, int], t: float = 200.0) -> h.Op:
    return h.Op(index, "group", "offsets", "ok", t, t + 1, {"group": group, "offsets": committed})


def verdicts(ops: list[h.Op]) -> dict[str, h.RuleResult]:
    return {r.rule.removeprefix("history."): r for r in h.check(ops)}


CASES: dict[str, tuple[list[h.Op], list[h.Op]]] = {
    # kind: (a history with the anomaly, the same history without it)
    "aborted_read": (
        [txn(0, "a#0", [(0, "x")], end="abort"), read(1, [(0, 0, "x")])],
        [txn(0, "a#0", [(0, "x")], end="abort"), txn(1, "a#0", [(0, "y")]), read(2, [(0, 1, "y")])]),
    "open_read": (
        [read(0, [(0, 0, "x")], t=0.0), txn(1, "a#0", [(0, "x")], t=5.0)],
        [txn(0, "a#0", [(0, "x")], t=0.0), read(1, [(0, 0, "x")], t=5.0)]),
    "torn_transaction": (
        [txn(0, "a#0", [(0, "x"), (1, "y")]), read(1, [(0, 0, "x")])],
        [txn(0, "a#0", [(0, "x"), (1, "y")]), read(1, [(0, 0, "x"), (1, 0, "y")])]),
    "lost_write": (
        [txn(0, "a#0", [(0, "x")]), read(1, [])],
        [txn(0, "a#0", [(0, "x")]), read(1, [(0, 0, "x")])]),
    "duplicate": (
        [txn(0, "a#0", [(0, "x")]), read(1, [(0, 0, "x"), (0, 1, "x")])],
        [txn(0, "a#0", [(0, "x")]), read(1, [(0, 0, "x")])]),
    "inconsistent_offsets": (
        [txn(0, "a#0", [(0, "x"), (0, "y")]), read(1, [(0, 0, "x"), (0, 1, "y")]),
         read(2, [(0, 0, "y"), (0, 1, "x")], t=101.0)],
        [txn(0, "a#0", [(0, "x"), (0, "y")]), read(1, [(0, 0, "x"), (0, 1, "y")]),
         read(2, [(0, 0, "x"), (0, 1, "y")], t=101.0)]),
    "non_monotonic_offsets": (
        [txn(0, "a#0", [(0, "x"), (0, "y")]), read(1, [(0, 1, "y"), (0, 0, "x")])],
        [txn(0, "a#0", [(0, "x"), (0, "y")]), read(1, [(0, 0, "x"), (0, 1, "y")])]),
    "fenced_write_accepted": (
        [init(0, "z#0", 0.0), init(1, "z#1", 1.0), txn(2, "z#0", [(0, "x")], t=2.0), read(3, [(0, 0, "x")])],
        [init(0, "z#0", 0.0), init(1, "z#1", 1.0), txn(2, "z#0", [(0, "x")], outcome="fail", t=2.0),
         read(3, [])]),
    "offsets_without_output": (
        [txn(0, "c#0", [(0, "x")], end="abort", offsets={"in/0": 2}, group="g"), read(1, []),
         offsets(2, "g", {"in/0": 2})],
        [txn(0, "c#0", [(0, "x")], end="abort", offsets={"in/0": 2}, group="g"),
         txn(1, "c#0", [(0, "y")], offsets={"in/0": 2}, group="g", t=3.0), read(2, [(0, 1, "y")]),
         offsets(3, "g", {"in/0": 2})]),
    "offsets_lost": (
        [txn(0, "c#0", [(0, "x")], offsets={"in/0": 2}, group="g"), read(1, [(0, 0, "x")]),
         offsets(2, "g", {"in/0": -1001})],
        [txn(0, "c#0", [(0, "x")], offsets={"in/0": 2}, group="g"), read(1, [(0, 0, "x")]),
         offsets(2, "g", {"in/0": 2})]),
}


def test_every_anomaly_kind_has_a_case() -> None:
    assert set(CASES) == set(h.RULES)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_the_anomaly_is_flagged_with_the_operations_involved(kind: str) -> None:
    bad, good = CASES[kind]
    flagged = verdicts(bad)[kind]
    assert flagged.outcome == "violated" and flagged.examples, flagged
    assert json.dumps(flagged.examples[0], default=str)  # examples are plain data
    clean = verdicts(good)
    assert clean[kind].outcome == "held", clean[kind]
    assert all(r.outcome != "violated" for r in clean.values()), [r for r in clean.values() if r.violations]


def test_an_indefinite_transaction_is_neither_lost_nor_aborted() -> None:
    maybe = [txn(0, "a#0", [(0, "x")], outcome="info"), read(1, [])]
    assert all(r.outcome != "violated" for r in h.check(maybe))
    seen = [txn(0, "a#0", [(0, "x")], outcome="info"), read(1, [(0, 0, "x")])]
    assert all(r.outcome != "violated" for r in h.check(seen))


def test_read_uncommitted_may_see_aborted_data() -> None:
    ops = [txn(0, "a#0", [(0, "x")], end="abort"), read(1, [(0, 0, "x")], isolation="read_uncommitted")]
    assert verdicts(ops)["aborted_read"].outcome != "violated"


def test_a_history_round_trips_through_json_lines(tmp_path: Path) -> None:
    ops = CASES["torn_transaction"][0]
    h.save(ops, tmp_path / "history.jsonl")
    assert h.load(tmp_path / "history.jsonl") == ops


@pytest.mark.parametrize(("line", "message"), [
    ("not json", "history.jsonl:2: not JSON"),
    ('{"index": 1}', "missing field(s) process, f, outcome, invoked, completed"),
    ('{"index": 1, "process": "p", "f": "dance", "outcome": "ok", "invoked": 0, "completed": 1}',
     "unknown operation 'dance'"),
    ('{"index": 1, "process": "p", "f": "txn", "outcome": "maybe", "invoked": 0, "completed": 1}',
     "unknown outcome 'maybe'"),
    ('{"index": "one", "process": "p", "f": "txn", "outcome": "ok", "invoked": 0, "completed": 1}',
     "history.jsonl:2"),
])
def test_a_malformed_history_is_refused_naming_the_line(tmp_path: Path, line: str, message: str) -> None:
    good = json.dumps({"index": 0, "process": "p", "f": "txn", "outcome": "ok", "invoked": 0, "completed": 1})
    path = tmp_path / "history.jsonl"
    path.write_text(good + "\n" + line + "\n")
    with pytest.raises(h.HistoryError, match=message.replace("(", r"\(").replace(")", r"\)")):
        h.load(path)
