"""Wire-level audit of the transactional protocol: traces of the conformance generator replayed over Kafka's
binary protocol, every answer compared with the spec's.

What a client can send
    A spec trace mixes steps a client makes happen (an application call, a request or a response between a
    producer and a broker, a re-send), steps the broker takes by itself (the coordinator's
    ``WriteTxnMarkers`` and their answers) and faults no client can cause (a failed log append, a
    coordinator failover, a timeout, a lost message, a crash). :func:`client_walk` asks the conformance
    generator (:func:`txnspec.conformance.generate.walk`) for seeded random walks restricted to the first two
    kinds, taking the broker's own steps as soon as they are enabled: the broker is quiescent whenever a
    request reaches it, which is the only interleaving a client can rely on from a real broker (its markers
    are asynchronous). :func:`why_not_client_sendable` says why any other trace (a covering trace, a trace
    from a file) cannot be replayed this way.

Replay
    :func:`wire_plan` runs a trace through the spec and keeps, in order, each request a producer delivers
    (``InitProducerId``, ``AddPartitionsToTxn``, ``AddOffsetsToTxn``, ``TxnOffsetCommit``, ``EndTxn``,
    ``Produce``) with the spec's answer, and the **checkpoints** after it: what ``Fetch`` at read_committed
    and read_uncommitted (records the application sees after the consumer's filtering, aborted-transactions
    list, last stable offset, high watermark) and ``OffsetFetch`` (with ``require_stable``, KIP-447) must
    return once the broker has done its own steps. :func:`run_trace` sends the same requests through a
    :class:`TxnWire` (a broker over a socket, or recorded answers in tests) under fresh names (transactional
    ids, topics, group per trace), maps producer ids between spec and broker as they are handed out, and
    compares. A coordinator's or leader's retriable answer (``CONCURRENT_TRANSACTIONS``, loading, not yet
    the leader) that the spec did not give is retried a bounded number of times, as Kafka's client does; a
    read that differs is polled a bounded number of times (markers land asynchronously). The first answer
    that differs ends the trace: what came after it depended on it.

Rules (one report row each, named by request): ``txn.InitProducerId``, ``txn.AddPartitionsToTxn``,
``txn.AddOffsetsToTxn``, ``txn.TxnOffsetCommit``, ``txn.EndTxn``, ``txn.Produce``, ``fetch.read_committed``,
``fetch.read_uncommitted``, ``offset_fetch``. A violation's example is the trace's requests up to the first
difference: its minimal reproducing sequence.

Assumptions: each partition of the scenario is partition 0 of its own fresh topic; the transaction version is
the broker's (``tv1`` unless it finalises ``transaction.version`` >= 2 and speaks ``EndTxn`` v5).
Left out: FindCoordinator answers are used for routing, not checked; the requests of TV2 verification
(``verify_only``) are broker-to-broker.
"""

from __future__ import annotations

import contextlib
import functools
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from txnspec.conformance.audit.report import RuleResult
from txnspec.conformance.audit.wire import BrokerConnection, WireError, error_name
from txnspec.conformance.generate import Successors, walk
from txnspec.conformance.traces import Trace
from txnspec.spec import group as spec_group
from txnspec.spec import partition as spec_partition
from txnspec.spec import system as sysm
from txnspec.spec.actions import APPLICATION_CALLS, Action, ActionKind
from txnspec.spec.messages import (
    AddOffsetsToTxn,
    AddPartitionsToTxn,
    EndTxn,
    EndTxnResponse,
    ErrorResponse,
    InitProducerId,
    InitProducerIdResponse,
    IsolationLevel,
    Produce,
    ProduceResponse,
    TransactionResult,
    TxnOffsetCommit,
)
from txnspec.spec.network import describe, is_request, producer_index

# scenarios whose client-sendable walks the audit replays (each with ``walks_per_scenario`` seeds)
SCENARIOS = ("offsets", "multi-partition", "retry", "delayed-end-txn", "zombie", "default")
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
POLLS = 12          # reads of a checkpoint that differs (0.25 s apart: 3 s)
PAUSE_SECONDS = 0.25

# --- which steps a client can make happen ------------------------------------------------------------

