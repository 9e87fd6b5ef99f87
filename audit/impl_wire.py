"""The implementation transport of the wire-level audit: the reference implementation (:mod:`txnspec.impl`)
in process behind :class:`~.trace_replay.TxnWire` and the hand-chosen rules' transports
(``txnspec audit --broker impl``).
"""

from __future__ import annotations

from typing import Any

from txnspec.audit.connection import WireError
from txnspec.audit.report import RuleResult
from txnspec.audit.trace_plan import SCENARIOS, describe_plans, plans
from txnspec.audit.trace_replay import (
    PAUSE_SECONDS,
    RULE_DESCRIPTIONS,
    FetchedBatch,
    consumer_records,
    first_error_name,
    run_trace,
)
from txnspec.impl.topic_partition import TopicPartition


def _only(topic: str) -> TopicPartition:
    """A topic's one partition, as the implementation names it (made whole, never text to be parsed again)."""
    return TopicPartition(topic, 0)


class ImplTxnWire:
    """The reference implementation (:mod:`txnspec.impl`) behind :class:`TxnWire`: one in-process broker whose
    markers are written right after each request (its asynchronous work, done at once); a topic is its
    partition ``<topic>-0``. Replaying the audit's traces on it checks the implementation against the spec
    request by request."""

    def __init__(self, transaction_version: int = 0, rules: Any = None) -> None:
        """``rules``: the implementation's rules (:class:`txnspec.impl.policy.Rules`; None: Kafka's)."""
        from txnspec.impl.broker import Broker, BrokerConfig
        from txnspec.impl.policy import KAFKA

        self.transaction_version = transaction_version
        self.broker = Broker(BrokerConfig(transaction_version=transaction_version), rules=rules or KAFKA)
        self.now_ms = 0

    def prepare(self, topics: list[str]) -> None:
        for topic in topics:
            self.broker.partition(_only(topic))

    def pause(self) -> None:
        self.now_ms += int(PAUSE_SECONDS * 1000)

    def _handle(self, request: Any) -> Any:
        response = self.broker.handle(request, self.now_ms)
        self.broker.deliver_markers(self.now_ms)
        return response

    def init_producer_id(self, tid: str, timeout_ms: int, producer_id: int, epoch: int) -> dict[str, Any]:
        from txnspec.impl.messages import InitProducerId as Init

        r = self._handle(Init(tid, timeout_ms, producer_id, epoch))
        if r.error.name != "NONE":
            return {"error": r.error.name}
        return {"error": "NONE", "producer_id": r.producer_id, "epoch": r.producer_epoch}

    def add_partitions(self, tid: str, producer_id: int, epoch: int, topics: list[str]) -> dict[str, Any]:
        from txnspec.impl.messages import AddPartitionsToTxn as Add

        r = self._handle(Add(tid, producer_id, epoch, tuple(_only(t) for t in topics)))
        return {"error": first_error_name([r.error.name, *(e.name for _, e in r.partition_errors)])}

    def add_offsets(self, tid: str, producer_id: int, epoch: int, group: str) -> dict[str, Any]:
        from txnspec.impl.messages import AddOffsetsToTxn as Add

        return {"error": self._handle(Add(tid, producer_id, epoch, group)).error.name}

    def txn_offset_commit(self, tid: str, group: str, producer_id: int, epoch: int,
                          offsets: list[tuple[str, int]]) -> dict[str, Any]:
        from txnspec.impl.messages import TxnOffsetCommit as Commit

        r = self._handle(Commit(tid, group, producer_id, epoch, tuple((_only(t), o) for t, o in offsets)))
        return {"error": first_error_name([r.error.name, *(e.name for _, e in r.partition_errors)])}

    def end_txn(self, tid: str, producer_id: int, epoch: int, commit: bool) -> dict[str, Any]:
        from txnspec.impl.log import ControlType
        from txnspec.impl.messages import EndTxn as End

        result = ControlType.COMMIT if commit else ControlType.ABORT
        r = self._handle(End(tid, producer_id, epoch, result, self.transaction_version))
        out: dict[str, Any] = {"error": r.error.name}
        if self.transaction_version >= 2 and r.error.name == "NONE":
            out.update(producer_id=r.producer_id, epoch=r.producer_epoch)
        return out

    def produce(self, topic: str, producer_id: int, epoch: int, base_sequence: int, count: int,
                tid: str | None) -> dict[str, Any]:
        from txnspec.impl.log import Record
        from txnspec.impl.messages import Produce as Send

        records = tuple(Record(None, f"{base_sequence + i}".encode(), self.now_ms) for i in range(count))
        r = self._handle(Send(_only(topic), producer_id, epoch, base_sequence, records, tid is not None, tid,
                              self.transaction_version))
        return {"error": r.error.name, **({"base_offset": r.base_offset} if r.error.name == "NONE" else {})}

    def fetch(self, topic: str, committed: bool) -> dict[str, Any]:
        from txnspec.impl.messages import Fetch as Read
        from txnspec.impl.partition import IsolationLevel as Level

        r = self._handle(Read(_only(topic), 0, Level.READ_COMMITTED if committed else Level.READ_UNCOMMITTED))
        if r.error.name != "NONE":
            return {"error": r.error.name}
        f = r.extra["fetch"]
        aborted = [(a.producer_id, a.first_offset) for a in (f.aborted_transactions or ())]
        batches = [FetchedBatch(b.base_offset, tuple(range(b.base_offset, b.next_offset)), b.producer_id,
                                b.is_transactional, b.control_type.name if b.control_type is not None else None)
                   for b in f.batches]
        upper = f.last_stable_offset if committed else f.high_watermark
        return {"high_watermark": f.high_watermark, "last_stable_offset": f.last_stable_offset,
                "aborted_transactions": aborted, "records": consumer_records(batches, aborted, upper)}

    def offset_fetch(self, group: str, topic: str) -> dict[str, Any]:
        from txnspec.impl.messages import OffsetFetch as Read

        r = self._handle(Read(group, (_only(topic),), True))
        offsets = dict(r.offsets)
        if r.error.name != "NONE":
            return {"error": r.error.name, "committed_offset": -1}
        return {"error": "NONE", "committed_offset": offsets.get(_only(topic), -1)}


