"""The coordinators' trace validation (audit/chaos/coordination.py, audit/chaos/groups.py) on synthetic histories:
the clean history is explained; a zombie's acknowledged send, a commit the partitions show aborted, a committed
offset nobody committed and a read-back of an aborted transaction's offset are each unexplained at their event."""

from __future__ import annotations

from test_chaos_checkers import IN, OUT, Builder, clean

from txnspec.audit.chaos import anomalies, coordination, groups, history, run


def _coordinator(b: Builder, decisions: dict[str, str], budget: int = coordination.NODE_BUDGET
                 ) -> coordination.Verdict:
    ops = history.pair(b.history())
    return coordination.validate_coordinator(ops, anomalies.fates(ops), decisions, 2, {}, budget)


def _groups(b: Builder) -> coordination.Verdict:
    ops = history.pair(b.history())
    txns = anomalies.fates(ops)
    return groups.validate_groups(ops, txns, anomalies.final_reads(ops), {})


def test_the_clean_history_is_explained_by_both_coordinators() -> None:
    summary = run.judge(clean().history(), 2)
    assert summary["coordinator"]["explained"] and summary["groups"]["explained"]
    # p0: init, three first sends, commit, abort; c0: init, send, offsets, commit
    assert (summary["coordinator"]["ids"], summary["coordinator"]["calls"]) == (2, 10)
    assert summary["groups"]["calls"] == 1  # the final read of group g's one partition
    assert run.verdict(summary) == 0


def zombie() -> Builder:
    """Instance 1 of chaos-p0 initialised; instance 0, fenced, still has a send acknowledged."""
    b = Builder()
    b.call("producer-0#0", "init", {"tid": "chaos-p0", "instance": 0})
    b.call("producer-0#1", "init", {"tid": "chaos-p0", "instance": 1})
    name = "chaos-p0#0.0"
    b.call("producer-0#0", "begin", {"tid": "chaos-p0", "instance": 0, "txn": name})
    b.call("producer-0#0", "send", {"topic": OUT, "partition": 0, "value": f"{name}/0", "txn": name},
           result={"offset": 0})
    b.call("producer-0#0", "commit", {"txn": name}, "fail", {"class": "fatal"}, "_FENCED")
    return b


def test_a_fenced_instances_acknowledged_send_is_unexplained() -> None:
    verdict = _coordinator(zombie(), {})
    assert not verdict.explained and verdict.complete
    send = next(e for e in zombie().events if e["f"] == "send" and e["type"] == "invoke")
    assert verdict.event == send["index"] and verdict.where == f"chaos-p0 at event {send['index']}"
    assert verdict.why == "producer-0#0 send ok: no state of the spec's coordinator answers it so"
    # the same send unanswered: it may never have reached the coordinator
    b = zombie()
    b.events[[e["f"] for e in b.events].index("send") + 1].update(type="info", value={})
    assert _coordinator(b, {}).explained
    # a first send refused as fenced by the partition (run tv1-seed211 of the second batch), with no newer instance
    # and nothing open the coordinator could have timed out: no coordinator answer is needed
    b = Builder()
    b.call("producer-0#0", "init", {"tid": "chaos-p0", "instance": 0})
    b.call("producer-0#0", "begin", {"tid": "chaos-p0", "instance": 0, "txn": "chaos-p0#0.0"})
    b.call("producer-0#0", "send", {"topic": OUT, "partition": 0, "value": "chaos-p0#0.0/0", "txn": "chaos-p0#0.0"},
           "info", error="ProducerFencedException")
    b.call("producer-0#0", "abort", {"txn": "chaos-p0#0.0"})
    assert _coordinator(b, {}).explained


def test_a_commit_the_partitions_show_aborted_is_unexplained() -> None:
    b = clean()
    assert _coordinator(b, {"chaos-p0#0.0": "COMMIT"}).explained
    verdict = _coordinator(b, {"chaos-p0#0.0": "ABORT"})
    assert not verdict.explained and "the coordinator decides COMMIT; the partitions show ABORT" in verdict.why
    assert not _coordinator(b, {"chaos-p0#0.0": "COMMIT"}, budget=1).complete  # the budget: inconclusive