CLIENT_KINDS = APPLICATION_CALLS | {ActionKind.RETRY}
BROKER_KINDS = frozenset({ActionKind.DELIVER_WRITE_TXN_MARKERS, ActionKind.DELIVER_WRITE_TXN_MARKERS_RESPONSE,
                          ActionKind.RESEND_MARKER})


def _touches_producer(action: Action) -> bool:
    return producer_index(action.source) is not None or producer_index(action.target) is not None


def step_role(action: Action) -> str | None:
    """"client" for what a client does or receives, "broker" for the broker's own steps, None for a fault."""
    if action.kind in BROKER_KINDS:
        return "broker"
    if action.kind in CLIENT_KINDS:
        return "client"
    if action.is_delivery and _touches_producer(action):
        return "client"
    if action.kind is ActionKind.DUPLICATE and producer_index(action.source) is not None:
        return "client"  # a client sends a request again while the first copy is on its way
    return None


def client_walk(scenario: str, variant: str, seed: int) -> Trace:
    """A seeded random walk of ``scenario`` restricted to client steps, the broker's own steps taken first."""
    rng = random.Random(seed)

    def choose(i: int, state: sysm.SystemState, steps: Successors) -> int | None:
        roles = [step_role(action) for action, _ in steps]
        if "broker" in roles:
            return roles.index("broker")
        client = [k for k, role in enumerate(roles) if role == "client"]
        return rng.choice(client) if client else None

    return walk(scenario, variant, choose, trace_id=f"{scenario}/client/{seed}", seed=seed, strategy="random",
                max_steps=1_000)


def why_not_client_sendable(trace: Trace) -> str | None:
    """None when the trace can be replayed on a broker by a client; else the first step that cannot."""
    from txnspec.conformance.adapters import spec_adapter as sa
    from txnspec.spec.model import build_system

    system = build_system(trace.scenario, trace.variant)
    state = sysm.initial_state(system)
    for i, step in enumerate(trace.steps):
        steps = sa.successors(system, state)
        action, nxt = sa.pick(steps, step.action)
        role = step_role(action)
        if role is None:
            return f"step {i} ({action}) is a fault no client can cause"
        if _is_request_delivery(action) and any(step_role(a) == "broker" for a, _ in steps):
            return f"step {i} ({action}) reaches the broker before it has finished its own steps"
        state = nxt
    return None


def _is_request_delivery(action: Action) -> bool:
    return action.is_delivery and producer_index(action.source) is not None and is_request(action.body)


# --- the plan: requests, the spec's answers, checkpoints -------------------------------------------------

@dataclass(frozen=True)
class Checkpoint:
    """What reads must return once the broker is quiescent: per partition and isolation, the fetch; per
    offsets partition, the OffsetFetch answer."""

    fetches: tuple[tuple[str, str, dict[str, Any]], ...]  # (partition, isolation, expected)
    offsets: tuple[tuple[str, dict[str, Any]], ...]  # (offsets partition, expected)


@dataclass(frozen=True)
class Exchange:
    step: int  # index of the delivery in the trace
    request: Any  # the spec's request body
    response: Any  # the spec's answer (None: the spec answers nothing)
    after: Checkpoint  # the reads that changed once the broker finished what this request started


@dataclass(frozen=True)
class WirePlan:
    trace: Trace
    exchanges: tuple[Exchange, ...]
    partitions: tuple[str, ...]
    group_id: str
    transaction_version: int


def _fetch_view(pstate: Any, isolation: IsolationLevel) -> dict[str, Any]:
    r = spec_partition.fetch(pstate, 0, isolation)
    return {"high_watermark": r.high_watermark, "last_stable_offset": r.last_stable_offset,
            "records": list(r.records),
            "aborted_transactions": sorted([a.producer_id, a.first_offset] for a in r.aborted_transactions)}


def _offset_view(group: Any, group_id: str, partition: str, require_stable: bool) -> dict[str, Any]:
    error, offset = spec_group.fetch_offsets(group, group_id, partition, require_stable)
    return {"error": error.name, "committed_offset": -1 if offset is None else offset}


OFFSET_PARTITIONS = ("input-0",)  # what the spec's producers send to their transaction (system.dispatch)