class ImplTransport(ImplTxnWire):
    """:class:`ImplTxnWire` also answering the hand-chosen rules of :mod:`~txnspec.audit.wire`
    (its ``Transport`` and ``InitTransport``), so the whole wire level can be run on the implementation."""

    def fresh_partition(self, rule: str) -> str:
        return f"impl-{rule.replace('.', '-').replace('_', '-')}"

    def init_producer_id(self, *args: Any) -> Any:
        if args:  # TxnWire's InitProducerId with a transactional id
            return super().init_producer_id(*args)
        from txnspec.impl.messages import InitProducerId as Init

        r = self._handle(Init(None, 60_000))
        if r.error.name != "NONE":
            raise WireError(f"InitProducerId answered {r.error.name}")
        return r.producer_id, r.producer_epoch

    def produce(self, topic: str, producer_id: int, epoch: int, base_sequence: int, count: int,
                tid: str | None = None) -> Any:
        answer = super().produce(topic, producer_id, epoch, base_sequence, count, tid)
        if tid is not None:
            return answer
        from txnspec.audit.wire import Answer

        return Answer(answer["error"], answer.get("base_offset", -1))

    def init_transactional(self, rule: str, transactional_id: str | None, producer_id: int, epoch: int,
                           timeout_ms: int) -> Any:
        from txnspec.audit.wire import InitAnswer
        from txnspec.impl.messages import InitProducerId as Init

        r = self._handle(Init(transactional_id, timeout_ms, producer_id, epoch))
        return InitAnswer(r.error.name, r.producer_id, r.producer_epoch)


def run_impl_wire_audit(seed: int, walks_per_scenario: int = 2) -> list[RuleResult]:
    """The whole wire level on the reference implementation (``txnspec audit --broker impl``): the hand-chosen
    produce and InitProducerId rules, then the client traces of transaction versions 1 and 2, each trace on a
    fresh in-process broker of its version."""
    from txnspec.audit.wire import run_init_rules, run_rules

    results = run_rules(ImplTransport(2)) + run_init_rules(ImplTransport(2), "impl")
    rows = {rule: RuleResult("wire", rule, text) for rule, text in RULE_DESCRIPTIONS.items()}
    described = []
    for variant, version in (("tv1", 0), ("current", 2)):
        selected = plans(seed, walks_per_scenario, variant, True) if walks_per_scenario else ()
        for i, plan in enumerate(selected):
            run_trace(ImplTxnWire(version), plan, f"impl-{variant}-{i}", rows)
        described.append(describe_plans(selected, variant))
    total = 2 * len(SCENARIOS) * walks_per_scenario
    results.append(RuleResult("wire", "txn.traces", "; ".join(described), checked=total))
    return results + list(rows.values())
