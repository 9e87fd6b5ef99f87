"""The chaos checkers on synthetic histories: a clean one passes both; each anomaly class, planted alone, is
caught with its witness; a history only the spec can refuse is unexplained at the right place."""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from txnspec.audit.chaos import anomalies, history, validate
from txnspec.audit.chaos.faults import ScheduleError, parse_kinds, schedule

OUT, IN = "chaos-out", "chaos-in"


class Builder:
    """A history written call by call, one clock tick per event."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.clock = 0.0
        self.calls: dict[str, int] = {}

    def call(self, process: str, f: str, value: dict[str, Any], outcome: str = "ok",
             result: dict[str, Any] | None = None, error: str | None = None) -> None:
        self.calls[process] = self.calls.get(process, 0) + 1
        n = self.calls[process]
        self.clock += 1
        self.events.append({"index": len(self.events), "time": self.clock, "process": process, "call": n,
                            "type": "invoke", "f": f, "value": value})
        self.clock += 1
        self.events.append({"index": len(self.events), "time": self.clock, "process": process, "call": n,
                            "type": outcome, "f": f, "value": result or {}, **({"error": error} if error else {})})

    def txn(self, process: str, tid: str, instance: int, n: int, sends: list[tuple[str, int, int]],
            end: str = "commit", outcome: str = "ok") -> str:
        name = f"{tid}#{instance}.{n}"
        self.call(process, "begin", {"tid": tid, "instance": instance, "txn": name})
        for j, (topic, partition, offset) in enumerate(sends):
            self.call(process, "send", {"topic": topic, "partition": partition, "value": f"{name}/{j}", "txn": name},
                      result={"offset": offset})
        self.call(process, end, {"txn": name}, outcome, {"class": "fatal"} if outcome == "fail" else {})
        return name

    def read(self, isolation: str, records: list[tuple[str, int, int, str]], ends: dict[str, int],
             positions: dict[str, int] | None = None) -> None:
        self.call(f"reader-{isolation}", "read", {"isolation": isolation},
                  result={"records": [list(r) for r in records], "ends": ends, "positions": positions or ends})

    def history(self) -> list[history.Event]:
        return [history.event_from_json(e, f"event {i}") for i, e in enumerate(self.events)]


def clean() -> Builder:
    """p0 commits a transaction over out/0 and out/1 and aborts one on out/0; the input gets three records; a
    ctp member turns in-0 into one committed output with the group offset 1; markers sit at the gaps."""
    b = Builder()
    b.call("producer-0#0", "init", {"tid": "chaos-p0", "instance": 0})
    for i in range(3):
        b.call("input#0", "send", {"topic": IN, "partition": 0, "value": f"in-{i}"}, result={"offset": i})
    t0 = b.txn("producer-0#0", "chaos-p0", 0, 0, [(OUT, 0, 0), (OUT, 1, 0)])
    t1 = b.txn("producer-0#0", "chaos-p0", 0, 1, [(OUT, 0, 2)], end="abort")
    b.call("ctp-0#0", "init", {"tid": "chaos-c0", "instance": 0})
    b.call("ctp-0#0", "poll", {"group": "g"}, result={"records": [[IN, 0, 0, "in-0"]]})
    name = "chaos-c0#0.0"
    b.call("ctp-0#0", "begin", {"tid": "chaos-c0", "instance": 0, "txn": name})
    b.call("ctp-0#0", "send", {"topic": OUT, "partition": 1, "value": f"in-0>{name}", "txn": name, "input": "in-0"},
           result={"offset": 2})
    b.call("ctp-0#0", "offsets", {"txn": name, "group": "g", "offsets": {f"{IN}/0": 1}})
    b.call("ctp-0#0", "commit", {"txn": name})
    b.call("poller#0", "poll", {}, result={"records": [[OUT, 0, 0, f"{t0}/0"], [OUT, 1, 0, f"{t0}/1"]]})
    ends = {f"{OUT}/0": 4, f"{OUT}/1": 4, f"{IN}/0": 3}
    inputs = [(IN, 0, i, f"in-{i}") for i in range(3)]
    b.read("read_committed", [(OUT, 0, 0, f"{t0}/0"), (OUT, 1, 0, f"{t0}/1"), (OUT, 1, 2, f"in-0>{name}"), *inputs],
           ends)
    b.read("read_uncommitted", [(OUT, 0, 0, f"{t0}/0"), (OUT, 0, 2, f"{t1}/0"), (OUT, 1, 0, f"{t0}/1"),
                                (OUT, 1, 2, f"in-0>{name}"), *inputs], ends)
    b.call("reader-read_committed", "committed", {"group": "g"}, result={"offsets": {f"{IN}/0": 1}})
    return b


def _read(b: Builder, isolation: str) -> dict[str, Any]:
    return next(e for e in b.events if e["f"] == "read" and e["type"] != "invoke"
                and b.events[b.events.index(e) - 1]["value"].get("isolation") == isolation)["value"]


def kinds(b: Builder) -> set[str]:
    found, _ = anomalies.check(b.history())
    return {a.kind for a in found}


def test_the_clean_history_has_no_anomaly_and_is_explained() -> None:
    b = clean()
    found, checked = anomalies.check(b.history())
    assert found == []
    assert all(checked[k] > 0 for k in ("lost_write", "duplicate", "aborted_read", "non_monotonic_send",
                                        "inconsistent_offsets", "offsets_without_output", "hanging_transaction"))
    verdict = validate.validate(b.history(), 2)
    assert verdict.explained and verdict.complete
    assert (verdict.records, verdict.markers, verdict.decisions) == (7, 4, {"chaos-p0#0.0": "COMMIT",
                                                                           "chaos-p0#0.1": "ABORT",
                                                                           "chaos-c0#0.0": "COMMIT"})
    assert validate.validate(b.history(), 1).explained


def _drop(b: Builder, isolation: str, value: str) -> None:
    read = _read(b, isolation)
    read["records"] = [r for r in read["records"] if r[3] != value]


def test_lost_write() -> None:
    b = clean()
    for v in ("chaos-p0#0.0/0", "chaos-p0#0.0/1"):
        _drop(b, "read_committed", v)
    found, _ = anomalies.check(b.history())
    lost = [a for a in found if a.kind == "lost_write"]
    assert len(lost) == 2 and "chaos-p0#0.0" in lost[0].detail
    assert {w["f"] for w in lost[0].witness} >= {"send", "commit", "read"}
    assert not validate.validate(b.history(), 2).explained  # the spec's fetch would show them


def test_torn_transaction() -> None:
    b = clean()
    _drop(b, "read_committed", "chaos-p0#0.0/1")
    assert "torn_transaction" in kinds(b)
    verdict = validate.validate(b.history(), 2)
    assert not verdict.explained and verdict.where.startswith(f"{OUT}/1")


def test_duplicate_in_a_read_and_a_twice_processed_input() -> None:
    b = clean()
    _read(b, "read_committed")["records"].append([OUT, 0, 4, "chaos-p0#0.0/0"])
    assert "duplicate" in kinds(b)
    b = clean()
    b.call("ctp-1#0", "send", {"topic": OUT, "partition": 0, "value": "in-0>chaos-c1#0.0", "txn": "chaos-c1#0.0",
                               "input": "in-0"}, result={"offset": 4})
    b.call("ctp-1#0", "commit", {"txn": "chaos-c1#0.0"})
    _read(b, "read_committed")["records"].append([OUT, 0, 4, "in-0>chaos-c1#0.0"])
    found, _ = anomalies.check(b.history())
    assert any(a.kind == "duplicate" and "2 committed outputs" in a.detail for a in found)


def test_an_output_is_tied_to_its_input_by_the_sends_input_field_never_by_its_value() -> None:
    b = clean()
    send = next(e for e in b.events if e["f"] == "send" and e["value"].get("input"))
    send["value"]["input"] = "in-1"  # the same value text, another input: in-0 now has no output, in-1 one
    assert {"offsets_without_output"} <= kinds(b)
    del send["value"]["input"]  # a history recorded before the field: refused, not judged without it
    with pytest.raises(history.HistoryError, match="names no input"):
        anomalies.check(b.history())


def test_aborted_read_g1a() -> None:
    b = clean()
    _read(b, "read_committed")["records"].append([OUT, 0, 2, "chaos-p0#0.1/0"])
    found, _ = anomalies.check(b.history())
    g1a = [a for a in found if a.kind == "aborted_read"]
    assert g1a and "chaos-p0#0.1" in g1a[0].detail
    assert not validate.validate(b.history(), 2).explained


def test_non_monotonic_send_and_send_skip() -> None:
    b = clean()
    b.txn("producer-0#0", "chaos-p0", 0, 2, [(OUT, 0, 1)])  # an acknowledgement below the last one on out/0
    assert "non_monotonic_send" in kinds(b)
    b = Builder()
    b.call("producer-0#0", "init", {"tid": "chaos-p0", "instance": 0})
    b.txn("producer-0#0", "chaos-p0", 0, 0, [(OUT, 0, 0), (OUT, 0, 2)])
    ends = {f"{OUT}/0": 4}
    records = [(OUT, 0, 0, "chaos-p0#0.0/0"), (OUT, 0, 1, "chaos-p0#0.1/0"), (OUT, 0, 2, "chaos-p0#0.0/1")]
    b.call("producer-0#0", "send", {"topic": OUT, "partition": 0, "value": "chaos-p0#0.1/0", "txn": "chaos-p0#0.1"},
           "info")
    b.read("read_uncommitted", records, ends)
    assert "send_skip" in kinds(b)


def test_non_monotonic_poll_and_poll_skip() -> None:
    b = clean()
    b.call("poller#0", "poll", {}, result={"records": [[OUT, 0, 0, "chaos-p0#0.0/0"]]})
    assert "non_monotonic_poll" in kinds(b)
    b = clean()
    b.call("ctp-0#0", "poll", {"group": "g"}, result={"records": [[IN, 0, 2, "in-2"]]})  # in-1 at offset 1 skipped
    found, _ = anomalies.check(b.history())
    assert any(a.kind == "poll_skip" and "offset 1" in a.detail for a in found)
    b = clean()  # a seek in between makes the same jump legitimate
    b.call("ctp-0#0", "seek", {"why": "abort"}, result={"positions": {f"{IN}/0": 2}})
    b.call("ctp-0#0", "poll", {"group": "g"}, result={"records": [[IN, 0, 2, "in-2"]]})
    assert "poll_skip" not in kinds(b)
    # and so does a rebalance's seek, logged by the assign callback inside the poll that returns the jump
    # (a member evicted and back, run tv1-seed103: invoked after the poll, completed before it)
    b = clean()
    b.call("ctp-0#0", "poll", {"group": "g"}, result={"records": [[IN, 0, 2, "in-2"]]})
    poll_done = b.events.pop()
    b.call("ctp-0#0", "seek", {"why": "assigned"}, result={"positions": {f"{IN}/0": None}})
    b.clock += 1
    b.events.append({**poll_done, "index": len(b.events), "time": b.clock})
    assert "poll_skip" not in kinds(b)


def test_inconsistent_offsets() -> None:
    b = clean()
    b.call("poller#0", "poll", {}, result={"records": [[OUT, 1, 2, "chaos-p0#0.1/0"]]})
    assert "inconsistent_offsets" in kinds(b)


def test_fenced_commit_and_zombie_write() -> None:
    b = clean()
    b.call("producer-0#1", "init", {"tid": "chaos-p0", "instance": 1})
    b.txn("producer-0#0", "chaos-p0", 0, 2, [(OUT, 1, 4)])  # the fenced instance sends and commits: ok
    ends = {f"{OUT}/0": 4, f"{OUT}/1": 6, f"{IN}/0": 3}
    for isolation in ("read_committed", "read_uncommitted"):
        _read(b, isolation)["records"].append([OUT, 1, 4, "chaos-p0#0.2/0"])
        _read(b, isolation)["ends"] = ends
        _read(b, isolation)["positions"] = ends
    assert {"fenced_commit", "zombie_write"} <= kinds(b)


def test_offsets_and_output_atomicity() -> None:
    b = clean()
    b.events[-1]["value"]["offsets"] = {f"{IN}/0": 0}
    assert "output_without_offsets" in kinds(b)
    b = clean()
    b.events[-1]["value"]["offsets"] = {f"{IN}/0": 2}
    found, _ = anomalies.check(b.history())
    assert any(a.kind == "offsets_without_output" and "'in-1'" in a.detail for a in found)


def test_hanging_transaction() -> None:
    b = clean()
    _read(b, "read_committed")["positions"] = {f"{OUT}/0": 2, f"{OUT}/1": 4, f"{IN}/0": 3}
    found, _ = anomalies.check(b.history())
    assert [a.kind for a in found] == ["hanging_transaction"]


def test_only_the_spec_refuses_an_older_instance_writing_after_a_newer_one() -> None:
    """A zombie's record, never visible, after its successor's record on the same partition: no anomaly
    class sees it; the spec's checkProducerEpoch rejects it."""
    b = clean()
    b.call("producer-0#1", "init", {"tid": "chaos-p0", "instance": 1})
    b.txn("producer-0#1", "chaos-p0", 1, 0, [(OUT, 0, 4)])
    b.call("producer-0#0", "begin", {"tid": "chaos-p0", "instance": 0, "txn": "chaos-p0#0.2"})
    b.call("producer-0#0", "send", {"topic": OUT, "partition": 0, "value": "chaos-p0#0.2/0", "txn": "chaos-p0#0.2"},
           "info")
    ends = {f"{OUT}/0": 8, f"{OUT}/1": 4, f"{IN}/0": 3}
    for isolation in ("read_committed", "read_uncommitted"):
        _read(b, isolation)["records"].append([OUT, 0, 4, "chaos-p0#1.0/0"])
        _read(b, isolation)["ends"] = ends
        _read(b, isolation)["positions"] = ends
    _read(b, "read_uncommitted")["records"].append([OUT, 0, 6, "chaos-p0#0.2/0"])
    assert kinds(b) == set()
    verdict = validate.validate(b.history(), 2)
    assert not verdict.explained and verdict.complete
    assert verdict.where == f"{OUT}/0@6" and "INVALID_PRODUCER_EPOCH" in verdict.why
    zombie_send = next(e for e in b.events if e["type"] == "invoke" and e["value"].get("value") == "chaos-p0#0.2/0")
    assert verdict.event == zombie_send["index"]
    assert any("COMMIT marker" in step for step in verdict.closest)