def _reads(system: sysm.System, state: sysm.SystemState, require_stable: bool) -> dict[tuple[str, str], Any]:
    reads: dict[tuple[str, str], Any] = {}
    for name, pstate in state.partitions:
        if name not in system.scenario.partitions:
            continue  # the group's __consumer_offsets partition: read through OffsetFetch
        for isolation in IsolationLevel:
            reads[(name, isolation.value)] = _fetch_view(pstate, isolation)
    if system.scenario.commit_offsets:
        for partition in OFFSET_PARTITIONS:
            reads[(partition, "offsets")] = _offset_view(state.group, system.scenario.group_id, partition,
                                                         require_stable)
    return reads


def wire_plan(trace: Trace, require_stable: bool = True) -> WirePlan:
    """The requests of a client-sendable trace with the spec's answers and the reads after each."""
    from txnspec.conformance.adapters import spec_adapter as sa
    from txnspec.spec.model import build_system

    reason = why_not_client_sendable(trace)
    if reason is not None:
        raise ValueError(f"trace {trace.id!r} cannot be sent by a client: {reason}")
    system = build_system(trace.scenario, trace.variant)
    state = sysm.initial_state(system)
    pending: list[tuple[int, Any, Any]] = []
    exchanges: list[Exchange] = []
    seen = _reads(system, state, require_stable)

    def close_pending() -> None:
        nonlocal seen
        if not pending:
            return
        now = _reads(system, state, require_stable)
        changed = {k: v for k, v in now.items() if seen.get(k) != v}
        seen = now
        step, request, response = pending.pop()
        fetches = tuple((p, iso, v) for (p, iso), v in sorted(changed.items()) if iso != "offsets")
        offsets = tuple((p, v) for (p, iso), v in sorted(changed.items()) if iso == "offsets")
        exchanges.append(Exchange(step, request, response, Checkpoint(fetches, offsets)))

    for i, step in enumerate(trace.steps):
        action, nxt = sa.pick(sa.successors(system, state), step.action)
        if _is_request_delivery(action):
            close_pending()  # the broker was quiescent: the previous request's effects are complete
            envelope = action.message
            assert envelope is not None
            added = Counter(nxt.network) - Counter(state.network)
            answers = [e.body for e in added.elements()
                       if e.target == envelope.source and e.context == envelope.context]
            pending.append((i, envelope.body, answers[0] if answers else None))
        state = nxt
    close_pending()
    return WirePlan(trace, tuple(exchanges), system.scenario.partitions, system.scenario.group_id,
                    system.scenario.transaction_version)


# --- the broker side ------------------------------------------------------------------------------------

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
        return f"{self.prefix}-{partition.rsplit('-', 1)[0] if partition in OFFSET_PARTITIONS else partition}"

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


def _expected(response: Any) -> dict[str, Any]:
    if isinstance(response, InitProducerIdResponse):
        if response.error.name != "NONE":
            return {"error": response.error.name}
        return {"error": "NONE", "producer_id": response.producer_id, "epoch": response.producer_epoch}
    if isinstance(response, EndTxnResponse):
        if response.error.name == "NONE" and response.producer_id >= 0:
            return {"error": "NONE", "producer_id": response.producer_id, "epoch": response.producer_epoch}
        return {"error": response.error.name}
    if isinstance(response, ProduceResponse):
        out: dict[str, Any] = {"error": response.error.name}
        if response.error.name == "NONE":
            out["base_offset"] = response.base_offset
        return out
    assert isinstance(response, ErrorResponse), response
    return {"error": response.error.name}


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
        want = _expected(exchange.response) if exchange.response is not None else None
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
                    and got == _expected(retry.response):
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


CANDIDATES = 32  # client walks tried per scenario, of which the most covering are replayed


def coverage_items(plan: WirePlan) -> set[str]:
    """What a plan exercises: each request with each answer the spec gives it, and the kinds of reads."""
    items: set[str] = set()
    for i, x in enumerate(plan.exchanges):
        name = f"EndTxn({x.request.result})" if isinstance(x.request, EndTxn) else type(x.request).__name__
        again = ":again" if any(y.request == x.request for y in plan.exchanges[:i]) else ""
        items.add(f"{name}{again}:{_expected(x.response)['error'] if x.response else '-'}")
    for x in plan.exchanges:
        for _, isolation, view in x.after.fetches:
            if view["last_stable_offset"] < view["high_watermark"]:
                items.add(f"fetch:{isolation}:open transaction")
            if view["aborted_transactions"]:
                items.add(f"fetch:{isolation}:aborted")
        items.update(f"offset_fetch:{view['error']}" for _, view in x.after.offsets)
    return items


