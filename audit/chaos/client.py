"""The chaos workload's client processes: real confluent-kafka (librdkafka) clients, one OS process each, so a
fault can kill -9 one of them. Run as ``python -m txnspec.audit.chaos.client ROLE SPEC.json``.

What it models
    * ``producer``: a transactional producer (one ``transactional.id``, one *instance* per process): init,
      then transactions of 1-3 sends over the output partitions, committed (3 in 4) or aborted; an
      abortable error aborts, a fatal one (fenced) ends the process. SIGUSR1 makes its next transaction
      stall past ``transaction.timeout.ms`` before the commit (the ``timeout`` fault).
    * ``ctp``: consume-transform-produce: a read_committed member of a consumer group over the input topic
      and a transactional producer; each batch polled becomes one transaction of transformed records
      (``"{input value}>{transaction}"``) with ``send_offsets_to_transaction``; after an abort it rewinds to
      the group's committed offsets.
    * ``input``: an idempotent producer writing the input values.
    * ``poller``: a read_committed consumer of every output partition from offset 0 during the run.
    * ``reader``: after healing, reads every partition of the given topics to its end at one isolation
      level, with the high watermark and last stable offset of each, and the groups' committed offsets.

    Every call is written to the process's own JSON Lines file (:mod:`.history`) before it is made (invoke)
    and when it returns, flushed line by line, so a kill -9 leaves at most one call without completion.

Assumes
    librdkafka's error classification: ``txn_requires_abort`` (abortable), ``fatal`` (fenced or fatal),
    ``retriable``; a retriable commit or abort may be called again (librdkafka's documented contract).

Leaves out
    The Java client (its harness runs its own fixed scenario, not this schedule-driven loop).

Long because every role is a process started the same way (``python -m txnspec.audit.chaos.client ROLE``):
the five roles share the history log, the error classification and one command line for every process the
workload spawns.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

TIMEOUT = 10.0
WATCHDOG_SECONDS = 15.0
QUIET: dict[str, Any] = {"log_level": 0, "broker.address.family": "v4"}


class Log:
    """This process's events, one flushed JSON line each."""

    def __init__(self, path: Path, process: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.process = process
        self.calls = 0
        self.lock = threading.Lock()  # the orchestrator's nemesis threads share a log

    def invoke(self, f: str, value: dict[str, Any] | None = None) -> int:
        """Write the invoke of a call; its number, for its completion."""
        with self.lock:
            self.calls += 1
            call = self.calls
        self._write(call, "invoke", f, value, None)
        return call

    def done(self, call: int, type_: str, f: str, value: dict[str, Any] | None = None,
             error: str | None = None) -> None:
        self._write(call, type_, f, value, error)

    def _write(self, call: int, type_: str, f: str, value: dict[str, Any] | None, error: str | None) -> None:
        line = {"time": time.monotonic(), "process": self.process, "call": call, "type": type_, "f": f,
                "value": value or {}}
        if error is not None:
            line["error"] = error
        os.write(self.fd, (json.dumps(line) + "\n").encode())


def error_name(exc: BaseException) -> str:
    from confluent_kafka import KafkaError, KafkaException

    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return str(exc.args[0].name())
    return type(exc).__name__


def classify(exc: BaseException) -> str:
    """``fatal``, ``abortable``, ``retriable`` or ``other`` (librdkafka's flags on the error)."""
    from confluent_kafka import KafkaError, KafkaException

    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        err = exc.args[0]
        if err.fatal():
            return "fatal"
        if err.txn_requires_abort():
            return "abortable"
        if err.retriable() or err.code() == KafkaError._TIMED_OUT:
            return "retriable"
    return "other"


# --- producer --------------------------------------------------------------------------------------

class Stall:
    requested = False


def _on_usr1(signum: int, frame: Any) -> None:
    Stall.requested = True


def _txn_producer(spec: dict[str, Any], tid: str) -> Any:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": spec["bootstrap"], "transactional.id": tid, "acks": "all",
                     "enable.idempotence": True, "transaction.timeout.ms": spec["transaction_timeout_ms"],
                     "message.timeout.ms": min(int(TIMEOUT * 1000), spec["transaction_timeout_ms"] - 1000),
                     "socket.timeout.ms": 5000,
                     "linger.ms": 5, **QUIET})