def test_a_record_nobody_sent_is_unexplained() -> None:
    b = clean()
    _read(b, "read_uncommitted")["records"].append([OUT, 0, 3, "from-nowhere"])
    verdict = validate.validate(b.history(), 2)
    assert not verdict.explained and verdict.where == f"{OUT}/0@3"


def test_the_search_budget_makes_it_inconclusive() -> None:
    verdict = validate.validate(clean().history(), 2, budget=2)
    assert not verdict.explained and not verdict.complete and "budget" in verdict.why
    b = clean()  # the readers never ran (a run whose reader processes could not start): nothing to validate
    b.events = [e for e in b.events if not e["process"].startswith("reader-")]
    verdict = validate.validate(b.history(), 2)
    assert not verdict.explained and not verdict.complete and "final" in verdict.why


def test_history_merge_completes_a_dead_process_call_as_info(tmp_path: Path) -> None:
    lines = [{"time": 10.0, "process": "p#0", "call": 1, "type": "invoke", "f": "commit", "value": {"txn": "t"}},
             {"time": 11.0, "process": "q#0", "call": 1, "type": "invoke", "f": "init", "value": {}},
             {"time": 12.0, "process": "q#0", "call": 1, "type": "ok", "f": "init", "value": {}}]
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"time": 13, "proc')  # torn last line
    merged = history.merge([history.read_lines(path)], start=10.0)
    assert [(e.process, e.type, e.time) for e in merged] == [("p#0", "invoke", 0.0), ("q#0", "invoke", 1.0),
                                                            ("q#0", "ok", 2.0), ("p#0", "info", 2.0)]
    ops = history.pair(merged)
    assert [(o.f, o.outcome) for o in ops] == [("commit", "info"), ("init", "ok")]
    with pytest.raises(history.HistoryError, match="unknown f"):
        history.event_from_json({"time": 1, "process": "p", "type": "ok", "f": "bogus"}, "line 1")


