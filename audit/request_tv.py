"""Request transaction versions across broker levels: the transaction version of a request is its version's
(``TransactionVersion.transactionVersionForEndTxn`` / ``ForAddPartitionsToTxn``,
``AddPartitionsToTxnManager.produceRequestVersionToTransactionSupportedOperation``), whatever the broker's
finalised ``transaction.version``. Three wire rules send one level's requests to a broker of either level:

``txn.tv2_requests``
    KIP-890 part 2's client path (the Java client's at TV2): InitProducerId, a transactional Produce v12 with no
    AddPartitionsToTxn (the leader adds the partition through its coordinator), EndTxn v5 COMMIT (the epoch
    bumped in the answer); read_committed then sees the record. At a TV1 broker this is what Kafka 4.1.1 and
    4.4.0 accept although the level is 1.
``txn.tv2_end_txn_after_timeout``
    A producer whose transaction the coordinator aborted on its timeout (``abortTimedOutTransactions``: the
    epoch bumped): its EndTxn v5 COMMIT is a retry of the completed abort at the old epoch, INVALID_TXN_STATE
    (48); the same EndTxn at v4 is PRODUCER_FENCED (90).
``txn.tv1_requests``
    The path librdkafka and kafka-python take at either level: AddPartitionsToTxn v3, Produce v11,
    AddOffsetsToTxn v3, TxnOffsetCommit v4, EndTxn v4 COMMIT (no epoch bump), then a second transaction at the
    same epoch that aborts; read_committed sees the first record only and the group's offset is the committed
    one.

Expected answers come from running the same requests, each with its own transaction version, through the
spec's coordinator and partition at the broker's level, never from a table here. A broker that does not offer
a version the rule needs makes the rule "not checked" with that said.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from txnspec.audit.connection import WireError
from txnspec.audit.report import RuleResult
from txnspec.audit.timeout import GRACE_SECONDS, POLL_SECONDS, TIMEOUT_MS, _committed_closed, _view
from txnspec.audit.trace_replay import RETRIABLE, RETRIES
from txnspec.spec import coordinator as spec_coordinator
from txnspec.spec import coordinator_state as spec_coord_state
from txnspec.spec import group as spec_group
from txnspec.spec import partition as spec_partition
from txnspec.spec import txn_expiry as spec_txn_expiry
from txnspec.spec import txn_markers as spec_txn_markers
from txnspec.spec import verification as spec_verification
from txnspec.spec.errors import Errors
from txnspec.spec.messages import (
    AddOffsetsToTxn,
    AddPartitionsToTxn,
    EndTxn,
    InitProducerId,
    IsolationLevel,
    TransactionResult,
    TxnOffsetCommit,
)

TID, PARTITION, GROUP = "t1", "p0", "g"
COMMITTED_OFFSET = 7  # the input position the transaction commits for its group
TV1_REQUESTS = {"AddPartitionsToTxn": 3, "Produce": 11, "AddOffsetsToTxn": 3, "TxnOffsetCommit": 4, "EndTxn": 4}
TV2_REQUESTS = {"Produce": 12, "EndTxn": 5}
RULES = {
    "txn.tv2_requests": "a transactional Produce v12 with no AddPartitionsToTxn and EndTxn v5 commit at any "
                        "transaction.version (the request's version decides)",
    "txn.tv2_end_txn_after_timeout": "after a timeout abort, the producer's EndTxn v5 commit is INVALID_TXN_STATE "
                                     "(a retry of the abort), EndTxn v4 PRODUCER_FENCED, at any level",
    "txn.tv1_requests": "AddPartitionsToTxn v3, AddOffsetsToTxn v3, TxnOffsetCommit v4 and EndTxn v4 (no epoch bump) "
                        "commit and abort at any transaction.version",
}


def _error(response: Any) -> str:
    return str(response.error.value) if response is not None else "NONE"


class _Spec:
    """The spec's coordinator, one partition and the group's offsets at the broker's level."""

    def __init__(self, broker_tv: int, timeout_ms: int = 60_000) -> None:
        self.config = spec_coord_state.CoordinatorConfig(transaction_version=broker_tv)
        init = spec_coordinator.handle_init_producer_id(spec_coord_state.CoordinatorState(),
                                                        InitProducerId(TID, timeout_ms), config=self.config)
        assert init.response is not None and init.response.error is Errors.NONE, init.response
        self.cs = init.state
        self.pid, self.epoch = init.response.producer_id, init.response.producer_epoch  # type: ignore[union-attr]
        self.log = spec_partition.PartitionState()
        self.group = spec_group.GroupState()

    def add(self, tv: int) -> str:
        r = spec_coordinator.handle_add_partitions_to_txn(self.cs, AddPartitionsToTxn(
            TID, self.pid, self.epoch, frozenset({PARTITION}), tv), config=self.config)
        self.cs = r.state
        return _error(r.response)

    def add_offsets(self, group: str) -> str:
        r = spec_coordinator.handle_add_offsets_to_txn(self.cs, AddOffsetsToTxn(TID, self.pid, self.epoch, group),
                                                       config=self.config)
        self.cs = r.state
        return _error(r.response)

    def txn_offset_commit(self, group: str, offset: int) -> str:
        """TxnOffsetCommit v4 (no member: generation -1), held pending until the transaction's marker."""
        error = spec_group.validate_offset_commit(self.group, group, "", None, -1, transactional=True)
        if error is not Errors.NONE:
            return error.value
        self.group, reply = spec_group.handle_txn_offset_commit(self.group, TxnOffsetCommit(
            TID, group, self.pid, self.epoch, ((PARTITION, offset),)))
        return reply.error.value

    def committed_offset(self, group: str) -> dict[str, Any]:
        error, offset = spec_group.fetch_offsets(self.group, group, PARTITION, require_stable=True)
        return {"error": error.value, "committed_offset": -1 if offset is None else offset}

    def produce(self, seq: int, verify_tv: int | None) -> dict[str, Any]:
        """A transactional batch; ``verify_tv``: the leader first verifies it with the coordinator (KIP-890)."""
        if verify_tv is not None:
            error = self.add(verify_tv)
            if error != "NONE":
                return {"error": spec_verification.verification_error(Errors(error), verify_tv >= 2).value}
        self.log, reply = spec_partition.append_data(self.log, self.pid, self.epoch, seq, 1, True)
        return {"error": reply.error.value, **({"base_offset": reply.base_offset} if reply.error is Errors.NONE
                                              else {})}

    def end(self, commit: bool, tv: int) -> dict[str, Any]:
        result = TransactionResult.COMMIT if commit else TransactionResult.ABORT
        r = spec_coordinator.handle_end_txn(self.cs, EndTxn(TID, self.pid, self.epoch, result, tv), config=self.config)
        self._complete(r)
        out: dict[str, Any] = {"error": _error(r.response)}
        if tv >= 2 and out["error"] == "NONE":
            out["epoch"] = r.response.producer_epoch  # type: ignore[union-attr]
            self.epoch = out["epoch"]
        return out

    def _complete(self, r: Any) -> None:
        self.cs = r.state
        for _, marker in r.markers:
            if marker.partition == PARTITION:
                self.log, _ = spec_partition.append_end_txn_marker(
                    self.log, marker.producer_id, marker.producer_epoch, marker.coordinator_epoch, marker.result,
                    marker.transaction_version)
            else:  # the group's offsets partition
                self.group = spec_group.complete_pending_txn_offset_commit(
                    self.group, marker.producer_id, marker.result is TransactionResult.COMMIT)
        if r.markers:
            self.cs = spec_txn_markers.markers_written(self.cs, TID, config=self.config).state

    def view(self, committed: bool) -> dict[str, Any]:
        level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
        view: dict[str, Any] = _view(self.log, level)
        return view


