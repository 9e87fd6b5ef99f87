"""The transactional wire audit: client traces of the conformance generator, the spec's answers and reads, and
their comparison with a broker's answers: synthesised conforming and non-conforming answers, and answers
recorded from noida-db 0.2.2, Tansu 0.6.0 and the librdkafka 2.16 mock cluster
(``fixtures/wire_trace_answers.json``; re-record after a spec change with
``python -c "from txnspec.audit.wire_fixtures import record_fixture; record_fixture()"``)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from txnspec.audit import wire_traces as wt
from txnspec.audit.report import RuleResult
from txnspec.conformance.generate import covering_traces
from txnspec.spec.messages import AddOffsetsToTxn, EndTxn, InitProducerId, TxnOffsetCommit

FIXTURE = Path(__file__).parent / "fixtures" / "wire_trace_answers.json"
PID_SHIFT = 500  # the fake broker's producer ids are the spec's + this


def _plans() -> tuple[wt.WirePlan, ...]:
    return wt.plans(0, 2, "tv1", True)


def _results() -> dict[str, RuleResult]:
    return {rule: RuleResult("wire", rule, text) for rule, text in wt.RULE_DESCRIPTIONS.items()}


# --- traces and plans ------------------------------------------------------------------------------------

def test_client_walks_hold_only_what_a_client_sends_and_the_broker_does_by_itself() -> None:
    for plan in _plans():
        assert wt.why_not_client_sendable(plan.trace) is None
        assert plan.trace.strategy == "random" and plan.exchanges


def test_a_trace_with_a_fault_cannot_be_sent_by_a_client() -> None:
    with_failover = next(t for t in covering_traces("failover", variant="tv1")
                         if any(s.kind == "failover" for s in t.steps))
    reason = wt.why_not_client_sendable(with_failover)
    assert reason is not None and "fault no client can cause" in reason
    with pytest.raises(ValueError, match="cannot be sent by a client"):
        wt.wire_plan(with_failover)


def test_the_chosen_traces_cover_every_transactional_request_and_read() -> None:
    covered = set().union(*(wt.coverage_items(p) for p in _plans()))
    for item in ("InitProducerId:NONE", "InitProducerId:again:CONCURRENT_TRANSACTIONS", "AddPartitionsToTxn:NONE",
                 "AddPartitionsToTxn:PRODUCER_FENCED", "AddOffsetsToTxn:NONE", "TxnOffsetCommit:NONE",
                 "EndTxn(COMMIT):NONE", "EndTxn(ABORT):NONE", "EndTxn(COMMIT):again:NONE",
                 "EndTxn(ABORT):PRODUCER_FENCED",
                 "Produce:NONE", "Produce:again:NONE", "Produce:INVALID_PRODUCER_EPOCH",
                 "fetch:READ_COMMITTED:open transaction", "fetch:READ_COMMITTED:aborted",
                 "offset_fetch:UNSTABLE_OFFSET_COMMIT", "offset_fetch:NONE"):
        assert item in covered, item


def test_a_zombie_trace_carries_kafkas_answers() -> None:
    plan = wt.wire_plan(wt.client_walk("zombie", "tv1", 13))
    answers = [wt.expected_answer(x.response) for x in plan.exchanges]
    assert answers == [
        {"error": "NONE", "producer_id": 0, "epoch": 0},  # the first instance
        {"error": "NONE"},  # AddPartitionsToTxn
        {"error": "CONCURRENT_TRANSACTIONS"},  # the second instance: the coordinator fences and aborts first
        {"error": "NONE", "producer_id": 0, "epoch": 2},  # its retry: epoch 1 went to the fencing abort
        {"error": "INVALID_PRODUCER_EPOCH"},  # the zombie's produce
        {"error": "PRODUCER_FENCED"},  # the zombie's EndTxn
        {"error": "NONE"}, {"error": "NONE", "base_offset": 1}, {"error": "NONE"},
    ]
    after_zombie_produce = plan.exchanges[1].after.fetches
    assert after_zombie_produce == ()  # AddPartitionsToTxn changes no read
    after_fence = dict(((p, iso), v) for p, iso, v in plan.exchanges[2].after.fetches)
    assert after_fence[("p0", "READ_COMMITTED")] == {"high_watermark": 1, "last_stable_offset": 1, "records": [],
                                                      "aborted_transactions": []}  # the abort marker at offset 0


def test_reads_after_a_transactional_offset_commit_are_unstable_until_the_commit() -> None:
    plan = next(p for p in _plans() if any(isinstance(x.request, TxnOffsetCommit) for x in p.exchanges))
    views = [(type(x.request).__name__, v) for x in plan.exchanges for _, v in x.after.offsets]
    assert ("TxnOffsetCommit", {"error": "UNSTABLE_OFFSET_COMMIT", "committed_offset": -1}) in views
    assert views[-1] == ("EndTxn", {"error": "NONE", "committed_offset": views[-1][1]["committed_offset"]})
    assert views[-1][1]["committed_offset"] >= 1
    assert any(isinstance(x.request, AddOffsetsToTxn) for x in plan.exchanges)


# --- comparison on synthesised answers -------------------------------------------------------------------------

def _broker_terms(answer: dict[str, Any]) -> dict[str, Any]:
    out = dict(answer)
    if isinstance(out.get("producer_id"), int) and out["producer_id"] >= 0:
        out["producer_id"] += PID_SHIFT
    if "aborted_transactions" in out:
        out["aborted_transactions"] = [[pid + PID_SHIFT, first] for pid, first in out["aborted_transactions"]]
    return out


METHOD = {"InitProducerId": "init_producer_id", "AddPartitionsToTxn": "add_partitions",
          "AddOffsetsToTxn": "add_offsets", "TxnOffsetCommit": "txn_offset_commit", "EndTxn": "end_txn",
          "Produce": "produce"}


def _conforming_calls(plan: wt.WirePlan) -> list[list[Any]]:
    """What a broker that answers as the spec does answers, call by call, with its own producer ids; each call
    carries a third item saying what it answers (the request, or the read)."""
    calls: list[list[Any]] = []
    for x in plan.exchanges:
        calls.append([METHOD[type(x.request).__name__], _broker_terms(wt.expected_answer(x.response)), "request"])
        calls += [["fetch", _broker_terms(view), isolation] for _, isolation, view in x.after.fetches]
        calls += [["offset_fetch", view, "offsets"] for _, view in x.after.offsets]
    return calls


def _wire(calls: list[list[Any]]) -> wt.RecordedWire:
    return wt.RecordedWire([c[:2] for c in calls])


def test_answers_that_conform_hold_with_the_brokers_own_producer_ids() -> None:
    results = _results()
    plans = _plans()
    for i, plan in enumerate(plans):
        wire = _wire(_conforming_calls(plan))
        wt.run_trace(wire, plan, f"t-{i}", results)
        assert wire.calls == []  # every request was sent, every read made
    assert all(r.outcome != "violated" for r in results.values()), [r for r in results.values() if r.violations]
    assert results["txn.EndTxn"].checked == sum(isinstance(x.request, EndTxn) for p in plans for x in p.exchanges)
    assert results["fetch.read_committed"].checked > 20 and results["offset_fetch"].checked >= 4
    assert results["txn.retriable_answers"].checked >= 2


def test_a_different_answer_ends_the_trace_with_its_minimal_sequence() -> None:
    plan = wt.wire_plan(wt.client_walk("zombie", "tv1", 13))
    calls = _conforming_calls(plan)
    calls[[c[0] for c in calls].index("end_txn")][1] = {"error": "INVALID_PRODUCER_EPOCH"}  # an older Kafka's answer
    results = _results()
    wt.run_trace(_wire(calls), plan, "t", results)
    assert results["txn.EndTxn"].violations == 1
    sequence = results["txn.EndTxn"].examples[0]["sequence"]
    assert sequence[-1] == {"request": "EndTxn(ABORT, pid=0, epoch=0)", "expected": {"error": "PRODUCER_FENCED"},
                            "actual": {"error": "INVALID_PRODUCER_EPOCH"}}
    assert [s["request"].split("(")[0] for s in sequence] == ["InitProducerId", "AddPartitionsToTxn", "InitProducerId",
                                                              "InitProducerId", "Produce", "EndTxn"]
    assert results["txn.Produce"].checked == 1  # nothing after the difference was sent


def test_a_read_committed_fetch_that_shows_an_open_transaction_is_a_violation() -> None:
    plan = wt.wire_plan(wt.client_walk("offsets", "tv1", 10))
    calls = _conforming_calls(plan)
    k = next(i for i, c in enumerate(calls) if c[2] == "READ_COMMITTED"
             and c[1]["last_stable_offset"] < c[1]["high_watermark"])
    calls[k][1] = {**calls[k][1], "last_stable_offset": calls[k][1]["high_watermark"]}  # the open record shows
    # after one difference the trace reads read_committed no more; its other answers are still compared
    calls = calls[:k + 1] + [c for c in calls[k + 1:] if c[2] != "READ_COMMITTED"]
    results = _results()
    wire = _wire(calls)
    wt.run_trace(wire, plan, "t", results)
    assert results["fetch.read_committed"].violations == 1 and wire.calls == []
    assert results["txn.EndTxn"].checked == 1 and results["txn.EndTxn"].violations == 0


def test_a_broker_that_skips_concurrent_transactions_is_reported_and_the_trace_goes_on() -> None:
    plan = next(p for p in _plans() for i, x in enumerate(p.exchanges[:-1])
                if wt.expected_answer(x.response)["error"] == "CONCURRENT_TRANSACTIONS"
                and p.exchanges[i + 1].request == x.request)
    calls = _conforming_calls(plan)
    k = next(i for i, c in enumerate(calls) if c[1].get("error") == "CONCURRENT_TRANSACTIONS")
    retry = next(i for i in range(k + 1, len(calls)) if calls[i][0] == "init_producer_id")
    calls[k] = calls[retry]  # the retry's answer, at once
    reads_after = [c for c in calls[k + 1:retry] if c[0] != "init_producer_id"]
    calls = calls[:k + 1] + reads_after + calls[retry + 1:]
    results = _results()
    wire = _wire(calls)
    wt.run_trace(wire, plan, "t", results)
    assert results["txn.retriable_answers"].violations == 1
    assert sum(r.violations for r in results.values()) == 1 and wire.calls == []


def test_init_producer_id_requests_carry_the_brokers_producer_id() -> None:
    sent: list[tuple[Any, ...]] = []

    class Wire(wt.RecordedWire):
        def init_producer_id(self, *args: Any) -> dict[str, Any]:
            sent.append(args)
            return super().__getattr__("init_producer_id")(*args)

    plan = wt.wire_plan(wt.client_walk("zombie", "tv1", 13))
    wt.run_trace(Wire([c[:2] for c in _conforming_calls(plan)]), plan, "px", _results())
    assert sent[0] == ("px-t1", 60000, -1, -1)
    assert all(isinstance(x.request, InitProducerId) for x in plan.exchanges[:1])


# --- the consumer's view of a fetched log ------------------------------------------------------------------------

def _batch(base_offset: int, producer_id: int, *, count: int = 1, control: str | None = None) -> bytes:
    class Builder(DefaultRecordBatchBuilder):  # type: ignore[misc]
        def _get_attributes(self, include_compression_type: bool = True) -> int:
            flag = DefaultRecordBatch.CONTROL_MASK if control else 0
            return int(super()._get_attributes(include_compression_type)) | flag

    builder = Builder(2, 0, True, producer_id, 0, 0, 1 << 20)
    if control:
        builder.append(0, 0, struct.pack(">hh", 0, 1 if control == "commit" else 0), b"", [])
    else:
        for i in range(count):
            builder.append(i, 0, None, b"v", [])
    data = bytearray(builder.build())
    data[0:8] = struct.pack(">q", base_offset)  # the base offset is outside the batch's CRC
    return bytes(data)


def test_the_consumer_view_drops_control_records_and_aborted_batches() -> None:
    log = _batch(0, 7, count=2) + _batch(2, 8) + _batch(3, 7, control="abort") + _batch(4, 8, control="commit") \
        + _batch(5, 7)
    assert wt.consumer_view(log, [], 6) == [0, 1, 2, 5]  # read_uncommitted: data records up to the high watermark
    assert wt.consumer_view(log, [(7, 0)], 6) == [2, 5]  # producer 7's first transaction aborted
    assert wt.consumer_view(log, [(7, 0)], 5) == [2]  # up to the last stable offset


# --- recorded brokers ------------------------------------------------------------------------------------------

RECORDED = json.loads(FIXTURE.read_text())
FOUND = {
    "noida": {"txn.InitProducerId", "txn.AddPartitionsToTxn", "offset_fetch"},
    "tansu": {"txn.InitProducerId", "txn.Produce", "fetch.read_committed", "offset_fetch"},
    "librdkafka-mock": {"txn.InitProducerId", "txn.Produce", "fetch.read_committed", "fetch.read_uncommitted",
                        "offset_fetch"},
}


def _replay(broker: str) -> dict[str, RuleResult]:
    fixture = RECORDED[broker]
    wire = wt.RecordedWire(fixture["calls"])
    results = {r.rule: r for r in wt.run_plans(wire, wt.plans(fixture["seed"], fixture["traces"], fixture["variant"],
                                                               fixture["require_stable"]), "fx")}
    assert wire.calls == [], "the recording was not replayed to its end: re-record it (see the module doc)"
    return results


@pytest.mark.parametrize("broker", sorted(FOUND))
def test_recorded_answers_of_each_broker(broker: str) -> None:
    results = _replay(broker)
    assert {name for name, r in results.items() if r.violations} == FOUND[broker]
    assert all(not r.note for r in results.values())
    for r in results.values():
        for example in r.examples:
            assert example["sequence"][-1]["expected"] != example["sequence"][-1]["actual"]


def test_noida_shows_a_transactional_offset_commit_before_its_transaction_commits() -> None:
    example = _replay("noida")["offset_fetch"].examples[0]["sequence"][-1]
    assert example["expected"] == {"error": "UNSTABLE_OFFSET_COMMIT", "committed_offset": -1}
    assert example["actual"] == {"error": "NONE", "committed_offset": 1}


def test_tansu_shows_an_aborted_record_at_read_committed() -> None:
    example = _replay("tansu")["fetch.read_committed"].examples[0]["sequence"][-1]
    assert example["expected"]["records"] == [] and example["expected"]["aborted_transactions"]
    assert example["actual"]["records"] and example["actual"]["aborted_transactions"] == []


def test_the_mock_has_no_last_stable_offset() -> None:
    example = _replay("librdkafka-mock")["fetch.read_committed"].examples[0]["sequence"][-1]
    assert example["expected"]["last_stable_offset"] < example["expected"]["high_watermark"]
    assert example["actual"]["last_stable_offset"] == example["actual"]["high_watermark"]


# --- the reference implementation as the broker ----------------------------------------------------------------

def test_the_reference_implementation_answers_as_the_spec_on_every_rule_and_trace() -> None:
    results = wt.run_impl_wire_audit(0, 2)
    assert [r.rule for r in results if r.violations] == []
    assert all(r.checked for r in results), [r.rule for r in results if not r.checked]
    assert next(r for r in results if r.rule == "txn.traces").checked == 24  # 12 traces of each version


# broker mutants of the implementation the trace replay kills (TV2 traces), and why the others survive it
KILLED = {"no-duplicate-check": "txn.Produce", "no-epoch-fencing": "txn.Produce",
          "lso-is-high-watermark": "fetch.read_committed", "offsets-visible-before-marker": "offset_fetch",
          "abort-keeps-offsets": "offset_fetch", "markers-skip-a-partition": "fetch.read_committed",
          "init-does-not-fence-ongoing": "txn.InitProducerId", "end-txn-response-stale-epoch": "txn.EndTxn",
          "marker-coordinator-epoch-ahead": "txn.EndTxn", "stale-sequence-kept": "txn.Produce"}
SURVIVE = {"duplicate-check-last-batch-only": "needs 5 batches: the hand-chosen rule produce.duplicate_within_last_5",
           "no-aborted-filter": "a consumer's bug: the audit filters fetched batches itself",
           "timeout-commits": "needs a transaction timeout, which no client can cause",
           "acts-on-failed-log-append": "needs a failed transaction-log append, which no client can cause",
           "lost-request-not-retried": "a client's bug: the audit's own client sends the requests",
           "duplicate-window-of-four": "needs 5 batches of one epoch before a duplicate: the wire traces have one "
                                       "batch in flight per partition",
           "out-of-order-never-retried": "a client's rule: the audit's own client sends the planned requests"}


def test_the_trace_replay_kills_the_broker_mutants_of_the_implementation() -> None:
    from txnspec.impl.mutants import MUTANTS

    assert set(KILLED) | set(SURVIVE) == set(MUTANTS)
    for name, mutant in MUTANTS.items():
        results = _results()
        for i, plan in enumerate(wt.plans(0, 2, "current", True)):
            wt.run_trace(wt.ImplTxnWire(2, mutant.rules), plan, f"m-{i}", results)
        violated = {rule for rule, r in results.items() if r.violations}
        if name in KILLED:
            assert KILLED[name] in violated, (name, violated)
        else:
            assert violated == set(), (name, violated)


def test_the_hand_chosen_rules_kill_the_mutant_the_traces_miss() -> None:
    from txnspec.audit import wire
    from txnspec.impl.mutants import rules_of

    results = wire.run_rules(wt.ImplTransport(2, rules_of("duplicate-check-last-batch-only")))
    assert {r.rule for r in results if r.violations} == {"produce.duplicate_within_last_5"}