def test_a_committed_offset_nobody_committed_is_unexplained() -> None:
    b = clean()
    final = next(e for e in b.events if e["f"] == "committed" and e["type"] == "ok")
    final["value"]["offsets"][f"{IN}/0"] = 3
    verdict = _groups(b)
    assert not verdict.explained and verdict.where == f"group g: {IN}/0 (final read)"
    assert "the group's committed offset is 3; the spec's group coordinator" in verdict.why and "holds 1" in verdict.why


def test_reading_back_an_aborted_transactions_offset_is_unexplained() -> None:
    def history_with(position: int) -> Builder:
        b = clean()
        name = "chaos-c0#0.1"
        b.call("ctp-0#0", "poll", {"group": "g"}, result={"records": [[IN, 0, 1, "in-1"]]})
        b.call("ctp-0#0", "begin", {"tid": "chaos-c0", "instance": 0, "txn": name})
        b.call("ctp-0#0", "offsets", {"txn": name, "group": "g", "offsets": {f"{IN}/0": 2}})
        b.call("ctp-0#0", "abort", {"txn": name})
        b.call("ctp-0#0", "seek", {"why": "abort"}, result={"positions": {f"{IN}/0": position}})
        return b

    assert _groups(history_with(1)).explained
    verdict = _groups(history_with(2))
    seek = next(e for e in history_with(2).events if e["f"] == "seek")
    assert not verdict.explained and verdict.event == seek["index"]
    assert "read back committed offset 2; the spec's group coordinator allows [1]" in verdict.why


def two_inits(order: tuple[tuple[str, str], ...]) -> Builder:
    """Instances 1 and 2 of chaos-p0 initialise in ``order`` ((process, invoke|ok), ...); then instance 1
    commits a transaction over out/0 and out/1, read back by both readers."""
    b = Builder()
    for process, type_ in order:
        b.clock += 1
        value = {"tid": "chaos-p0", "instance": int(process[-1])} if type_ == "invoke" else {}
        b.events.append({"index": len(b.events), "time": b.clock, "process": process, "call": 1, "type": type_,
                         "f": "init", "value": value})
    b.calls = {"producer-0#1": 1, "producer-0#2": 1}
    name = b.txn("producer-0#1", "chaos-p0", 1, 0, [(OUT, 0, 0), (OUT, 1, 0)])
    records = [(OUT, 0, 0, f"{name}/0"), (OUT, 1, 0, f"{name}/1")]
    b.read("read_committed", records, {f"{OUT}/0": 2, f"{OUT}/1": 2})
    b.read("read_uncommitted", records, {f"{OUT}/0": 2, f"{OUT}/1": 2})
    return b


def test_instances_are_ordered_by_their_inits_not_their_numbers() -> None:
    """Run tv1-seed211: instance 1's JVM was slow to start and called init after instance 2 (the zombie fault's
    successor) had; the two inits overlapped and 1's finished last, so 1 owns the id. Its commit is no
    fenced_commit, its records are no zombie's, and the partitions' epochs follow the inits' order."""
    one, two = "producer-0#1", "producer-0#2"
    summary = run.judge(two_inits(((two, "invoke"), (one, "invoke"), (two, "ok"), (one, "ok"))).history(), 2)
    assert summary["anomalies"] == [], summary["anomalies"]
    assert summary["checked"]["fenced_commit"] == 0  # overlapping inits: neither instance is surely fenced
    assert summary["validation"]["explained"] and summary["coordinator"]["explained"]
    # 2's init after 1's: 1 is surely fenced, its commit an anomaly, and the spec's coordinator refuses its send
    # (the partitions never saw 2's epoch: they cannot tell)
    summary = run.judge(two_inits(((one, "invoke"), (one, "ok"), (two, "invoke"), (two, "ok"))).history(), 2)
    assert {"fenced_commit", "zombie_write"} <= set(summary["anomaly_counts"])
    assert not summary["coordinator"]["explained"] and "producer-0#1 send ok" in summary["coordinator"]["why"]