def expected_tv2_requests(broker_tv: int) -> dict[str, Any]:
    s = _Spec(broker_tv)
    produce = s.produce(0, verify_tv=2)
    end = s.end(True, 2)
    return {"produce": produce, "end_txn": end, "read_committed": s.view(True)}


def expected_end_txn_after_timeout(broker_tv: int) -> dict[str, Any]:
    s = _Spec(broker_tv, TIMEOUT_MS)
    add = s.add(0)
    produce = s.produce(0, verify_tv=None)
    scan = spec_txn_expiry.abort_timed_out_transactions(s.cs, s.cs.now_ms + TIMEOUT_MS + 1, config=s.config)
    s._complete(scan)
    answers = {}
    for tv in (2, 0):
        r = spec_coordinator.handle_end_txn(s.cs, EndTxn(TID, s.pid, s.epoch, TransactionResult.COMMIT, tv),
                                            config=s.config)
        answers[f"end_txn_tv{tv}"] = _error(r.response)
    return {"add": add, "produce": produce, "read_committed": s.view(True), **answers}


def expected_tv1_requests(broker_tv: int) -> dict[str, Any]:
    s = _Spec(broker_tv)
    out: dict[str, Any] = {"add": s.add(0), "produce": s.produce(0, verify_tv=0)}
    out["add_offsets"] = s.add_offsets(GROUP)
    out["txn_offset_commit"] = s.txn_offset_commit(GROUP, COMMITTED_OFFSET)
    out["end_commit"] = s.end(True, 0)
    out["second_add"] = s.add(0)
    out["second_produce"] = s.produce(1, verify_tv=0)
    out["end_abort"] = s.end(False, 0)
    out["read_committed"] = s.view(True)
    out["offset_fetch"] = s.committed_offset(GROUP)
    return out


