"""The transaction timeout rule: a transaction its producer leaves open past ``transaction.timeout.ms`` is
aborted by the coordinator, and the producer is fenced.

The client opens a transaction with a short timeout (:data:`TIMEOUT_MS`), writes one record, and goes silent.
Kafka's coordinator finds it in its periodic scan (``TransactionCoordinator.abortTimedOutTransactions``, every
``transaction.abort.timed.out.transaction.cleanup.interval.ms``), bumps the epoch to fence the producer
(``prepareFenceProducerEpoch``) and aborts. The audit waits (bounded: the timeout plus :data:`GRACE_SECONDS`)
until read_committed shows the transaction closed, then checks, each against the spec's answer:

1. Fetch at read_committed and read_uncommitted: the record is never visible at read_committed, the last
   stable offset has reached the high watermark (the marker is written), the transaction is in the aborted
   list;
2. the silent producer's EndTxn(COMMIT) with its old epoch is refused (fenced);
3. its next transactional Produce with the old epoch is refused;
4. a new InitProducerId for the same transactional id succeeds, at the epoch after the fence.

Expected answers come from running the same requests through the spec's coordinator
(:func:`txnspec.spec.txn_expiry.abort_timed_out_transactions` for the scan) and partition, never from a table
here. A broker that never aborts the transaction violates the rule at step 1 with that said.

Left out: the timeout of a transaction in PrepareCommit/PrepareAbort (the coordinator only aborts Ongoing ones),
and the producer-id expiration of ``transactional.id.expiration.ms`` (days).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from txnspec.audit.connection import WireError
from txnspec.audit.impl_wire import ImplTxnWire
from txnspec.audit.report import RuleResult
from txnspec.audit.trace_replay import RETRIABLE, RETRIES
from txnspec.spec import coordinator as spec_coordinator
from txnspec.spec import coordinator_state as spec_coord_state
from txnspec.spec import partition as spec_partition
from txnspec.spec import txn_expiry as spec_txn_expiry
from txnspec.spec import txn_markers as spec_txn_markers
from txnspec.spec import verification as spec_verification
from txnspec.spec.errors import Errors
from txnspec.spec.messages import (
    AddPartitionsToTxn,
    EndTxn,
    InitProducerId,
    IsolationLevel,
    TransactionResult,
)

RULE = "txn.timeout_abort"
DESCRIPTION = ("a transaction left open past transaction.timeout.ms is aborted by the coordinator: never visible at "
               "read_committed, the LSO advances, the old producer's EndTxn and Produce are fenced, a new "
               "InitProducerId succeeds")
TIMEOUT_MS = 1000
GRACE_SECONDS = 12.0      # Kafka's scan runs every 10 s by default; txnspec's own Kafka every 0.5 s
POLL_SECONDS = 0.25
SPEC_TID, SPEC_PARTITION = "t1", "p0"


@dataclass(frozen=True)
class Expected:
    """The spec's answers to the rule's requests."""

    producer_id: int
    epoch: int
    produce: dict[str, Any]
    read_committed: dict[str, Any]
    read_uncommitted: dict[str, Any]
    end_txn: dict[str, Any]
    late_produce: dict[str, Any]
    init_again: dict[str, Any]
    steps: list[str] = field(default_factory=list)


def _view(state: spec_partition.PartitionState, isolation: IsolationLevel) -> dict[str, Any]:
    response = spec_partition.fetch(state, 0, isolation)
    committed = isolation is IsolationLevel.READ_COMMITTED
    return {"high_watermark": state.log_end_offset, "last_stable_offset": response.last_stable_offset,
            "aborted_transactions": sorted((a.producer_id, a.first_offset) for a in response.aborted_transactions)
            if committed else [],
            "records": list(response.records)}


def expected(transaction_version: int) -> Expected:
    """Run the rule's requests through the spec's coordinator and partition."""
    config = spec_coord_state.CoordinatorConfig(transaction_version=transaction_version)
    cs = spec_coord_state.CoordinatorState()
    init = spec_coordinator.handle_init_producer_id(cs, InitProducerId(SPEC_TID, TIMEOUT_MS), config=config)
    cs, answer = init.state, init.response
    assert answer is not None and answer.error is Errors.NONE, answer
    pid, epoch = answer.producer_id, answer.producer_epoch  # type: ignore[union-attr]
    add = spec_coordinator.handle_add_partitions_to_txn(
        cs, AddPartitionsToTxn(SPEC_TID, pid, epoch, frozenset({SPEC_PARTITION}), transaction_version), config=config)
    cs = add.state
    log, reply = spec_partition.append_data(spec_partition.PartitionState(), pid, epoch, 0, 1, True)
    produce = {"error": reply.error.value, "base_offset": reply.base_offset}
    scan = spec_txn_expiry.abort_timed_out_transactions(cs, cs.now_ms + TIMEOUT_MS + 1, config=config)
    cs = scan.state
    assert scan.markers, "the spec's scan found no timed-out transaction"
    for _, marker in scan.markers:
        log, _ = spec_partition.append_end_txn_marker(log, marker.producer_id, marker.producer_epoch,
                                                     marker.coordinator_epoch, TransactionResult.ABORT,
                                                     marker.transaction_version)
    cs = spec_txn_markers.markers_written(cs, SPEC_TID, config=config).state
    end = spec_coordinator.handle_end_txn(cs, EndTxn(SPEC_TID, pid, epoch, TransactionResult.COMMIT,
                                                     transaction_version), config=config)
    # the leader verifies a transactional Produce outside a transaction with the coordinator (KIP-890)
    verify = spec_coordinator.handle_add_partitions_to_txn(
        end.state, AddPartitionsToTxn(SPEC_TID, pid, epoch, frozenset({SPEC_PARTITION}), transaction_version),
        config=config)
    late = verify.response.error if verify.response is not None else Errors.NONE
    again = spec_coordinator.handle_init_producer_id(cs, InitProducerId(SPEC_TID, TIMEOUT_MS), config=config)
    assert again.response is not None
    init_again: dict[str, Any] = {"error": again.response.error.value}
    if again.response.error is Errors.NONE:
        init_again.update(epoch=again.response.producer_epoch)  # type: ignore[union-attr]
    return Expected(pid, epoch, produce, _view(log, IsolationLevel.READ_COMMITTED),
                    _view(log, IsolationLevel.READ_UNCOMMITTED), {"error": end.response.error.value}
                    if end.response is not None else {"error": "NONE"},
                    {"error": spec_verification.verification_error(late, True).value}, init_again)


def _committed_closed(view: dict[str, Any]) -> bool:
    return "error" not in view and view["high_watermark"] >= 2 and view["last_stable_offset"] == view["high_watermark"]


def run_timeout_rule(wire: Any, transaction_version: int, run: str, grace_seconds: float = GRACE_SECONDS,
                     sleep: Any = time.sleep) -> RuleResult:
    """The rule against a :class:`~txnspec.audit.wire_traces.TxnWire` (a socket or the
    implementation in process)."""
    result = RuleResult("wire", RULE, DESCRIPTION)
    want = expected(transaction_version)
    topic, tid = f"txnspec-{run}-timeout", f"txnspec-{run}-timeout-tid"
    sent: list[dict[str, Any]] = []

    def check(request: str, expected_answer: dict[str, Any], actual: dict[str, Any]) -> bool:
        sent.append({"request": request, "expected": expected_answer, "actual": actual})
        result.checked += 1
        if actual == expected_answer:
            return True
        result.violations += 1
        result.examples.append({"sequence": list(sent)})
        return False

    def retrying(call: Any, *args: Any) -> dict[str, Any]:
        """A coordinator still loading, or not yet the leader, is asked again, as a client does."""
        answer: dict[str, Any] = call(*args)
        for _ in range(RETRIES):
            if answer.get("error") not in RETRIABLE:
                break
            sleep(POLL_SECONDS)
            answer = call(*args)
        return answer

    try:
        wire.prepare([topic])
        got = retrying(wire.init_producer_id, tid, TIMEOUT_MS, -1, -1)
        if not check(f"InitProducerId({tid}, timeout_ms={TIMEOUT_MS})", {"error": "NONE", "epoch": want.epoch},
                     {k: v for k, v in got.items() if k != "producer_id"}):
            return result
        pid, epoch = got["producer_id"], got["epoch"]
        if transaction_version < 2 and not check("AddPartitionsToTxn(p0)", {"error": "NONE"},
                                                 retrying(wire.add_partitions, tid, pid, epoch, [topic])):
            return result
        if not check("Produce(p0, seq=0)", want.produce, retrying(wire.produce, topic, pid, epoch, 0, 1, tid)):
            return result
        deadline = time.monotonic() + TIMEOUT_MS / 1000 + grace_seconds
        view = wire.fetch(topic, True)
        while not _committed_closed(view) and time.monotonic() < deadline:
            sleep(POLL_SECONDS)
            wire.pause()
            view = wire.fetch(topic, True)
        broker_view = dict(view)
        if "aborted_transactions" in broker_view:
            broker_view["aborted_transactions"] = [(want.producer_id if p == pid else p, o)
                                                   for p, o in broker_view["aborted_transactions"]]
        if not _committed_closed(view):
            result.note = (f"the broker had not aborted the transaction {TIMEOUT_MS / 1000 + grace_seconds:.0f} s "
                           f"after its last write (transaction.timeout.ms {TIMEOUT_MS})")
        if not check("Fetch(p0, READ_COMMITTED) after waiting past the timeout", want.read_committed, broker_view):
            return result
        if not check("Fetch(p0, READ_UNCOMMITTED)", want.read_uncommitted, wire.fetch(topic, False)):
            return result
        end = wire.end_txn(tid, pid, epoch, True)
        if not check(f"EndTxn(COMMIT, epoch={epoch}) of the silent producer", want.end_txn,
                     {"error": end["error"]}):
            return result
        late = wire.produce(topic, pid, epoch, 1, 1, tid)
        if not check(f"Produce(p0, epoch={epoch}, seq=1) of the silent producer", want.late_produce,
                     {"error": late["error"]}):
            return result
        again = retrying(wire.init_producer_id, tid, TIMEOUT_MS, -1, -1)
        check("InitProducerId of a new instance", want.init_again,
              {k: v for k, v in again.items() if k != "producer_id"})
    except (OSError, WireError) as exc:
        result.note = f"stopped: {exc}"
    return result


class ImplTimeoutWire(ImplTxnWire):
    """The implementation in process, whose coordinator runs its timeout scan whenever the audit waits."""

    def pause(self) -> None:
        super().pause()
        self.now_ms += TIMEOUT_MS
        self.broker.tick(self.now_ms)
        self.broker.deliver_markers(self.now_ms)
