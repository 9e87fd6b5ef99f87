"""Client-level audit: drive a broker with confluent-kafka (librdkafka), record the history, check it.

The workload, every choice drawn from the seed and every call bounded by a timeout:

1. input: an idempotent producer writes the input records (``acks=all``, ``enable.idempotence``);
2. transactions: a transactional producer commits or aborts transactions of one to three writes over the
   output partitions (it flushes before ending, so an aborted transaction's records reach the broker
   and a reader could see them);
3. consume-transform-produce: a read_committed consumer of the input and a transactional producer write
   the transformed records and ``send_offsets_to_transaction`` in one transaction, committed or aborted
   (after an abort the consumer seeks back to the last committed position);
4. zombie: two instances of one ``transactional.id``; the first has a transaction open when the second
   initialises, then tries to commit it (it must fail: fenced);
5. restart: a new instance of the first producer's ``transactional.id`` initialises and commits;
6. reads: read_committed and read_uncommitted readers read every output partition to its end, and the
   group's committed offsets are fetched.

Each operation is recorded (:mod:`.history`) as ok, fail or info (indefinite: a timeout, or an error
librdkafka calls retriable or "abortable" after the end was requested). ``--ops`` bounds the number of
transactions of steps 2 and 3.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import random
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from txnspec.audit import history as hist
from txnspec.audit.report import RuleResult

TIMEOUT = 10.0


class ClientLog(logging.Handler):
    """librdkafka's own log lines, kept for the report instead of printed: the fenced zombie's
    ``FATAL ... fenced by a newer instance`` line is an expected step of the workload, not news on stderr."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


CLIENT_LOG = ClientLog()
_librdkafka = logging.getLogger("txnspec.audit.librdkafka")
_librdkafka.addHandler(CLIENT_LOG)
_librdkafka.propagate = False  # never to the root logger's stderr
QUIET: dict[str, Any] = {"log_level": 0, "broker.address.family": "v4", "logger": _librdkafka}


class Recorder:
    def __init__(self) -> None:
        self.ops: list[hist.Op] = []
        self.clock = time.monotonic

    @contextlib.contextmanager
    def op(self, process: str, f: str, value: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """Record one operation; the block fills ``value`` and raises on failure."""
        invoked = self.clock()
        outcome, error = "ok", None
        try:
            yield value
        except Indefinite as exc:
            outcome, error = "info", str(exc)
        except Exception as exc:  # the broker's or the client's error is the operation's outcome
            outcome, error = "fail", f"{type(exc).__name__}: {exc}"
        self.ops.append(hist.Op(len(self.ops), process, f, outcome, invoked, self.clock(), value, error))


class Indefinite(Exception):
    """The operation may or may not have taken effect."""


def _indefinite_or_raise(exc: Exception) -> None:
    from confluent_kafka import KafkaError, KafkaException

    if isinstance(exc, KafkaException):
        err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        if err is not None and (err.retriable() or err.code() == KafkaError._TIMED_OUT):
            raise Indefinite(str(exc)) from exc
    raise exc


def _producer(bootstrap: str, **config: Any) -> Any:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                     "message.timeout.ms": int(TIMEOUT * 1000), **QUIET, **config})


def _create_topics(bootstrap: str, topics: dict[str, int]) -> str | None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap, "allow.auto.create.topics": True, **QUIET})
    problems = []
    futures = admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()])
    concurrent.futures.wait(list(futures.values()), timeout=3)  # one 3 s bound for all, not 3 s each
    for name, future in futures.items():
        try:
            future.result(0)
        except Exception as exc:
            # the librdkafka mock never answers CreateTopics but creates topics on a Metadata request
            found = admin.list_topics(topic=name, timeout=5).topics.get(name)
            if found is None or found.error is not None or len(found.partitions) < topics[name]:
                problems.append(f"{name}: {exc!r}")
    return "; ".join(problems) or None


def _text(msg: Any) -> str:
    value = msg.value()
    return value.decode() if isinstance(value, bytes) else str(value)


def _write(rec: Recorder, producer: Any, process: str, topic: str, partition: int, value: str) -> None:
    with rec.op(process, "write", {"topic": topic, "partition": partition, "value": value}):
        errors: list[Any] = []
        producer.produce(topic, value.encode(), partition=partition,
                         on_delivery=lambda err, msg: errors.append(err) if err else None)
        if producer.flush(TIMEOUT) > 0:
            raise Indefinite("not delivered within the timeout")
        if errors:
            raise RuntimeError(str(errors[0]))