def _missing(wire: Any, wanted: dict[str, int]) -> list[str]:
    """The versions of ``wanted`` the broker does not offer."""
    import kafka.protocol.producer.produce as produce_mod
    import kafka.protocol.producer.transaction as txn_mod

    conn = wire._conn(wire.bootstrap.split(",")[0])
    missing = []
    for name, version in wanted.items():
        cls = getattr(produce_mod if name == "Produce" else txn_mod, f"{name}Request")
        low, high = conn.versions.get(cls.API_KEY, (0, -1))
        if not low <= version <= high:
            missing.append(f"{name} v{version} (the broker offers {low}-{high})")
    return missing


@contextmanager
def _versions(wire: Any, wanted: dict[str, int]) -> Iterator[list[str]]:
    """The wire's request versions set to ``wanted`` for the block; yields what the broker does not offer."""
    missing = _missing(wire, wanted)
    before = dict(wire.versions)
    wire.versions.update(wanted)
    try:
        yield missing
    finally:
        wire.versions.clear()
        wire.versions.update(before)


class _Checker:
    def __init__(self, rule: str) -> None:
        self.result = RuleResult("wire", rule, RULES[rule])
        self.sent: list[dict[str, Any]] = []

    def __call__(self, request: str, expected: Any, actual: Any) -> bool:
        self.sent.append({"request": request, "expected": expected, "actual": actual})
        self.result.checked += 1
        if actual == expected:
            return True
        self.result.violations += 1
        self.result.examples.append({"sequence": list(self.sent)})
        return False


def _retrying(call: Callable[..., dict[str, Any]], *args: Any, sleep: Callable[[float], None] = time.sleep
              ) -> dict[str, Any]:
    answer: dict[str, Any] = call(*args)
    for _ in range(RETRIES):
        if answer.get("error") not in RETRIABLE:
            break
        sleep(POLL_SECONDS)
        answer = call(*args)
    return answer


def _init(wire: Any, tid: str, timeout_ms: int, check: _Checker) -> tuple[int, int] | None:
    got = _retrying(wire.init_producer_id, tid, timeout_ms, -1, -1)
    if not check(f"InitProducerId({tid})", "NONE", got["error"]):
        return None
    return int(got["producer_id"]), int(got["epoch"])


def _without_pid(view: dict[str, Any], pid: int) -> dict[str, Any]:
    out = dict(view)
    if "aborted_transactions" in out:
        out["aborted_transactions"] = [(0 if p == pid else p, o) for p, o in out["aborted_transactions"]]
    return out


def tv2_requests(wire: Any, run: str) -> RuleResult:
    check = _Checker("txn.tv2_requests")
    want = expected_tv2_requests(wire.transaction_version)
    topic, tid = f"txnspec-{run}-tv2req", f"txnspec-{run}-tv2req-tid"
    with _versions(wire, TV2_REQUESTS) as missing:
        if missing:
            check.result.note = "not offered: " + ", ".join(missing)
            return check.result
        wire.prepare([topic])
        ids = _init(wire, tid, 60_000, check)
        if ids is None:
            return check.result
        pid, epoch = ids
        if not check("Produce v12 (no AddPartitionsToTxn)", want["produce"],
                     _retrying(wire.produce, topic, pid, epoch, 0, 1, tid)):
            return check.result
        end = wire.end_txn(tid, pid, epoch, True)
        if "epoch" in end:
            end["epoch"] -= epoch  # the spec's epochs start at 0
        if not check("EndTxn v5 COMMIT", want["end_txn"], {k: v for k, v in end.items() if k != "producer_id"}):
            return check.result
    check("Fetch READ_COMMITTED", want["read_committed"], _settled(wire, topic, pid))
    return check.result


def _settled(wire: Any, topic: str, pid: int, deadline_seconds: float = 10.0) -> dict[str, Any]:
    """read_committed once the markers are written (the last stable offset at the high watermark), bounded."""
    deadline = time.monotonic() + deadline_seconds
    view = wire.fetch(topic, True)
    while not _committed_closed(view) and time.monotonic() < deadline:
        wire.pause()
        view = wire.fetch(topic, True)
    return _without_pid(view, pid)


