"""The reference implementation (:mod:`txnspec.impl`) as a replay adapter, in lock step with the spec.

How steps map onto :class:`txnspec.impl.cluster.Cluster`
    * application actions call the (non-blocking) client :class:`~txnspec.impl.client.Producer` of the
      spec's ``producer-k`` and let it queue its requests on the cluster's network;
    * ``deliver`` actions deliver the one matching message of the network (same client, RPC, partition),
      wherever it is in the queue; ``deliver WriteTxnMarkers`` appends the marker at the leader and keeps
      its answer, which ``deliver WriteTxnMarkersResponse`` then gives to the coordinator, so the
      coordinator completes the transaction when the spec's does (not when the marker is written);
    * each producer runs with one record per batch and one Produce in flight per partition, as the spec's
      producer does (``batch.size`` and ``max.in.flight.requests.per.connection``, both Kafka-legal);
    * ``FindCoordinator``, which the spec abstracts away, is delivered as soon as it is queued;
    * faults: ``duplicate`` re-sends the request, ``timeout`` (and ``abandoned timeout``) advances the clock
      past the transaction timeout (without running the network), ``failover`` crashes and restarts the
      coordinators (markers already sent stay in flight), ``expire batch`` expires the in-flight batch
      (``Producer.expire_batch``); loss, append failure and producer crash are not mapped yet and report
      the step as not enabled (a divergence naming the fault);
    * a step whose action text is not what the spec writes for its kind (:func:`understood`) is not
      enabled either: the adapter acts on the kind, so an unread text must never pass.

What is compared (:meth:`ImplAdapter.project`)
    The records visible per *data* partition at both isolation levels and the committed group offsets.
    The spec's message texts and its ``__consumer_offsets`` partition are its own modelling and are
    not compared; the abstract state is not compared (``abstract_state`` returns ``{}``).
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

from txnspec.conformance.adapters.spec_adapter import StepNotEnabledError

RESPONSE_OF = {"InitProducerIdResponse": ("InitProducerId",), "EndTxnResponse": ("EndTxn",),
               "ProduceResponse": ("Produce",),
               "ErrorResponse": ("AddPartitionsToTxn", "AddOffsetsToTxn", "TxnOffsetCommit")}


def impl_partition(name: str) -> str:
    """The implementation's name of a spec partition: brokers name partitions ``topic-N`` (``p0`` -> ``p0-0``)."""
    topic, _, number = name.rpartition("-")
    return name if topic and number.isdigit() else f"{name}-0"


def _same_partition(impl_name: str, spec_name: str) -> bool:
    if spec_name.startswith("__consumer_offsets"):
        return impl_name.startswith("__consumer_offsets")
    return impl_name == impl_partition(spec_name)


_CLIENT_CALLS = ("initTransactions", "beginTransaction", "sendOffsetsToTransaction", "commitTransaction",
                 "abortTransaction")


def understood(step: Any) -> bool:
    """Whether ``step.action`` is the text the spec gives an action of ``step.kind`` (spec/system.py): the
    adapter acts on the kind, so a step whose text says something else would otherwise pass unread."""
    kind, action, source, target = step.kind, step.action, step.source, step.target
    if kind in _CLIENT_CALLS:
        return bool(action == f"{source}.{kind}()")
    if kind == "send":
        return re.fullmatch(rf"{re.escape(source)}\.send\(p\d+\)", action) is not None
    if kind.startswith("deliver "):
        return bool(action.startswith(f"deliver {source}->{target}: {kind.removeprefix('deliver ')}(")
                    and action.endswith(")"))
    if kind == "duplicate":
        return bool(action.startswith(f"duplicate {source}->{target}: ") and action.endswith(")"))
    if kind == "expire batch":
        return re.fullmatch(rf"{re.escape(source)} gives up on its produce to p\d+", action) is not None
    if kind == "timeout":
        return bool(action.startswith("coordinator aborts timed-out "))
    if kind == "abandoned timeout":
        return bool(action.startswith("coordinator aborts ") and action.endswith(", abandoned by its producer"))
    if kind == "failover":
        return bool(action == "coordinator fails over")
    return True  # other kinds are refused by apply as not mapped