@functools.lru_cache(maxsize=16)
def plans(seed: int, walks_per_scenario: int, variant: str, require_stable: bool,
          scenarios: tuple[str, ...] = SCENARIOS) -> tuple[WirePlan, ...]:
    """The audit's traces: per scenario, ``walks_per_scenario`` client walks chosen among ``CANDIDATES`` seeded
    ones (seeds from ``seed``), greedily by what they add to the coverage of the ones already chosen."""
    chosen: list[WirePlan] = []
    covered: set[str] = set()
    for scenario in scenarios:
        candidates = [wire_plan(client_walk(scenario, variant, seed * 1000 + k), require_stable)
                      for k in range(CANDIDATES)]
        for _ in range(min(walks_per_scenario, len(candidates))):
            best = max(candidates, key=lambda p: (len(coverage_items(p) - covered), len(p.exchanges)))
            candidates.remove(best)
            chosen.append(best)
            covered |= coverage_items(best)
    return tuple(chosen)


def run_plans(wire: TxnWire, plans_: tuple[WirePlan, ...], run: str) -> list[RuleResult]:
    results = {rule: RuleResult("wire", rule, description) for rule, description in RULE_DESCRIPTIONS.items()}
    for i, plan in enumerate(plans_):
        try:
            run_trace(wire, plan, f"txnspec-{run}-{i}", results)
        except (OSError, WireError) as exc:
            row = results[_rule_of(plan.exchanges[0].request)] if plan.exchanges else results["txn.Produce"]
            row.note = (row.note + "; " if row.note else "") + f"trace {plan.trace.id} stopped: {exc}"
    return list(results.values())


# --- over a socket -----------------------------------------------------------------------------------------