def _init(log: Log, producer: Any, value: dict[str, Any], deadline: float) -> bool:
    """init_transactions until it succeeds (a retriable error or a timeout is retried) or the run ends."""
    while time.monotonic() < deadline:
        call = log.invoke("init", value)
        try:
            producer.init_transactions(TIMEOUT)
            log.done(call, "ok", "init")
            return True
        except Exception as exc:
            kind = classify(exc)
            log.done(call, "fail" if kind != "retriable" else "info", "init", {"class": kind}, error_name(exc))
            if kind == "fatal":
                return False
            time.sleep(0.5)
    return False


def _end(log: Log, producer: Any, how: str, txn: str) -> str:
    """commit or abort ``txn``; a retriable error is retried (bounded). The outcome word."""
    for _ in range(4):
        call = log.invoke(how, {"txn": txn})
        try:
            (producer.commit_transaction if how == "commit" else producer.abort_transaction)(TIMEOUT)
            log.done(call, "ok", how)
            return "ok"
        except Exception as exc:
            kind = classify(exc)
            log.done(call, "info" if kind == "retriable" else "fail", how, {"class": kind}, error_name(exc))
            if kind != "retriable":
                return kind
    return "unknown"


def _sends(log: Log, producer: Any, txn: str, writes: list[tuple[str, int, str]],
           inputs: list[str] | None = None) -> bool:
    """Produce ``writes`` and flush; each send is one op completed by its delivery report. True: all acked.
    ``inputs``: the input record's value each write transforms (consume-transform-produce), logged as ``input``."""
    results: dict[str, tuple[Any, Any]] = {}
    calls: dict[str, int] = {}

    def report(err: Any, msg: Any) -> None:
        results[msg.value().decode()] = (err, msg.offset())

    for i, (topic, partition, value) in enumerate(writes):
        calls[value] = log.invoke("send", {"topic": topic, "partition": partition, "value": value, "txn": txn,
                                           **({"input": inputs[i]} if inputs is not None else {})})
        try:
            producer.produce(topic, value.encode(), partition=partition, on_delivery=report)
        except Exception as exc:
            log.done(calls.pop(value), "fail" if classify(exc) != "retriable" else "info", "send", {},
                     error_name(exc))
            break
        producer.poll(0)
    producer.flush(TIMEOUT)
    acked = len(calls) == len(writes)
    for value, call in calls.items():
        if value not in results:
            acked = False  # no delivery report: left open, completed as info by the merge
            continue
        err, offset = results[value]
        if err is None:
            log.done(call, "ok", "send", {"offset": offset})
        else:
            acked = False
            # only a record purged from the queue was certainly never sent; a timed-out one may be in the log
            log.done(call, "fail" if err.name() == "_PURGE_QUEUE" else "info", "send", {}, err.name())
    return acked


def run_producer(spec: dict[str, Any], log: Log) -> int:
    signal.signal(signal.SIGUSR1, _on_usr1)
    rng = random.Random(spec["seed"])
    tid, instance, deadline = spec["tid"], spec["instance"], spec["deadline"]
    partitions = spec["partitions"]
    producer = _txn_producer(spec, tid)
    if not _init(log, producer, {"tid": tid, "instance": instance, "client": "librdkafka"}, deadline):
        return 0
    n = 0
    while time.monotonic() < deadline:
        txn = f"{tid}#{instance}.{n}"
        n += 1
        call = log.invoke("begin", {"tid": tid, "instance": instance, "txn": txn})
        try:
            producer.begin_transaction()
            log.done(call, "ok", "begin")
        except Exception as exc:
            log.done(call, "fail", "begin", {}, error_name(exc))
            if classify(exc) == "fatal":
                return 0
            time.sleep(0.5)
            continue
        writes = [(spec["topic"], rng.randrange(partitions), f"{txn}/{j}") for j in range(rng.randint(1, 3))]
        acked = _sends(log, producer, txn, writes)
        if Stall.requested:
            Stall.requested = False
            time.sleep(spec["transaction_timeout_ms"] / 1000 + 3)
        how = "commit" if acked and rng.random() < 0.75 else "abort"
        outcome = _end(log, producer, how, txn)
        if outcome == "fatal":
            return 0
        if outcome != "ok" and how == "commit":
            if _end(log, producer, "abort", txn) == "fatal":
                return 0
        elif outcome not in ("ok",):
            return 0  # an abort that did not finish: this instance gives up (a new one takes over)
        time.sleep(rng.uniform(0.05, 0.3))
    return 0


# --- consume-transform-produce -----------------------------------------------------------------------

def _text(msg: Any) -> str:
    value = msg.value()
    return value.decode() if isinstance(value, bytes) else str(value)