def test_fates() -> None:
    b = clean()
    b.txn("producer-0#0", "chaos-p0", 0, 2, [], "commit", "info")
    b.txn("producer-0#0", "chaos-p0", 0, 3, [], "commit", "fail")
    fates = {n: t.fate for n, t in anomalies.fates(history.pair(b.history())).items()}
    assert fates == {"chaos-p0#0.0": "committed", "chaos-p0#0.1": "aborted", "chaos-c0#0.0": "committed",
                     "chaos-p0#0.2": "unknown", "chaos-p0#0.3": "aborted"}


def test_schedule_is_seeded_spaced_and_mixed() -> None:
    plan = schedule(1, 60, ("kill", "pause", "client", "timeout"), 2)
    assert plan == schedule(1, 60, ("kill", "pause", "client", "timeout"), 2)
    assert len(plan) == 5 and len({f.kind for f in plan}) == 4
    assert all(b.at - a.at >= 8.5 for a, b in itertools.pairwise(plan))
    assert all(f.duration < 8.5 for f in plan)  # a node is back before the next fault: at most one down
    with pytest.raises(ScheduleError, match=r"unknown fault kind.*partition"):
        parse_kinds("kill,partition")
    assert parse_kinds("kill,network,kill") == ("kill", "network")
    members = schedule(2, 60, ("member",), 3, 2)
    assert {f.target for f in members} <= {"ctp-0", "ctp-1"} and all(f.duration > 10 for f in members)
    network = schedule(2, 60, ("network",), 3)
    assert {f.action for f in network} == {"cut", "delay"} and all(4 <= f.duration <= 6 for f in network)
    assert copy.copy(parse_kinds("none")) == ()