class ImplAdapter:
    observes = ("visible", "offsets", "errors")

    def __init__(self) -> None:
        self.cluster: Any = None
        self.producers: dict[str, tuple[str, Any]] = {}
        self.partitions: tuple[str, ...] = ()
        self.group = "g"
        self.txn_no: dict[str, int] = {}
        self.results: list[Any] = []  # the clients' pending TransactionalRequestResults
        self.marker_answers: list[tuple[Any, Any]] = []  # (marker, error) appended, answer not yet delivered

    def reset(self, scenario: str, variant: str = "current") -> None:
        from txnspec.impl import _mutants
        from txnspec.impl.cluster import Cluster
        from txnspec.spec.model import build_system
        from txnspec.spec.system import initial_state, producer_address

        _mutants.activate(getattr(self, "mutant", None))  # a reused worker process may have had one on
        system = build_system(scenario, variant)
        s = system.scenario
        self.cluster = Cluster(transaction_version=s.transaction_version)
        self.partitions, self.group = s.partitions, s.group_id
        self.producers, self.txn_no, self.results, self.marker_answers = {}, {}, [], []
        for p in initial_state(system).producers:
            handle = self.cluster.producer(p.transactional_id)
            # the spec's producer sends each record in its own Produce, one Produce in flight per partition
            # (spec/system.py): batch.size of one record and max.in.flight.requests.per.connection=1, both legal
            handle.producer.batch_records = 1
            handle.producer.max_in_flight = 1
            self.producers[producer_address(p)] = (handle.name, handle.producer)
            self.txn_no[producer_address(p)] = 0

    # --- steps ---

    def _pump(self) -> None:
        """Queue what the clients send, and deliver FindCoordinator (not in the spec) at once."""
        cluster = self.cluster
        for _ in range(100):
            cluster._dispatch()
            pending = [m for m in cluster.network.messages if m.name == "FindCoordinator"]
            if not pending:
                return
            cluster.deliver(pending[0])

    def _ack(self) -> None:
        """The application learns the outcome of its completed calls (``result.await()`` in Kafka)."""
        from txnspec.impl.errors import KafkaException

        still = []
        for result in self.results:
            if result.completed:
                with contextlib.suppress(KafkaException):  # the client's state tells the application the rest
                    result.result()
            else:
                still.append(result)
        self.results = still

    def _match(self, step: Any) -> Any:
        if step.kind == "duplicate":  # "duplicate producer-0->coordinator: InitProducerId(...)"
            kind = step.action.split(": ", 1)[1].split("(", 1)[0]
        else:
            kind = step.kind.removeprefix("deliver ")
        marker_partition = step.action.split("WriteTxnMarkers(", 1)[-1].split(",", 1)[0]
        candidates = []
        for m in self.cluster.network.messages:
            if kind == "WriteTxnMarkers":
                if type(m.request).__name__ == "TxnMarker" and _same_partition(m.request.partition, marker_partition):
                    candidates.append(m)
                continue
            if step.target in self.producers:  # a response to a producer
                client = self.producers[step.target][0]
                if m.response is None or m.client != client or m.name not in RESPONSE_OF.get(kind, ()):
                    continue
                if kind == "ProduceResponse" and not _same_partition(m.request.partition, step.source):
                    continue
                candidates.append(m)
            if step.source in self.producers:  # a request from a producer
                client = self.producers[step.source][0]
                if m.response is not None or m.client != client or m.name != kind:
                    continue
                if kind == "Produce" and not _same_partition(m.request.partition, step.target):
                    continue
                candidates.append(m)
        # several copies in flight (a duplicated request): prefer the Produce with the epoch and sequence the
        # spec's text names, a response to the request the client still waits for, then the response the
        # spec's text describes
        if kind == "WriteTxnMarkers" and len(candidates) > 1:  # copies from two coordinator epochs (failover)
            named = [m for m in candidates if f"coordinatorEpoch={m.request.coordinator_epoch})" in step.action]
            candidates = named or candidates
        if kind == "Produce" and len(candidates) > 1:
            named = [m for m in candidates if f"epoch={m.request.producer_epoch}, seq={m.request.base_sequence})"
                     in step.action]
            candidates = named or candidates
        client_side = step.target if step.target in self.producers else step.source
        if client_side in self.producers and len(candidates) > 1:
            producer = self.producers[client_side][1]
            txn_request = producer.in_flight_txn[0] if producer.in_flight_txn is not None else None
            awaited = [m for m in candidates if m.request is txn_request
                       or getattr(m.request, "correlation_id", None) in producer.in_flight_produce]
            stale = [m for m in candidates if m not in awaited]
            # the trace says which copy the spec delivered; without that hint, the awaited one first
            candidates = stale + awaited if getattr(step, "awaited", None) is False else awaited + stale
        for m in candidates:
            response = m.response
            if response is not None and f"({response.error.name}" in step.action \
                    and (kind in ("ProduceResponse", "ErrorResponse")  # texts that show no epoch
                         or f"epoch={getattr(response, 'producer_epoch', -1)})" in step.action):
                return m
        return candidates[0] if candidates else None

    def _not_enabled(self, step: Any, why: str = "") -> StepNotEnabledError:
        pending = [repr(m) for m in self.cluster.network.messages]
        return StepNotEnabledError(step.action + (f" ({why})" if why else ""), pending)

    def apply(self, step: Any) -> dict[str, Any]:
        from txnspec.impl.errors import InvalidRequestError, KafkaException

        if self.cluster is None:
            raise RuntimeError("reset() the adapter before applying steps")
        if not understood(step):  # a step this adapter cannot interpret never passes
            raise self._not_enabled(step, f"not an action of kind {step.kind!r} from {step.source!r} this adapter "
                                          "can interpret")
        before = {m.id for m in self.cluster.network.messages}
        answers_before = len(self.marker_answers)
        kind = step.kind
        if kind in ("initTransactions", "beginTransaction", "send", "sendOffsetsToTransaction",
                    "commitTransaction", "abortTransaction"):
            who = step.source
            _, p = self.producers[who]
            self._ack()
            result = None
            try:
                if kind == "initTransactions":
                    result = p.init_transactions()
                elif kind == "beginTransaction":
                    p.begin_transaction()
                    self.txn_no[who] += 1
                elif kind == "send":
                    p.send(impl_partition(step.action.split("send(", 1)[1].rstrip(")")), b"v")
                elif kind == "sendOffsetsToTransaction":
                    result = p.send_offsets_to_transaction({"input-0": self.txn_no[who]}, self.group)
                elif kind == "commitTransaction":
                    result = p.commit_transaction()
                else:
                    result = p.abort_transaction()
            except KafkaException as exc:
                raise self._not_enabled(step, f"the client refused: {type(exc).__name__}: {exc}") from None
            if result is not None:
                self.results.append(result)
        elif kind == "deliver WriteTxnMarkersResponse":
            source = "__consumer_offsets" if step.source == "group" else step.source  # the group's offsets partition
            answered = next((a for a in self.marker_answers if _same_partition(a[0].partition, source)), None)
            if answered is None:
                raise self._not_enabled(step, "no marker answer from that partition")
            self.marker_answers.remove(answered)
            marker, error = answered
            self.cluster.broker.txn_coordinator.on_marker_response(marker, error, self.cluster.now_ms)
            self.cluster._dispatch()
        elif kind == "deliver WriteTxnMarkers":
            m = self._match(step)
            if m is None:
                raise self._not_enabled(step, "no such message in flight in the implementation")
            # the leader appends the marker now; its answer flies back as the spec's next step says
            self.cluster.network.messages.remove(m)
            self.marker_answers.append((m.request, self.cluster.broker.append_marker(m.request, self.cluster.now_ms)))
            self.cluster._dispatch()
        elif kind.startswith("deliver "):
            m = self._match(step)
            if m is None:
                raise self._not_enabled(step, "no such message in flight in the implementation")
            self.cluster.deliver(m)
        elif kind == "duplicate":
            m = self._match(step)
            if m is None:
                raise self._not_enabled(step, "no such message to duplicate")
            self.cluster.network.send(m.client, m.request, m.response)
        elif kind in ("timeout", "abandoned timeout"):  # the transaction timeout fires (abandoned: nobody ends it)
            self.cluster.now_ms += 60_001
            self.cluster.broker.tick(self.cluster.now_ms)
            self.cluster._queue_markers()
        elif kind == "expire batch":  # "producer-0 gives up on its produce to p0"
            who, partition = step.action.split(" gives up on its produce to ")
            _, producer = self.producers[who]
            try:
                producer.expire_batch(impl_partition(partition))
            except InvalidRequestError as exc:
                raise self._not_enabled(step, str(exc)) from None
        elif kind == "failover":
            # markers the old coordinator already sent stay on their way to the leaders (the spec keeps them;
            # the new coordinator ignores answers of an older coordinator epoch)
            sent = [m for m in self.cluster.network.messages if type(m.request).__name__ == "TxnMarker"]
            self.cluster.crash_coordinator()
            self.cluster.restart_coordinator()
            self.cluster.network.messages[:0] = sent
        else:
            raise self._not_enabled(step, f"the fault {kind!r} is not mapped onto the implementation yet")
        self._pump()
        self._ack()
        observed = self.observe()
        # the error codes of the answers this step produced (a duplicate only copies a message)
        answers = [] if kind == "duplicate" else \
            [m.response.error for m in self.cluster.network.messages if m.id not in before and m.response is not None]
        answers += [error for _, error in self.marker_answers[answers_before:]]
        observed["errors"] = sorted(e.name for e in answers if e.name != "NONE")
        return observed

    # --- observation ---

    def _visible(self, partition: str, isolation: str) -> list[int]:
        from txnspec.impl.consumer import Consumer
        from txnspec.impl.messages import Fetch
        from txnspec.impl.partition import IsolationLevel

        consumer = Consumer(IsolationLevel(isolation), None)
        consumer.assign([partition])
        offsets: list[int] = []
        for _ in range(1000):
            got = []
            for name, offset, level in consumer.fetch_requests():
                response = self.cluster.broker.handle(Fetch(name, offset, level, None), self.cluster.now_ms)
                fetched = response.extra.get("fetch")
                if fetched is not None:
                    got.extend(consumer.on_fetch(name, fetched))
            if not got:
                break
            offsets.extend(r.offset for r in got)
        return offsets

    def observe(self) -> dict[str, Any]:
        visible = {p: {"read_committed": self._visible(impl_partition(p), "READ_COMMITTED"),
                       "read_uncommitted": self._visible(impl_partition(p), "READ_UNCOMMITTED")}
                   for p in self.partitions}
        _, committed = self.cluster.broker.group_coordinator.fetch_offsets(self.group, ["input-0"])
        return {"visible": visible, "offsets": {f"{self.group}/{tp}": off for tp, off in committed.items()}}

    def project(self, expected: dict[str, Any]) -> dict[str, Any]:
        """The part of the spec's observation this adapter reports."""
        visible = expected.get("visible", {})
        return {"visible": {p: visible[p] for p in self.partitions if p in visible},
                "offsets": expected.get("offsets", {}), "errors": expected.get("errors", [])}

    def abstract_state(self) -> dict[str, Any]:
        return {}