@dataclass
class SocketTxnWire:
    """The requests of :class:`TxnWire` as kafka-python protocol structs, routed to the coordinator a
    ``FindCoordinator`` names and to the partition's leader."""

    bootstrap: str
    create_topics: Callable[[list[str]], dict[str, str]]  # topics -> "host:port" of each one's leader
    connections: dict[str, BrokerConnection] = field(default_factory=dict)
    leaders: dict[str, str] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)
    transaction_version: int = 1
    sleep: Callable[[float], None] = time.sleep

    def connect(self) -> None:
        from kafka.protocol.consumer.fetch import FetchRequest
        from kafka.protocol.consumer.group import OffsetFetchRequest
        from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
        from kafka.protocol.producer.produce import ProduceRequest
        from kafka.protocol.producer.transaction import (
            AddOffsetsToTxnRequest,
            AddPartitionsToTxnRequest,
            EndTxnRequest,
            InitProducerIdRequest,
            TxnOffsetCommitRequest,
        )

        conn = self._conn(self.bootstrap.split(",")[0])
        # TV2 only when the broker speaks EndTxn v5 and finalises transaction.version >= 2 (KIP-890)
        tv2 = conn.versions.get(EndTxnRequest.API_KEY, (0, 0))[1] >= 5 and conn.features.get("transaction.version",
                                                                                              0) >= 2
        self.transaction_version = 2 if tv2 else 1
        # a client speaks TV2 with Produce v12+, EndTxn v5 and TxnOffsetCommit v5; AddPartitionsToTxn v4+ is the
        # brokers' verification request, never a client's
        wanted = {"Produce": (ProduceRequest, 3, 12 if tv2 else 11), "Fetch": (FetchRequest, 4, 12),
                  "InitProducerId": (InitProducerIdRequest, 3, 5),
                  "AddPartitionsToTxn": (AddPartitionsToTxnRequest, 0, 3),
                  "AddOffsetsToTxn": (AddOffsetsToTxnRequest, 0, 4 if tv2 else 3),
                  "EndTxn": (EndTxnRequest, 0, 5 if tv2 else 4),
                  "TxnOffsetCommit": (TxnOffsetCommitRequest, 0, 5 if tv2 else 4),
                  "OffsetFetch": (OffsetFetchRequest, 1, 7), "FindCoordinator": (FindCoordinatorRequest, 1, 3)}
        self.versions = {name: conn.version(cls, low, high) for name, (cls, low, high) in wanted.items()}

    def close(self) -> None:
        for conn in self.connections.values():
            conn.close()

    def _conn(self, address: str) -> BrokerConnection:
        if address not in self.connections:
            host, _, port = address.rpartition(":")
            self.connections[address] = BrokerConnection(host, int(port))
        return self.connections[address]

    def _coordinator(self, key: str, key_type: int) -> BrokerConnection:
        from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

        bootstrap = self._conn(self.bootstrap.split(",")[0])
        for _ in range(RETRIES):
            r = bootstrap.call(FindCoordinatorRequest, FindCoordinatorResponse, self.versions["FindCoordinator"],
                               key=key, key_type=key_type)
            if int(r.error_code) == 0:
                return self._conn(f"{r.host}:{r.port}")
            self.pause()
        raise WireError(f"FindCoordinator({key}) answered {error_name(int(r.error_code))}")

    def pause(self) -> None:
        self.sleep(PAUSE_SECONDS)

    def prepare(self, topics: list[str]) -> None:
        self.leaders.update(self.create_topics(topics))

    def _call(self, conn: BrokerConnection, name: str, **fields: Any) -> Any:
        import kafka.protocol.consumer.fetch as fetch_mod
        import kafka.protocol.consumer.group as group_mod
        import kafka.protocol.producer.produce as produce_mod
        import kafka.protocol.producer.transaction as txn_mod

        module = {"Produce": produce_mod, "Fetch": fetch_mod, "OffsetFetch": group_mod}.get(name, txn_mod)
        return conn.call(getattr(module, f"{name}Request"), getattr(module, f"{name}Response"),
                         self.versions[name], **fields)

    def init_producer_id(self, tid: str, timeout_ms: int, producer_id: int, epoch: int) -> dict[str, Any]:
        r = self._call(self._coordinator(tid, 1), "InitProducerId", transactional_id=tid,
                       transaction_timeout_ms=timeout_ms, producer_id=producer_id, producer_epoch=epoch)
        return {"error": "NONE", "producer_id": int(r.producer_id), "epoch": int(r.producer_epoch)} \
            if int(r.error_code) == 0 else {"error": error_name(int(r.error_code))}

    def add_partitions(self, tid: str, producer_id: int, epoch: int, topics: list[str]) -> dict[str, Any]:
        from kafka.protocol.producer.transaction import AddPartitionsToTxnRequest as Req

        topic_list = [Req.AddPartitionsToTxnTopic(name=t, partitions=[0]) for t in topics]
        r = self._call(self._coordinator(tid, 1), "AddPartitionsToTxn", v3_and_below_transactional_id=tid,
                       v3_and_below_producer_id=producer_id, v3_and_below_producer_epoch=epoch,
                       v3_and_below_topics=topic_list)
        codes = [int(p.partition_error_code) for t in r.results_by_topic_v3_and_below for p in t.results_by_partition]
        return {"error": _first_error(codes)}

    def add_offsets(self, tid: str, producer_id: int, epoch: int, group: str) -> dict[str, Any]:
        r = self._call(self._coordinator(tid, 1), "AddOffsetsToTxn", transactional_id=tid, producer_id=producer_id,
                       producer_epoch=epoch, group_id=group)
        return {"error": error_name(int(r.error_code))}

    def txn_offset_commit(self, tid: str, group: str, producer_id: int, epoch: int,
                          offsets: list[tuple[str, int]]) -> dict[str, Any]:
        from kafka.protocol.producer.transaction import TxnOffsetCommitRequest as Req

        topics = [Req.TxnOffsetCommitRequestTopic(name=t, partitions=[Req.TxnOffsetCommitRequestTopic.
                  TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=o, committed_leader_epoch=-1,
                                                  committed_metadata="")]) for t, o in offsets]
        fields: dict[str, Any] = {"transactional_id": tid, "group_id": group, "producer_id": producer_id,
                                  "producer_epoch": epoch, "topics": topics}
        if self.versions["TxnOffsetCommit"] >= 3:
            fields.update(generation_id=-1, member_id="", group_instance_id=None)
        r = self._call(self._coordinator(group, 0), "TxnOffsetCommit", **fields)
        return {"error": _first_error([int(p.error_code) for t in r.topics for p in t.partitions])}

    def end_txn(self, tid: str, producer_id: int, epoch: int, commit: bool) -> dict[str, Any]:
        r = self._call(self._coordinator(tid, 1), "EndTxn", transactional_id=tid, producer_id=producer_id,
                       producer_epoch=epoch, committed=commit)
        out: dict[str, Any] = {"error": error_name(int(r.error_code))}
        if self.versions["EndTxn"] >= 5 and out["error"] == "NONE":
            out.update(producer_id=int(r.producer_id), epoch=int(r.producer_epoch))
        return out

    def produce(self, topic: str, producer_id: int, epoch: int, base_sequence: int, count: int,
                tid: str | None) -> dict[str, Any]:
        from kafka.protocol.producer.produce import ProduceRequest
        from kafka.record.default_records import DefaultRecordBatchBuilder

        builder = DefaultRecordBatchBuilder(2, 0, tid is not None, producer_id, epoch, base_sequence, 1 << 20)
        for i in range(count):
            builder.append(i, 0, None, f"{topic}:{producer_id}:{epoch}:{base_sequence + i}".encode(), [])
        data = ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=bytes(builder.build()))])
        r = self._call(self._leader(topic), "Produce", transactional_id=tid, acks=-1, timeout_ms=10000,
                       topic_data=[data])
        partition = r.responses[0].partition_responses[0]
        error = error_name(int(partition.error_code))
        return {"error": error, **({"base_offset": int(partition.base_offset)} if error == "NONE" else {})}

    def _leader(self, topic: str) -> BrokerConnection:
        return self._conn(self.leaders.get(topic, self.bootstrap.split(",")[0]))

    def fetch(self, topic: str, committed: bool) -> dict[str, Any]:
        from kafka.protocol.consumer.fetch import FetchRequest as Req

        partition = Req.FetchTopic.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                                  log_start_offset=-1, partition_max_bytes=1 << 20)
        # min_bytes 0 answers at once; a short max_wait because Tansu answers nothing at all with 0
        r = self._call(self._leader(topic), "Fetch", replica_id=-1, max_wait_ms=100, min_bytes=0, max_bytes=1 << 22,
                       isolation_level=1 if committed else 0, session_id=0, session_epoch=-1,
                       topics=[Req.FetchTopic(topic=topic, partitions=[partition])], forgotten_topics_data=[],
                       rack_id="")
        if not r.responses or not r.responses[0].partitions:
            return {"error": f"the response has no partition {topic}-0 (top-level {error_name(int(r.error_code))})"}
        p = r.responses[0].partitions[0]
        error = error_name(int(p.error_code))
        if error != "NONE":
            return {"error": error}
        aborted = [(int(a.producer_id), int(a.first_offset)) for a in (p.aborted_transactions or [])]
        hw, lso = int(p.high_watermark), int(p.last_stable_offset)
        return {"high_watermark": hw, "last_stable_offset": lso, "aborted_transactions": aborted if committed else [],
                "records": consumer_view(bytes(p.records or b""), aborted if committed else [],
                                         lso if committed else hw)}

    def offset_fetch(self, group: str, topic: str) -> dict[str, Any]:
        from kafka.protocol.consumer.group import OffsetFetchRequest as Req

        fields: dict[str, Any] = {"group_id": group, "topics": [Req.OffsetFetchRequestTopic(name=topic,
                                                                                         partition_indexes=[0])]}
        if self.versions["OffsetFetch"] >= 7:
            fields["require_stable"] = True
        r = self._call(self._coordinator(group, 0), "OffsetFetch", **fields)
        codes = [int(p.error_code) for t in r.topics for p in t.partitions]
        error = _first_error([int(getattr(r, "error_code", 0) or 0), *codes])
        offsets = [int(p.committed_offset) for t in r.topics for p in t.partitions]
        return {"error": error, "committed_offset": offsets[0] if offsets and error == "NONE" else -1}