def _records(msgs: list[Any]) -> list[list[Any]]:
    return [[m.topic(), m.partition(), m.offset(), _text(m)] for m in msgs]


def _rewind(log: Log, consumer: Any) -> None:
    from confluent_kafka import TopicPartition

    assignment = consumer.assignment()
    if not assignment:
        return
    committed = consumer.committed(assignment, timeout=TIMEOUT)
    positions = {}
    for tp in committed:
        offset = tp.offset if tp.offset >= 0 else 0
        consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
        positions[f"{tp.topic}/{tp.partition}"] = offset
    log.done(log.invoke("seek", {"why": "abort"}), "ok", "seek", {"positions": positions})


def run_ctp(spec: dict[str, Any], log: Log) -> int:
    from confluent_kafka import Consumer, TopicPartition

    rng = random.Random(spec["seed"])
    tid, instance, deadline, group = spec["tid"], spec["instance"], spec["deadline"], spec["group"]

    def assigned(consumer: Any, partitions: list[Any]) -> None:
        log.done(log.invoke("seek", {"why": "assigned"}), "ok", "seek",
                 {"positions": {f"{p.topic}/{p.partition}": None for p in partitions}})

    consumer = Consumer({"bootstrap.servers": spec["bootstrap"], "group.id": group, "isolation.level":
                         "read_committed", "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000, **QUIET})
    consumer.subscribe([spec["input"]], on_assign=assigned)
    producer = _txn_producer(spec, tid)
    if not _init(log, producer, {"tid": tid, "instance": instance, "client": "librdkafka"}, deadline):
        consumer.close()
        return 0
    n = 0
    try:
        while time.monotonic() < deadline:
            call = log.invoke("poll", {"group": group})
            msgs = [m for m in consumer.consume(5, 0.5) if not m.error()]
            log.done(call, "ok", "poll", {"records": _records(msgs)})
            if not msgs:
                continue
            txn = f"{tid}#{instance}.{n}"
            n += 1
            call = log.invoke("begin", {"tid": tid, "instance": instance, "txn": txn})
            try:
                producer.begin_transaction()
                log.done(call, "ok", "begin")
            except Exception as exc:
                log.done(call, "fail", "begin", {}, error_name(exc))
                return 0
            writes = [(spec["topic"], rng.randrange(spec["partitions"]), f"{_text(m)}>{txn}") for m in msgs]
            acked = _sends(log, producer, txn, writes, [_text(m) for m in msgs])
            positions: dict[tuple[str, int], int] = {}
            for m in msgs:
                positions[(str(m.topic()), int(m.partition() or 0))] = int(m.offset() or 0) + 1
            offsets = {f"{t}/{p}": o for (t, p), o in positions.items()}
            sent_offsets = False
            if acked:
                call = log.invoke("offsets", {"txn": txn, "group": group, "offsets": offsets})
                try:
                    producer.send_offsets_to_transaction([TopicPartition(t, p, o) for (t, p), o in positions.items()],
                                                         consumer.consumer_group_metadata(), TIMEOUT)
                    log.done(call, "ok", "offsets")
                    sent_offsets = True
                except Exception as exc:
                    log.done(call, "fail" if classify(exc) != "retriable" else "info", "offsets", {},
                             error_name(exc))
                    if classify(exc) == "fatal":
                        return 0
            how = "commit" if sent_offsets and rng.random() < 0.85 else "abort"
            outcome = _end(log, producer, how, txn)
            if outcome == "fatal":
                return 0
            if outcome != "ok" or how == "abort":
                if how == "commit" and _end(log, producer, "abort", txn) == "fatal":
                    return 0
                _rewind(log, consumer)
    finally:
        consumer.close()
    return 0


# --- input, poller, reader -------------------------------------------------------------------------

def run_input(spec: dict[str, Any], log: Log) -> int:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": spec["bootstrap"], "acks": "all", "enable.idempotence": True,
                         "message.timeout.ms": 30000, "linger.ms": 5, **QUIET})
    deadline, i = spec["deadline"], 0
    pending: dict[str, int] = {}

    def report(err: Any, msg: Any) -> None:
        call = pending.pop(msg.value().decode())
        if err is None:
            log.done(call, "ok", "send", {"offset": msg.offset()})
        else:
            log.done(call, "fail" if not err.retriable() else "info", "send", {}, err.name())

    while time.monotonic() < deadline:
        value = f"in-{i}"
        partition = i % spec["partitions"]
        i += 1
        log_value = {"topic": spec["topic"], "partition": partition, "value": value}
        pending[value] = log.invoke("send", log_value)
        producer.produce(spec["topic"], value.encode(), partition=partition, on_delivery=report)
        producer.flush(30)
        time.sleep(1.0 / spec["rate"])
    return 0