def end_txn_after_timeout(wire: Any, run: str, grace_seconds: float = GRACE_SECONDS) -> RuleResult:
    check = _Checker("txn.tv2_end_txn_after_timeout")
    want = expected_end_txn_after_timeout(wire.transaction_version)
    topic, tid = f"txnspec-{run}-tv2end", f"txnspec-{run}-tv2end-tid"
    missing = _missing(wire, {"AddPartitionsToTxn": 3, "Produce": 11, "EndTxn": 4}) + _missing(wire, {"EndTxn": 5})
    if missing:
        check.result.note = "not offered: " + ", ".join(missing)
        return check.result
    with _versions(wire, {"AddPartitionsToTxn": 3, "Produce": 11}):
        wire.prepare([topic])
        ids = _init(wire, tid, TIMEOUT_MS, check)
        if ids is None:
            return check.result
        pid, epoch = ids
        if not check("AddPartitionsToTxn v3", want["add"], _retrying(wire.add_partitions, tid, pid, epoch,
                                                                      [topic])["error"]):
            return check.result
        if not check("Produce v11", want["produce"], _retrying(wire.produce, topic, pid, epoch, 0, 1, tid)):
            return check.result
    view = _settled(wire, topic, pid, TIMEOUT_MS / 1000 + grace_seconds)
    if not _committed_closed(view):
        check.result.note = f"the broker had not aborted the transaction {grace_seconds:.0f} s after its timeout"
    if not check("Fetch READ_COMMITTED after the timeout", want["read_committed"], view):
        return check.result
    for tv, version in ((2, 5), (0, 4)):
        with _versions(wire, {"EndTxn": version}):
            if not check(f"EndTxn v{version} COMMIT of the timed-out producer", want[f"end_txn_tv{tv}"],
                         wire.end_txn(tid, pid, epoch, True)["error"]):
                return check.result
    return check.result


def tv1_requests(wire: Any, run: str) -> RuleResult:
    check = _Checker("txn.tv1_requests")
    want = expected_tv1_requests(wire.transaction_version)
    topic, tid, group = f"txnspec-{run}-tv1req", f"txnspec-{run}-tv1req-tid", f"txnspec-{run}-tv1req-group"
    with _versions(wire, TV1_REQUESTS) as missing:
        if missing:
            check.result.note = "not offered: " + ", ".join(missing)
            return check.result
        wire.prepare([topic])
        ids = _init(wire, tid, 60_000, check)
        if ids is None:
            return check.result
        pid, epoch = ids
        steps: list[tuple[str, Any, Callable[[], Any]]] = [
            ("AddPartitionsToTxn v3", want["add"], lambda: _retrying(wire.add_partitions, tid, pid, epoch,
                                                                      [topic])["error"]),
            ("Produce v11", want["produce"], lambda: _retrying(wire.produce, topic, pid, epoch, 0, 1, tid)),
            ("AddOffsetsToTxn v3", want["add_offsets"], lambda: _retrying(wire.add_offsets, tid, pid, epoch,
                                                                          group)["error"]),
            ("TxnOffsetCommit v4", want["txn_offset_commit"], lambda: _retrying(
                wire.txn_offset_commit, tid, group, pid, epoch, [(topic, COMMITTED_OFFSET)])["error"]),
            ("EndTxn v4 COMMIT", want["end_commit"], lambda: wire.end_txn(tid, pid, epoch, True)),
            ("AddPartitionsToTxn v3 (second transaction, same epoch)", want["second_add"],
             lambda: _retrying(wire.add_partitions, tid, pid, epoch, [topic])["error"]),
            ("Produce v11 (second transaction)", want["second_produce"],
             lambda: _retrying(wire.produce, topic, pid, epoch, 1, 1, tid)),
            ("EndTxn v4 ABORT", want["end_abort"], lambda: wire.end_txn(tid, pid, epoch, False)),
        ]
        for request, expected, call in steps:
            if not check(request, expected, call()):
                return check.result
    if not check("Fetch READ_COMMITTED", want["read_committed"], _settled(wire, topic, pid)):
        return check.result
    check("OffsetFetch of the group", want["offset_fetch"], _retrying(wire.offset_fetch, group, topic))
    return check.result


def run_request_tv_rules(wire: Any, run: str) -> list[RuleResult]:
    """The three rules against a :class:`~txnspec.audit.socket_wire.SocketTxnWire`."""
    results = []
    for rule in (tv2_requests, end_txn_after_timeout, tv1_requests):
        try:
            results.append(rule(wire, run))
        except (OSError, WireError) as exc:
            name = {tv2_requests: "txn.tv2_requests", end_txn_after_timeout: "txn.tv2_end_txn_after_timeout",
                    tv1_requests: "txn.tv1_requests"}[rule]
            results.append(RuleResult("wire", name, RULES[name], note=f"stopped: {exc}"))
    return results