def _first_error(codes: list[int]) -> str:
    """The error of a request answered per partition: the first that is not NONE or OPERATION_NOT_ATTEMPTED."""
    return _first_error_name([error_name(c) for c in codes])


def _first_error_name(names: list[str]) -> str:
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


def consumer_view(records: bytes, aborted: list[tuple[int, int]], upper: int) -> list[int]:
    """:func:`consumer_records` of a fetch response's record bytes (kafka-python's ``MemoryRecords``)."""
    from kafka.record.memory_records import MemoryRecords

    batches: list[FetchedBatch] = []
    memory = MemoryRecords(records)
    while memory.has_next():
        batch = memory.next_batch()
        if batch is None:
            break
        control = None
        if batch.is_control_batch:
            control = "ABORT" if any(getattr(r, "abort", False) for r in batch) else "COMMIT"
        batches.append(FetchedBatch(int(batch.base_offset), tuple(int(r.offset) for r in batch),
                                    int(batch.producer_id), bool(batch.is_transactional), control))
    return consumer_records(batches, aborted, upper)


class ImplTxnWire:
    """The reference implementation (:mod:`txnspec.impl`) behind :class:`TxnWire`: one in-process broker whose
    markers are written right after each request (its asynchronous work, done at once); a topic is its
    partition ``<topic>-0``. Replaying the audit's traces on it checks the implementation against the spec
    request by request."""

    def __init__(self, transaction_version: int = 0) -> None:
        from txnspec.impl.broker import Broker, BrokerConfig

        self.transaction_version = transaction_version
        self.broker = Broker(BrokerConfig(transaction_version=transaction_version))
        self.now_ms = 0

    def prepare(self, topics: list[str]) -> None:
        for topic in topics:
            self.broker.partition(f"{topic}-0")

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

        r = self._handle(Add(tid, producer_id, epoch, tuple(f"{t}-0" for t in topics)))
        return {"error": _first_error_name([r.error.name, *(e.name for _, e in r.partition_errors)])}

    def add_offsets(self, tid: str, producer_id: int, epoch: int, group: str) -> dict[str, Any]:
        from txnspec.impl.messages import AddOffsetsToTxn as Add

        return {"error": self._handle(Add(tid, producer_id, epoch, group)).error.name}

    def txn_offset_commit(self, tid: str, group: str, producer_id: int, epoch: int,
                          offsets: list[tuple[str, int]]) -> dict[str, Any]:
        from txnspec.impl.messages import TxnOffsetCommit as Commit

        r = self._handle(Commit(tid, group, producer_id, epoch, tuple((f"{t}-0", o) for t, o in offsets)))
        return {"error": _first_error_name([r.error.name, *(e.name for _, e in r.partition_errors)])}

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
        r = self._handle(Send(f"{topic}-0", producer_id, epoch, base_sequence, records, tid is not None, tid,
                              self.transaction_version))
        return {"error": r.error.name, **({"base_offset": r.base_offset} if r.error.name == "NONE" else {})}

    def fetch(self, topic: str, committed: bool) -> dict[str, Any]:
        from txnspec.impl.messages import Fetch as Read
        from txnspec.impl.partition import IsolationLevel as Level

        r = self._handle(Read(f"{topic}-0", 0, Level.READ_COMMITTED if committed else Level.READ_UNCOMMITTED))
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

        r = self._handle(Read(group, (f"{topic}-0",), True))
        offsets = dict(r.offsets)
        if r.error.name != "NONE":
            return {"error": r.error.name, "committed_offset": -1}
        return {"error": "NONE", "committed_offset": offsets.get(f"{topic}-0", -1)}