def run_poller(spec: dict[str, Any], log: Log) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": spec["bootstrap"], "group.id": spec["group"], "isolation.level":
                         "read_committed", "enable.auto.commit": False, **QUIET})
    consumer.assign([TopicPartition(spec["topic"], p, 0) for p in range(spec["partitions"])])
    log.done(log.invoke("seek", {"why": "assigned"}), "ok", "seek",
             {"positions": {f"{spec['topic']}/{p}": 0 for p in range(spec["partitions"])}})
    try:
        while time.monotonic() < spec["deadline"]:
            call = log.invoke("poll", {})
            msgs = [m for m in consumer.consume(50, 0.5) if not m.error()]
            log.done(call, "ok", "poll", {"records": _records(msgs)})
    finally:
        consumer.close()
    return 0


def run_reader(spec: dict[str, Any], log: Log) -> int:
    from confluent_kafka import Consumer, TopicPartition

    isolation = spec["isolation"]
    consumer = Consumer({"bootstrap.servers": spec["bootstrap"], "group.id": f"chaos-reader-{isolation}",
                         "isolation.level": isolation, "enable.auto.commit": False, **QUIET})
    tps = [(t, p) for t, n in spec["topics"].items() for p in range(n)]
    value: dict[str, Any] = {"isolation": isolation}
    read_call = log.invoke("read", value)
    records: list[list[Any]] = []
    ends: dict[str, int] = {}
    stable: dict[str, int] = {}
    deadline = time.monotonic() + spec["seconds"]
    try:
        # the ends: the high watermark (read_uncommitted) and the LSO (read_committed's ListOffsets)
        for t, p in tps:
            _, high = consumer.get_watermark_offsets(TopicPartition(t, p), timeout=TIMEOUT, cached=False)
            ends[f"{t}/{p}"] = high
        consumer.assign([TopicPartition(t, p, 0) for t, p in tps])
        position = {f"{t}/{p}": 0 for t, p in tps}
        while time.monotonic() < deadline:
            for m in consumer.consume(200, 0.3):
                if m.error():
                    continue
                records.append([m.topic(), m.partition(), m.offset(), _text(m)])
            current = consumer.position([TopicPartition(t, p) for t, p in tps])
            for tp in current:
                if tp.offset >= 0:
                    position[f"{tp.topic}/{tp.partition}"] = tp.offset
            if all(position[k] >= ends[k] for k in ends):
                break
        for t, p in tps:
            stable[f"{t}/{p}"] = position[f"{t}/{p}"]
        done = all(position[k] >= ends[k] for k in ends)
        log.done(read_call, "ok" if done else "info", "read", {"records": records, "ends": ends, "positions": stable},
                 None if done else "did not reach the end of every partition in time")
        for group in spec.get("groups", []):
            call = log.invoke("committed", {"group": group})
            try:
                c = Consumer({"bootstrap.servers": spec["bootstrap"], "group.id": group, **QUIET})
                got = c.committed([TopicPartition(spec["input"], p) for p in range(spec["input_partitions"])],
                                  timeout=TIMEOUT)
                c.close()
                log.done(call, "ok", "committed", {"offsets": {f"{tp.topic}/{tp.partition}": tp.offset for tp in got}})
            except Exception as exc:
                log.done(call, "fail", "committed", {}, error_name(exc))
    finally:
        consumer.close()
    return 0


ROLES = {"producer": run_producer, "ctp": run_ctp, "input": run_input, "poller": run_poller, "reader": run_reader}


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ROLES:
        print(f"usage: python -m txnspec.audit.chaos.client {{{','.join(ROLES)}}} SPEC.json", file=sys.stderr)
        return 2
    spec = json.loads(Path(argv[1]).read_text())
    log = Log(Path(spec["log"]), spec["process"])
    if "deadline" in spec:  # a call stuck past the run (a close waiting on a coordinator) never holds the run up
        watchdog = threading.Timer(max(0.0, spec["deadline"] - time.monotonic()) + WATCHDOG_SECONDS,
                                   lambda: os._exit(3))
        watchdog.daemon = True
        watchdog.start()
    return ROLES[argv[0]](spec, log)


if __name__ == "__main__":
    status = main(sys.argv[1:])
    # every event is already written; librdkafka's destructors (a consumer's close, a producer's flush) could
    # block on an unreachable broker, so the process ends here
    os._exit(status)