def test_the_proxy_forwards_cuts_and_heals(tmp_path: Path) -> None:
    """An echo server behind the network-fault proxy: bytes pass, a cut closes the connection and refuses the
    next, a heal lets them through again."""
    import socket
    import subprocess
    import sys
    import threading
    import time

    from txnspec.audit.chaos.proxy import Control
    from txnspec.audit.processes import free_port

    echo = socket.create_server(("127.0.0.1", 0))
    target = echo.getsockname()[1]

    def serve() -> None:
        while True:
            try:
                conn, _ = echo.accept()
            except OSError:
                return
            threading.Thread(target=lambda c=conn: [c.sendall(d) for d in iter(lambda: c.recv(100), b"")],
                             daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    listen, control_port = free_port(), free_port()
    config = tmp_path / "proxy.json"
    config.write_text(json.dumps({"routes": [{"node": 1, "listen": listen, "target": target}],
                                  "control": control_port}))
    proxy = subprocess.Popen([sys.executable, "-m", "txnspec.audit.chaos.proxy", str(config)],
                             stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert proxy.stdout is not None and proxy.stdout.readline().strip() == b"ready"
        control = Control(control_port)
        with socket.create_connection(("127.0.0.1", listen), timeout=3) as s:
            s.sendall(b"hello")
            assert s.recv(100) == b"hello"
            control.send({"cut": 1})
            time.sleep(0.2)
            assert s.recv(100) == b""  # closed by the cut
        with socket.create_connection(("127.0.0.1", listen), timeout=3) as s:
            assert s.recv(100) == b""  # accepted and closed at once
        control.send({"heal": True})
        with socket.create_connection(("127.0.0.1", listen), timeout=3) as s:
            s.sendall(b"again")
            assert s.recv(100) == b"again"
    finally:
        proxy.kill()
        proxy.wait(timeout=5)
        echo.close()


def test_more_transactions_of_one_instance_than_a_thousand_epochs() -> None:
    """A TV2 producer bumps its epoch once a transaction: 1,100 transactions of one instance on one partition
    stay inside the instance's epochs (with 1,000 epochs an instance the 1,000th was refused)."""
    b = Builder()
    b.call("producer-0#0", "init", {"tid": "chaos-p0", "instance": 0, "client": "java"})
    records = []
    for n in range(1100):
        b.txn("producer-0#0", "chaos-p0", 0, n, [(OUT, 0, 2 * n)])
        records.append((OUT, 0, 2 * n, f"chaos-p0#0.{n}/0"))
    ends = {f"{OUT}/0": 2200}
    b.read("read_committed", records, ends)
    b.read("read_uncommitted", records, ends)
    verdict = validate.validate(b.history(), 2)
    assert verdict.explained and verdict.markers == 1100


def test_the_command_exits_0_1_2_on_saved_histories_and_bad_arguments(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from txnspec.cli import main

    clean_file, lost_file, broken = tmp_path / "clean.jsonl", tmp_path / "lost.jsonl", tmp_path / "broken.jsonl"
    history.save(clean().history(), clean_file)
    b = clean()
    for v in ("chaos-p0#0.0/0", "chaos-p0#0.0/1"):
        _drop(b, "read_committed", v)
    history.save(b.history(), lost_file)
    broken.write_text('{"time": 1, "process": "p", "type": "ok", "f": "bogus"}\n')
    old = clean()
    del next(e for e in old.events if e["f"] == "send" and e["value"].get("input"))["value"]["input"]
    history.save(old.history(), old_file := tmp_path / "old.jsonl")
    html = tmp_path / "page.html"
    assert main(["chaos", "--check-history", str(clean_file), "--html-out", str(html)]) == 0
    assert "explained by the spec" in capsys.readouterr().out and "<svg" in html.read_text()
    assert main(["chaos", "--check-history", str(lost_file)]) == 1
    assert "lost_write" in capsys.readouterr().out
    for argv, says in ((["--check-history", str(broken)], "unknown f"),
                       (["--check-history", str(old_file)], "no input"),
                       (["--check-history", str(tmp_path / "none.jsonl")], "does not exist"),
                       (["--seconds", "5"], "--seconds 5"), (["--faults", "kill,partition"], "partition"),
                       (["--broker", "redpanda"], "redpanda"), (["--broker", "noida", "--faults", "network"], "proxy"),
                       (["--broker", "serve", "--faults", "network"], "proxy"),
                       (["--nodes", "1", "--faults", "kill"], "3 nodes")):
        assert main(["chaos", *argv]) == 2, argv
        assert says in capsys.readouterr().err