class ImplTransport(ImplTxnWire):
    """:class:`ImplTxnWire` also answering the hand-chosen rules of :mod:`~txnspec.conformance.audit.wire`
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
        from txnspec.conformance.audit.wire import Answer

        return Answer(answer["error"], answer.get("base_offset", -1))

    def init_transactional(self, rule: str, transactional_id: str | None, producer_id: int, epoch: int,
                           timeout_ms: int) -> Any:
        from txnspec.conformance.audit.wire import InitAnswer
        from txnspec.impl.messages import InitProducerId as Init

        r = self._handle(Init(transactional_id, timeout_ms, producer_id, epoch))
        return InitAnswer(r.error.name, r.producer_id, r.producer_epoch)


@contextlib.contextmanager
def socket_txn_wire(bootstrap: str) -> Iterator[SocketTxnWire]:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0, "broker.address.family": "v4",
                         "allow.auto.create.topics": True})

    def create(topics: list[str]) -> dict[str, str]:
        if not topics:
            return {}
        missing = [t for t in topics if _metadata(admin, t) is None]
        if missing:
            for future in admin.create_topics([NewTopic(t, 1, 1) for t in missing]).values():
                with contextlib.suppress(Exception):
                    future.result(5)
        leaders = {}
        for t in topics:
            leader = _metadata(admin, t)
            if leader is None:
                raise WireError(f"cannot create topic {t}")
            leaders[t] = leader
        return leaders

    wire = SocketTxnWire(bootstrap, create)
    try:
        wire.connect()
        yield wire
    finally:
        wire.close()


def _metadata(admin: Any, topic: str) -> str | None:
    """The leader of the topic's partition 0 as host:port, asking in a way that auto-creates (the mock)."""
    found = admin.list_topics(topic=topic, timeout=5)
    meta = found.topics.get(topic)
    if meta is None or meta.error is not None or 0 not in meta.partitions:
        return None
    broker = found.brokers.get(meta.partitions[0].leader)
    return f"{broker.host}:{broker.port}" if broker is not None else None


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