def _transaction(rec: Recorder, producer: Any, process: str, tid: str, writes: list[tuple[str, int, str]],
                 end: str, offsets: dict[tuple[str, int], int] | None = None, consumer: Any = None,
                 group: str = "") -> bool:
    """One transaction; True when its end returned ok."""
    value: dict[str, Any] = {"transactional_id": tid, "writes": [list(w) for w in writes], "end": end}
    if offsets:
        value.update(offsets={f"{t}/{p}": o for (t, p), o in offsets.items()}, group=group)  # the history's text
    before = len(rec.ops)
    with rec.op(process, "txn", value):
        try:
            producer.begin_transaction()
            for topic, partition, v in writes:
                producer.produce(topic, v.encode(), partition=partition)
            producer.flush(TIMEOUT)
            if offsets and consumer is not None:
                from confluent_kafka import TopicPartition

                tps = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
                producer.send_offsets_to_transaction(tps, consumer.consumer_group_metadata(), TIMEOUT)
        except Exception as exc:
            with contextlib.suppress(Exception):
                producer.abort_transaction(TIMEOUT)
            value["end"] = "abort"
            raise RuntimeError(f"before the end: {exc}") from exc
        value["end_invoked"] = rec.clock()
        try:
            if end == "commit":
                producer.commit_transaction(TIMEOUT)
            else:
                producer.abort_transaction(TIMEOUT)
        except Exception as exc:
            _end_failed(producer, exc)
    return rec.ops[before].outcome == "ok"


def _end_failed(producer: Any, exc: Exception) -> None:
    """A commit that failed with an abortable error was not applied: abort, and report a failure."""
    from confluent_kafka import KafkaException

    if isinstance(exc, KafkaException) and exc.args and getattr(exc.args[0], "txn_requires_abort", lambda: False)():
        with contextlib.suppress(Exception):
            producer.abort_transaction(TIMEOUT)
        raise RuntimeError(f"abortable: {exc}") from exc
    _indefinite_or_raise(exc)


def _init(rec: Recorder, process: str, bootstrap: str, tid: str) -> Any:
    producer = _producer(bootstrap, **{"transactional.id": tid, "transaction.timeout.ms": 20000})
    with rec.op(process, "init", {"transactional_id": tid}):
        producer.init_transactions(TIMEOUT)
    return producer if rec.ops[-1].outcome == "ok" else None


def _read_all(rec: Recorder, bootstrap: str, isolation: str, partitions: list[tuple[str, int]], run: str) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"txnspec-reader-{run}-{isolation}",
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", **QUIET})
    try:
        with rec.op(f"reader-{isolation}", "read", {"isolation": isolation, "records": [],
                                                  "partitions": [f"{t}/{p}" for t, p in partitions]}) as value:
            ends = {}
            for t, p in partitions:
                _, high = consumer.get_watermark_offsets(TopicPartition(t, p), timeout=TIMEOUT, cached=False)
                ends[(t, p)] = high
            consumer.assign([TopicPartition(t, p, 0) for t, p in partitions])
            position = {tp: 0 for tp in partitions}
            deadline = time.monotonic() + TIMEOUT
            while time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is not None and not msg.error():
                    topic, partition, offset = str(msg.topic()), int(msg.partition() or 0), int(msg.offset() or 0)
                    value["records"].append([topic, partition, offset, _text(msg)])
                    position[(topic, partition)] = offset + 1
                done = all(consumer.position([TopicPartition(t, p)])[0].offset >= ends[(t, p)]
                           or position[(t, p)] >= ends[(t, p)] for t, p in partitions)
                if done and msg is None:
                    break
            else:
                raise Indefinite("did not reach the end of every partition in time")
    finally:
        consumer.close()


