"""G0 and G1c (audit/chaos/cycles.py) on synthetic histories: a log that contradicts the order of two transactions
Kafka orders is a G0; a transaction that read another's record and wrote before it is a G1c; two concurrent
transactions interleaving in opposite orders (which Kafka allows) is neither; real histories have no cycle."""

from __future__ import annotations

from test_chaos_checkers import OUT, Builder, clean

from txnspec.audit.chaos import anomalies, cycles


def _send(b: Builder, process: str, name: str, j: int, partition: int, offset: int) -> None:
    b.call(process, "send", {"topic": OUT, "partition": partition, "value": f"{name}/{j}", "txn": name},
           result={"offset": offset})


def _begin(b: Builder, process: str, tid: str, name: str) -> None:
    b.call(process, "begin", {"tid": tid, "instance": 0, "txn": name})


def _reads(b: Builder, log: dict[tuple[int, int], str]) -> None:
    records = [(OUT, p, o, v) for (p, o), v in sorted(log.items())]
    ends = {f"{OUT}/{p}": max(o for q, o in log if q == p) + 2 for p in {p for p, _ in log}}
    b.read("read_committed", records, ends)
    b.read("read_uncommitted", records, ends)


def two_writers(concurrent: bool) -> Builder:
    """p0's A and p1's B each write out/0 and out/1; on out/0 B's record comes first, on out/1 A's. With
    ``concurrent`` both are open at once (Kafka allows any interleaving); otherwise A committed before B began."""
    b = Builder()
    for p in (0, 1):
        b.call(f"producer-{p}#0", "init", {"tid": f"chaos-p{p}", "instance": 0})
    a, c = "chaos-p0#0.0", "chaos-p1#0.0"
    _begin(b, "producer-0#0", "chaos-p0", a)
    if concurrent:
        _begin(b, "producer-1#0", "chaos-p1", c)
    _send(b, "producer-0#0", a, 0, 0, 1)
    _send(b, "producer-0#0", a, 1, 1, 0)
    if concurrent:
        _send(b, "producer-1#0", c, 0, 0, 0)
        _send(b, "producer-1#0", c, 1, 1, 1)
    b.call("producer-0#0", "commit", {"txn": a})
    if not concurrent:
        _begin(b, "producer-1#0", "chaos-p1", c)
        _send(b, "producer-1#0", c, 0, 0, 0)
        _send(b, "producer-1#0", c, 1, 1, 1)
    b.call("producer-1#0", "commit", {"txn": c})
    _reads(b, {(0, 0): f"{c}/0", (0, 1): f"{a}/0", (1, 0): f"{a}/1", (1, 1): f"{c}/1"})
    return b


def found(b: Builder, kind: str) -> list[anomalies.Anomaly]:
    return [a for a in anomalies.check(b.history())[0] if a.kind == kind]


def test_g0_two_transactions_kafka_orders_in_opposite_orders() -> None:
    g0 = found(two_writers(concurrent=False), "G0")
    assert len(g0) == 1
    assert "chaos-p0#0.0 -" in g0[0].detail and "chaos-p1#0.0 -" in g0[0].detail and "-ww->" in g0[0].detail
    # the witness: the two sends that show the ww edge that contradicts the commit order
    assert {w["f"] for w in g0[0].witness} == {"send"} and len(g0[0].witness) >= 4


def test_concurrent_transactions_may_interleave_in_opposite_orders() -> None:
    found_all, checked = anomalies.check(two_writers(concurrent=True).history())
    assert [a.kind for a in found_all if a.kind in ("G0", "G1c")] == []
    assert checked["G0"] == 0  # no edge at all between overlapping transactions


def g1c() -> Builder:
    """p0's A writes out/0 offset 2 and commits; ctp-0 polls it, then C writes out/0 at offset 0: C read A, and
    wrote before it."""
    b = Builder()
    b.call("producer-0#0", "init", {"tid": "chaos-p0", "instance": 0})
    a, c = "chaos-p0#0.0", "chaos-c0#0.0"
    _begin(b, "producer-0#0", "chaos-p0", a)
    _send(b, "producer-0#0", a, 0, 0, 2)
    b.call("producer-0#0", "commit", {"txn": a})
    b.call("ctp-0#0", "init", {"tid": "chaos-c0", "instance": 0})
    b.call("ctp-0#0", "poll", {"group": "g"}, result={"records": [[OUT, 0, 2, f"{a}/0"]]})
    _begin(b, "ctp-0#0", "chaos-c0", c)
    b.call("ctp-0#0", "send", {"topic": OUT, "partition": 0, "value": f"{a}/0>{c}", "txn": c, "input": f"{a}/0"},
           result={"offset": 0})
    b.call("ctp-0#0", "commit", {"txn": c})
    _reads(b, {(0, 0): f"{a}/0>{c}", (0, 2): f"{a}/0"})
    return b


def test_g1c_a_transaction_writes_before_the_one_it_read() -> None:
    found_g1c = found(g1c(), "G1c")
    assert anomalies.check(g1c().history())[1]["G1c"] == 1  # one wr edge
    assert len(found_g1c) == 1 and found(g1c(), "G0") == []
    detail = found_g1c[0].detail
    assert "chaos-p0#0.0 -wr-> chaos-c0#0.0" in detail and "chaos-c0#0.0 -ww-> chaos-p0#0.0" in detail
    assert {w["f"] for w in found_g1c[0].witness} == {"send", "poll"}


def test_a_clean_history_has_edges_and_no_cycle() -> None:
    b = clean()
    # a second committed transaction of p0 after the ctp's, on out/1 after both: ww and rt edges, no cycle
    name = b.txn("producer-0#0", "chaos-p0", 0, 2, [(OUT, 1, 4)])
    for isolation in ("read_committed", "read_uncommitted"):
        read = next(e for i, e in enumerate(b.events) if e["f"] == "read" and e["type"] == "ok"
                    and b.events[i - 1]["value"].get("isolation") == isolation)
        read["value"]["records"].append([OUT, 1, 4, f"{name}/0"])
        read["value"]["ends"][f"{OUT}/1"] = 6
    found_all, checked = anomalies.check(b.history())
    assert [a.kind for a in found_all] == []
    assert checked["G0"] >= 3 and checked["G1c"] == 0  # the ctp read an input record: no transaction wrote it


def test_components_and_a_shortest_cycle() -> None:
    g = cycles.Graph()
    for s, t in (("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e"), ("e", "d"), ("b", "a")):
        g.link(cycles.Edge(s, t, "ww", ""))
    assert sorted(cycles.components(g)) == [["a", "b", "c"], ["d", "e"]]
    assert [(e.source, e.target) for e in cycles.shortest_cycle(g, ["a", "b", "c"])] == [("a", "b"), ("b", "a")]
    # a long chain without a cycle: no component, no recursion limit
    chain = cycles.Graph()
    for i in range(50_000):
        chain.link(cycles.Edge(str(i), str(i + 1), "rt", ""))
    assert cycles.components(chain) == []

