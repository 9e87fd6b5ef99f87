"""The replay of a wire-level plan (:mod:`.trace_plan`) against a broker behind :class:`TxnWire`.

:func:`run_trace` sends a plan's requests through a :class:`TxnWire` (a broker over a socket,
:mod:`.socket_wire`; the implementation in process, :mod:`.impl_wire`; or recorded answers,
:class:`RecordedWire`) under fresh names (transactional ids, topics, group per trace), maps producer ids
between spec and broker as they are handed out, and compares. A coordinator's or leader's retriable answer
(``CONCURRENT_TRANSACTIONS``, loading, not yet the leader) that the spec did not give is retried a bounded
number of times, as Kafka's client does; a read that differs is polled a bounded number of times (markers
land asynchronously). The first answer that differs ends the trace: what came after it depended on it.

Rules (one report row each, named by request): ``txn.InitProducerId``, ``txn.AddPartitionsToTxn``,
``txn.AddOffsetsToTxn``, ``txn.TxnOffsetCommit``, ``txn.EndTxn``, ``txn.Produce``, ``fetch.read_committed``,
``fetch.read_uncommitted``, ``offset_fetch``. A violation's example is the trace's requests up to the first
difference: its minimal reproducing sequence.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from txnspec.audit.connection import WireError
from txnspec.audit.report import RuleResult
from txnspec.audit.trace_plan import OFFSET_PARTITIONS, Exchange, WirePlan, expected_answer
from txnspec.spec.messages import (
    AddOffsetsToTxn,
    AddPartitionsToTxn,
    EndTxn,
    EndTxnResponse,
    InitProducerId,
    InitProducerIdResponse,
    IsolationLevel,
    Produce,
    TransactionResult,
    TxnOffsetCommit,
)
from txnspec.spec.network import describe

RULE_DESCRIPTIONS = {
    "txn.InitProducerId": "InitProducerId answers the spec coordinator's error, producer id and epoch",
    "txn.AddPartitionsToTxn": "AddPartitionsToTxn answers the spec coordinator's error",
    "txn.AddOffsetsToTxn": "AddOffsetsToTxn answers the spec coordinator's error",
    "txn.TxnOffsetCommit": "TxnOffsetCommit answers the spec group coordinator's error",
    "txn.EndTxn": "EndTxn (commit, abort, retried) answers the spec coordinator's error",
    "txn.Produce": "a transactional Produce answers the spec leader's error and base offset",
    "txn.retriable_answers": "where Kafka answers a retriable error (CONCURRENT_TRANSACTIONS while it aborts "
                             "an ongoing transaction or completes one), so does the broker",
    "fetch.read_committed": "Fetch at read_committed: the records the application sees, the aborted "
                            "transactions, the last stable offset and the high watermark are the spec's",
    "fetch.read_uncommitted": "Fetch at read_uncommitted: the records, last stable offset and high watermark "
                              "are the spec's",
    "offset_fetch": "OffsetFetch (require_stable where the broker has it) answers the spec group's committed "
                    "offset, or UNSTABLE_OFFSET_COMMIT while a transaction holds one",
}


RETRIABLE = frozenset({"CONCURRENT_TRANSACTIONS", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE",
                       "NOT_COORDINATOR", "NOT_LEADER_OR_FOLLOWER", "UNKNOWN_TOPIC_OR_PARTITION",
                       "REQUEST_TIMED_OUT", "NOT_ENOUGH_REPLICAS", "LEADER_NOT_AVAILABLE"})


RETRIES = 40        # resends of a request answered retriably (0.25 s apart: 10 s)
FETCH_ROUNDS = 64   # fetches of one read, each from the offset after the last batch the previous one returned


POLLS = 12          # reads of a checkpoint that differs (0.25 s apart: 3 s)


PAUSE_SECONDS = 0.25
OFFSET_TOPICS = {tp: tp.topic for tp in OFFSET_PARTITIONS}  # the input partition's topic, read from its fields


class TxnWire(Protocol):
    """The requests the replay sends, in the broker's names (topics, transactional ids, producer ids).

    Every method answers a plain JSON-able dict with at least ``error`` (Kafka's error name)."""

    def prepare(self, topics: list[str]) -> None: ...
    def init_producer_id(self, tid: str, timeout_ms: int, producer_id: int, epoch: int) -> dict[str, Any]: ...
    def add_partitions(self, tid: str, producer_id: int, epoch: int, topics: list[str]) -> dict[str, Any]: ...
    def add_offsets(self, tid: str, producer_id: int, epoch: int, group: str) -> dict[str, Any]: ...
    def txn_offset_commit(self, tid: str, group: str, producer_id: int, epoch: int,
                          offsets: list[tuple[str, int]]) -> dict[str, Any]: ...
    def end_txn(self, tid: str, producer_id: int, epoch: int, commit: bool) -> dict[str, Any]: ...
    def produce(self, topic: str, producer_id: int, epoch: int, base_sequence: int, count: int,
                tid: str | None) -> dict[str, Any]: ...
    def fetch(self, topic: str, committed: bool) -> dict[str, Any]: ...
    def offset_fetch(self, group: str, topic: str) -> dict[str, Any]: ...
    def pause(self) -> None: ...


@dataclass
class Names:
    """Spec names and producer ids mapped to the broker's, per trace."""

    prefix: str
    spec_to_broker: dict[int, int] = field(default_factory=dict)
    broker_to_spec: dict[int, int] = field(default_factory=dict)

    def topic(self, partition: str) -> str:
        """The broker's topic of a spec partition (``p0``), or of the consumed input partition (``input-0``)."""
        return f"{self.prefix}-{OFFSET_TOPICS.get(partition, partition)}"

    def tid(self, tid: str) -> str:
        return f"{self.prefix}-{tid}"

    def to_broker(self, producer_id: int) -> int:
        if producer_id < 0:
            return producer_id
        return self.spec_to_broker.get(producer_id, producer_id + 7_000_000)  # never handed out: unknown too

    def to_spec(self, producer_id: int) -> int | str:
        if producer_id < 0:
            return producer_id
        return self.broker_to_spec.get(producer_id, f"broker:{producer_id}")

    def learn(self, spec_pid: int, broker_pid: int) -> None:
        if spec_pid >= 0 and broker_pid >= 0 and spec_pid not in self.spec_to_broker \
                and broker_pid not in self.broker_to_spec:
            self.spec_to_broker[spec_pid] = broker_pid
            self.broker_to_spec[broker_pid] = spec_pid


def _rule_of(request: Any) -> str:
    return f"txn.{type(request).__name__}"


def _describe(request: Any) -> str:
    return describe(request)


def _send(wire: TxnWire, names: Names, request: Any, tv2: bool) -> dict[str, Any]:
    """Send the spec request under the broker's names; the answer in the spec's terms."""
    if isinstance(request, InitProducerId):
        got = wire.init_producer_id(names.tid(request.transactional_id or ""), request.txn_timeout_ms,
                                    names.to_broker(request.producer_id), request.producer_epoch)
    elif isinstance(request, AddPartitionsToTxn):
        got = wire.add_partitions(names.tid(request.transactional_id), names.to_broker(request.producer_id),
                                  request.producer_epoch, [names.topic(p) for p in sorted(request.partitions)])
    elif isinstance(request, AddOffsetsToTxn):
        got = wire.add_offsets(names.tid(request.transactional_id), names.to_broker(request.producer_id),
                               request.producer_epoch, names.tid(request.group_id))
    elif isinstance(request, TxnOffsetCommit):
        got = wire.txn_offset_commit(names.tid(request.transactional_id), names.tid(request.group_id),
                                     names.to_broker(request.producer_id), request.producer_epoch,
                                     [(names.topic(p), o) for p, o in request.offsets])
    elif isinstance(request, EndTxn):
        got = wire.end_txn(names.tid(request.transactional_id), names.to_broker(request.producer_id),
                           request.producer_epoch, request.result is TransactionResult.COMMIT)
    elif isinstance(request, Produce):
        got = wire.produce(names.topic(request.partition), names.to_broker(request.producer_id),
                           request.producer_epoch, request.base_sequence, request.record_count,
                           names.tid(request.transactional_id) if request.transactional_id else None)
    else:
        raise TypeError(f"a client does not send {type(request).__name__}")
    if not tv2 and isinstance(request, EndTxn):
        got = {"error": got["error"]}
    return got


def _in_spec_terms(names: Names, response: Any, raw: dict[str, Any]) -> dict[str, Any]:
    """The broker's answer with its producer id said as the spec's; an answer handing out a producer id
    (InitProducerId, TV2 EndTxn) the spec also handed out maps the two first."""
    if "producer_id" not in raw:
        return raw
    if isinstance(response, InitProducerIdResponse | EndTxnResponse) and response.producer_id >= 0:
        names.learn(response.producer_id, int(raw["producer_id"]))
    return {**raw, "producer_id": names.to_spec(int(raw["producer_id"]))}


def _fetch_in_spec_terms(names: Names, got: dict[str, Any]) -> dict[str, Any]:
    if got.get("error", "NONE") != "NONE":
        return got
    return {"high_watermark": got["high_watermark"], "last_stable_offset": got["last_stable_offset"],
            "records": got["records"],
            "aborted_transactions": sorted([names.to_spec(pid), first] for pid, first in got["aborted_transactions"])}


def run_trace(wire: TxnWire, plan: WirePlan, prefix: str, results: dict[str, RuleResult]) -> None:
    """Replay one plan; add what was checked and violated to ``results`` (rule name -> row)."""
    names = Names(prefix)
    tv2 = plan.transaction_version >= 2
    topics = [names.topic(p) for p in plan.partitions]
    if any(isinstance(x.request, TxnOffsetCommit) for x in plan.exchanges):
        topics += [names.topic(p) for p in OFFSET_PARTITIONS]
    wire.prepare(topics)
    sent: list[dict[str, Any]] = []
    head = {"trace": plan.trace.id, "scenario": plan.trace.scenario, "variant": plan.trace.variant,
            "seed": plan.trace.seed}
    broken_reads: set[str] = set()

    def violated(rule: str, entry: dict[str, Any]) -> None:
        results[rule].violations += 1
        if len(results[rule].examples) < 3:
            results[rule].examples.append({**head, "sequence": [*sent, entry]})

    def read(rule: str, request: str, expected: dict[str, Any], polls: int, do: Callable[[], dict[str, Any]]
             ) -> None:
        if rule in broken_reads:
            return  # one difference per trace and read: the later ones follow from it
        actual: dict[str, Any] = {}
        for poll in range(polls):
            actual = do()
            if actual == expected:
                break
            if poll + 1 < polls:
                wire.pause()
        results[rule].checked += 1
        if actual != expected:
            broken_reads.add(rule)
            violated(rule, {"request": request, "expected": expected, "actual": actual})

    def fetch(partition: str, committed: bool) -> dict[str, Any]:
        return _fetch_in_spec_terms(names, wire.fetch(names.topic(partition), committed))

    def offset_fetch(partition: str) -> dict[str, Any]:
        return wire.offset_fetch(names.tid(plan.group_id), names.topic(partition))

    def check_reads(exchange: Exchange) -> None:
        # markers are written after EndTxn, and after an InitProducerId that aborts: poll until they land
        polls = POLLS if isinstance(exchange.request, EndTxn | InitProducerId) else 1
        for partition, isolation, expected in exchange.after.fetches:
            committed = isolation == IsolationLevel.READ_COMMITTED.value
            read(f"fetch.{isolation.lower()}", f"Fetch({partition}, {isolation}, offset=0)", expected, polls,
                 functools.partial(fetch, partition, committed))
        for partition, expected in exchange.after.offsets:
            read("offset_fetch", f"OffsetFetch({plan.group_id}, {partition})", expected, polls,
                 functools.partial(offset_fetch, partition))

    skip_next = False
    for i, exchange in enumerate(plan.exchanges):
        if skip_next:  # the broker already answered this retry (see below)
            skip_next = False
            check_reads(exchange)
            continue
        rule = _rule_of(exchange.request)
        want = expected_answer(exchange.response) if exchange.response is not None else None
        entry: dict[str, Any] = {"request": _describe(exchange.request)}
        for attempt in range(RETRIES + 1):
            got = _in_spec_terms(names, exchange.response, _send(wire, names, exchange.request, tv2))
            if want is None or got == want or got["error"] not in RETRIABLE or attempt == RETRIES:
                break
            wire.pause()
        entry.update({"expected": want, "actual": got, **({"retries": attempt} if attempt else {})})
        if want is None:
            sent.append(entry)
            continue
        if want["error"] in RETRIABLE:
            retry = plan.exchanges[i + 1] if i + 1 < len(plan.exchanges) else None
            if got == want:
                results["txn.retriable_answers"].checked += 1
            elif retry is not None and retry.request == exchange.request and retry.response is not None \
                    and got == expected_answer(retry.response):
                # the broker skipped the retriable answer and answered what Kafka answers the client's retry
                results["txn.retriable_answers"].checked += 1
                violated("txn.retriable_answers", entry)
                sent.append({**entry, "note": "the answer Kafka gives to the retry that follows"})
                check_reads(exchange)
                skip_next = True
                continue
        results[rule].checked += 1
        if got != want:
            violated(rule, entry)
            return  # what the trace does next depended on this answer
        sent.append(entry)
        check_reads(exchange)


def run_plans(wire: TxnWire, plans_: tuple[WirePlan, ...], run: str) -> list[RuleResult]:
    results = {rule: RuleResult("wire", rule, description) for rule, description in RULE_DESCRIPTIONS.items()}
    for i, plan in enumerate(plans_):
        try:
            run_trace(wire, plan, f"txnspec-{run}-{i}", results)
        except (OSError, WireError) as exc:
            row = results[_rule_of(plan.exchanges[0].request)] if plan.exchanges else results["txn.Produce"]
            row.note = (row.note + "; " if row.note else "") + f"trace {plan.trace.id} stopped: {exc}"
    return list(results.values())


class RecordingWire:
    """A :class:`TxnWire` that keeps every answer of ``inner`` in call order (how the test fixtures are made)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[list[Any]] = []

    def prepare(self, topics: list[str]) -> None:
        self.inner.prepare(topics)

    def pause(self) -> None:
        self.inner.pause()

    def __getattr__(self, name: str) -> Callable[..., dict[str, Any]]:
        method = getattr(self.inner, name)

        def call(*args: Any) -> dict[str, Any]:
            answer = method(*args)
            self.calls.append([name, answer])
            return answer  # type: ignore[no-any-return]

        return call


class RecordedWire:
    """Answers recorded by :class:`RecordingWire`, replayed in order; the replay is deterministic (polls and
    retries are counted, not timed), so it asks for them in the same order."""

    def __init__(self, calls: list[list[Any]]) -> None:
        self.calls = list(calls)

    def prepare(self, topics: list[str]) -> None:
        pass

    def pause(self) -> None:
        pass

    def __getattr__(self, name: str) -> Callable[..., dict[str, Any]]:
        def call(*args: Any) -> dict[str, Any]:
            if not self.calls:
                raise WireError(f"the recording has no answer left for {name}")
            recorded, answer = self.calls.pop(0)
            if recorded != name:
                raise WireError(f"the recording answers {recorded} where the replay sends {name}")
            return answer  # type: ignore[no-any-return]

        return call


def first_error_name(names: list[str]) -> str:
    for name in names:
        if name not in ("NONE", "OPERATION_NOT_ATTEMPTED"):
            return name
    return "OPERATION_NOT_ATTEMPTED" if "OPERATION_NOT_ATTEMPTED" in names else "NONE"


@dataclass(frozen=True)
class FetchedBatch:
    """What the consumer's filtering needs of a fetched batch."""

    base_offset: int
    offsets: tuple[int, ...]  # of its records
    producer_id: int
    transactional: bool
    control: str | None = None  # "COMMIT" or "ABORT" for a transaction marker


def consumer_records(batches: list[FetchedBatch], aborted: list[tuple[int, int]], upper: int) -> list[int]:
    """Offsets of the data records a consumer hands to the application (Kafka's ``CompletedFetch``): control
    records dropped, and at read_committed the batches of aborted transactions, per the aborted list."""
    pending = sorted(aborted, key=lambda a: a[1])
    aborted_pids: set[int] = set()
    out: list[int] = []
    for batch in batches:
        last = batch.offsets[-1] if batch.offsets else batch.base_offset
        while pending and pending[0][1] <= last:
            aborted_pids.add(pending.pop(0)[0])
        if batch.control is not None:
            if batch.control == "ABORT":
                aborted_pids.discard(batch.producer_id)
            continue
        if batch.transactional and batch.producer_id in aborted_pids:
            continue
        out.extend(o for o in batch.offsets if o < upper)
    return out