def run_workload(bootstrap: str, ops: int, seed: int) -> tuple[list[hist.Op], dict[str, Any]]:
    """Run the workload against ``bootstrap``; the history and facts about the run."""
    from confluent_kafka import Consumer, TopicPartition

    rng = random.Random(seed)
    run = f"{seed}-{uuid.uuid4().hex[:6]}"
    out, inp = f"txnspec-out-{run}", f"txnspec-in-{run}"
    problem = _create_topics(bootstrap, {out: 2, inp: 1})
    facts: dict[str, Any] = {"topics": [out, inp], "seed": seed}
    if problem:
        facts["topic_creation"] = problem
    rec = Recorder()
    outputs = [(out, 0), (out, 1)]
    n_txn = max(1, ops // 2)
    n_ctp = max(1, ops - n_txn)

    idem = _producer(bootstrap)
    for i in range(n_ctp * 2):
        _write(rec, idem, "input", inp, 0, f"in-{run}-{i}")

    tid_a = f"txnspec-a-{run}"
    producer = _init(rec, "txn-a#0", bootstrap, tid_a)
    if producer is not None:
        for i in range(n_txn):
            writes = [(out, rng.randrange(2), f"a-{run}-{i}-{j}") for j in range(rng.randint(1, 3))]
            _transaction(rec, producer, "txn-a#0", tid_a, writes, rng.choice(["commit", "commit", "abort"]))

    group = f"txnspec-group-{run}"
    tid_c = f"txnspec-ctp-{run}"
    ctp = _init(rec, "ctp#0", bootstrap, tid_c)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest", **QUIET})
    if ctp is not None:
        consumer.assign([TopicPartition(inp, 0, 0)])
        committed_position, done, deadline = 0, 0, time.monotonic() + TIMEOUT * 3
        while done < n_ctp and time.monotonic() < deadline:
            batch = consumer.consume(2, 1.0)
            records = [m for m in batch if not m.error()]
            if not records:
                continue
            end = rng.choice(["commit", "commit", "abort"])
            writes = [(out, rng.randrange(2), f"t-{_text(m)}-{done}") for m in records]
            next_position = int(records[-1].offset() or 0) + 1
            ok = _transaction(rec, ctp, "ctp#0", tid_c, writes, end, {(inp, 0): next_position}, consumer, group)
            done += 1
            if ok and end == "commit":
                committed_position = next_position
            else:
                consumer.seek(TopicPartition(inp, 0, committed_position))

    tid_z = f"txnspec-z-{run}"
    zombie = _init(rec, "zombie#0", bootstrap, tid_z)
    if zombie is not None:
        with contextlib.suppress(Exception):
            zombie.begin_transaction()
            zombie.produce(out, f"z-{run}-0".encode(), partition=0)
            zombie.flush(TIMEOUT)
        successor = _init(rec, "zombie#1", bootstrap, tid_z)
        record: dict[str, Any] = {"transactional_id": tid_z, "writes": [[out, 0, f"z-{run}-0"]], "end": "commit"}
        with rec.op("zombie#0", "txn", record):
            record["end_invoked"] = rec.clock()
            try:
                zombie.commit_transaction(TIMEOUT)
            finally:
                zombie.poll(0)  # serves librdkafka's queued log lines (the fenced instance's FATAL) to CLIENT_LOG
        if successor is not None:
            _transaction(rec, successor, "zombie#1", tid_z, [(out, 1, f"z-{run}-1")], "commit")

    restarted = _init(rec, "txn-a#1", bootstrap, tid_a)
    if restarted is not None:
        _transaction(rec, restarted, "txn-a#1", tid_a, [(out, 0, f"a-{run}-restart")], "commit")

    for isolation in ("read_committed", "read_uncommitted"):
        _read_all(rec, bootstrap, isolation, outputs, run)
    with rec.op("group", "offsets", {"group": group, "offsets": {}}) as value:
        committed = consumer.committed([TopicPartition(inp, 0)], timeout=TIMEOUT)
        value["offsets"] = {f"{tp.topic}/{tp.partition}": tp.offset for tp in committed}
    consumer.close()
    return rec.ops, facts


def run_client_audit(bootstrap: str, ops: int, seed: int, out_dir: Path | None) -> list[RuleResult]:
    """The client level of ``txnspec audit``: the workload's history, checked."""
    started = time.monotonic()
    logged = len(CLIENT_LOG.lines)
    history, facts = run_workload(bootstrap, ops, seed)
    client_log = CLIENT_LOG.lines[logged:]
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        hist.save(history, out_dir / "history.jsonl")
    results = hist.check(history)
    counts = {o: sum(op.outcome == o for op in history) for o in hist.OUTCOMES}
    summary = RuleResult("client", "workload.completed", "the workload ran: operations by outcome "
                         f"{counts} in {time.monotonic() - started:.1f} s", checked=len(history))
    failed_inits = [op.brief() for op in history if op.f == "init" and op.outcome != "ok"]
    if failed_inits or "topic_creation" in facts:
        summary.note = "; ".join(filter(None, [facts.get("topic_creation"),
                                               f"{len(failed_inits)} init(s) failed" if failed_inits else None]))
    zombie_commits = [op for op in history if op.f == "txn" and op.process == "zombie#0"]
    unexpected = [op for op in zombie_commits if op.outcome == "ok"]
    fence = RuleResult("client", "client.zombie_commit_refused",
                       "the commit of a producer instance fenced by a newer instance fails",
                       checked=len(zombie_commits))
    if unexpected:
        fence.violations = 1
        fence.examples.append(unexpected[0].brief())
    fenced_lines = [line for line in client_log if "fenced" in line.lower()]
    if fenced_lines:
        fence.note = f"librdkafka logged: {fenced_lines[0]}"
    return [summary, fence, *results]