def describe_plans(selected: tuple[WirePlan, ...], variant: str) -> str:
    return (f"{len(selected)} client traces of the conformance generator ({', '.join(SCENARIOS)}; "
            f"variant {variant}), {sum(len(p.exchanges) for p in selected)} requests")


def run_txn_wire_audit(bootstrap: str, run: str, seed: int, walks_per_scenario: int = 2,
                       record: list[list[Any]] | None = None) -> list[RuleResult]:
    """The transactional wire audit of a broker; ``record`` collects its answers (for fixtures)."""
    with socket_txn_wire(bootstrap) as socket_wire:
        variant = "current" if socket_wire.transaction_version >= 2 else "tv1"
        selected = plans(seed, walks_per_scenario, variant, socket_wire.versions["OffsetFetch"] >= 7)
        wire: Any = socket_wire if record is None else RecordingWire(socket_wire)
        results = run_plans(wire, selected, run)
        if record is not None:
            record.extend(wire.calls)
        versions = ", ".join(f"{k} v{v}" for k, v in socket_wire.versions.items())
        results.insert(0, RuleResult("wire", "txn.traces", describe_plans(selected, variant) + f"; {versions}",
                                     checked=len(selected)))
        return results


def record_fixture(path: str = "tests/conformance/fixtures/audit/wire_trace_answers.json",
                   brokers: tuple[str, ...] = ("librdkafka-mock", "noida", "tansu"), seed: int = 0,
                   traces: int = 2) -> None:
    """Start each self-started broker, replay the audit's traces against it and keep its answers (the test
    fixture of ``tests/conformance/test_audit_wire_traces.py``)."""
    import json
    import tempfile
    from pathlib import Path

    from txnspec.conformance.audit.targets import open_target

    out: dict[str, Any] = {}
    for broker in brokers:
        with tempfile.TemporaryDirectory() as workdir, open_target(broker, Path(workdir)) as target:
            calls: list[list[Any]] = []
            run_txn_wire_audit(target.bootstrap, f"fixture-{int(time.time())}", seed, traces, record=calls)
            with socket_txn_wire(target.bootstrap) as wire:
                variant = "current" if wire.transaction_version >= 2 else "tv1"
                require_stable = wire.versions["OffsetFetch"] >= 7
            out[broker] = {"variant": variant, "require_stable": require_stable, "seed": seed, "traces": traces,
                           "calls": calls}
    Path(path).write_text(json.dumps(out, sort_keys=True, separators=(",", ":")) + "\n")


def run_impl_wire_audit(seed: int, walks_per_scenario: int = 2) -> list[RuleResult]:
    """The whole wire level on the reference implementation (``txnspec audit --broker impl``): the hand-chosen
    produce and InitProducerId rules, then the client traces of transaction versions 1 and 2, each trace on a
    fresh in-process broker of its version."""
    from txnspec.conformance.audit.wire import run_init_rules, run_rules

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
