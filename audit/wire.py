"""Wire-level audit: the idempotent-producer rules of a partition leader, replayed over Kafka's binary
protocol and compared with the spec's answers.

Each rule is a short sequence of requests a client can send with a hand-chosen producer id, epoch and
base sequence (``InitProducerId`` without a transactional id, then ``Produce`` of record batches); the
expected answer to each step comes from running the same sequence through the spec's partition handler
(:func:`txnspec.spec.partition.append_data`), never from a table written here. A step matches when the
error code is the spec's and, for a success, the base offset is the spec's (relative to the fresh
partition's start: a duplicate must answer the original batch's offset).

The rules run through a :class:`Transport`: over a socket to a real broker (:mod:`.socket_rules`: kafka-python's
protocol structs and record batches on a :class:`~txnspec.audit.connection.BrokerConnection`), or against
recorded answers in tests (:class:`RecordedTransport`).

``InitProducerId`` with a transactional id is checked the same way against the spec's coordinator
(:func:`txnspec.spec.coordinator.handle_init_producer_id`): the epoch bump of a re-initialisation and the
KIP-360 expected epoch (current, stale, another producer id).

The transactional requests (AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn), Fetch at both
isolation levels and OffsetFetch are replayed from the conformance generator's traces by
:mod:`txnspec.audit.wire_traces`, whose ``run_wire_audit`` runs both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from txnspec.audit.connection import WireError
from txnspec.audit.connection import error_name as error_name  # importable from here, as before the split
from txnspec.audit.report import BrokerUnavailable, RuleResult
from txnspec.spec import partition as spec_partition

UNKNOWN_PID_OFFSET = 1_000_000  # a producer id the broker never allocated: ours + this


@dataclass(frozen=True)
class ProduceStep:
    """Produce ``count`` records in one batch, with the rule's producer id (``pid`` "allocated" or "unknown")."""

    base_sequence: int
    count: int = 1
    epoch: int = 0
    pid: str = "allocated"

    def describe(self) -> str:
        return (f"Produce(pid={self.pid}, epoch={self.epoch}, base_sequence={self.base_sequence}, "
                f"records={self.count})")


@dataclass(frozen=True)
class WireRule:
    name: str
    description: str
    steps: tuple[ProduceStep, ...]


def _batches(n: int) -> tuple[ProduceStep, ...]:
    return tuple(ProduceStep(i) for i in range(n))


RULES: tuple[WireRule, ...] = (
    WireRule("produce.in_order", "batches in sequence are appended at consecutive offsets",
             (ProduceStep(0, 2), ProduceStep(2), ProduceStep(3, 3))),
    WireRule("produce.duplicate_of_last_batch", "a retry of the last batch answers its original offset, "
             "appends nothing", (ProduceStep(0, 2), ProduceStep(0, 2), ProduceStep(2))),
    WireRule("produce.duplicate_within_last_5", "a retry of one of the last 5 batches answers its original offset",
             (*_batches(4), ProduceStep(1), ProduceStep(4))),
    WireRule("produce.duplicate_beyond_last_5", "a retry of a batch older than the last 5 is out of order",
             (*_batches(7), ProduceStep(0))),
    WireRule("produce.sequence_gap", "a gap in the sequence is OUT_OF_ORDER_SEQUENCE_NUMBER",
             (ProduceStep(0), ProduceStep(5))),
    WireRule("produce.lower_epoch", "a batch with an epoch below the producer's is INVALID_PRODUCER_EPOCH",
             (ProduceStep(0), ProduceStep(0, epoch=1), ProduceStep(1, epoch=0))),
    WireRule("produce.higher_epoch_seq0", "a new epoch starts at sequence 0",
             (ProduceStep(0), ProduceStep(1), ProduceStep(0, epoch=1))),
    WireRule("produce.higher_epoch_nonzero_seq", "a new epoch that does not start at sequence 0 is out of order",
             (ProduceStep(0), ProduceStep(3, epoch=1))),
    WireRule("produce.unknown_producer_id", "a producer id with no state on the partition must start at "
             "sequence 0 (KIP-360: no UNKNOWN_PRODUCER_ID)", (ProduceStep(4, pid="unknown"),
                                                               ProduceStep(0, pid="unknown"))),
)


@dataclass(frozen=True)
class Answer:
    error: str
    base_offset: int = -1

    def to_json(self) -> dict[str, Any]:
        return {"error": self.error, **({"base_offset": self.base_offset} if self.error == "NONE" else {})}


def expected_answers(rule: WireRule) -> list[Answer]:
    """The spec's answers to the rule's steps, from a fresh partition."""
    state = spec_partition.PartitionState()
    answers = []
    for step in rule.steps:
        pid = 1 if step.pid == "allocated" else 1 + UNKNOWN_PID_OFFSET
        state, response = spec_partition.append_data(state, pid, step.epoch, step.base_sequence, step.count, False)
        answers.append(Answer(response.error.name, response.base_offset))
    return answers


class Transport(Protocol):
    """What the rules need from a broker: a fresh partition, a producer id, and a produce."""

    def fresh_partition(self, rule: str) -> str: ...
    def init_producer_id(self) -> tuple[int, int]: ...
    def produce(self, topic: str, producer_id: int, epoch: int, base_sequence: int, count: int) -> Answer: ...


@dataclass
class RecordedTransport:
    """Answers recorded from a broker, per rule, in step order (test fixtures)."""

    answers: dict[str, list[Answer]]
    init_answers: dict[str, list[InitAnswer]] = field(default_factory=dict)
    _current: list[Answer] = field(default_factory=list)

    def fresh_partition(self, rule: str) -> str:
        self._current = list(self.answers[rule])
        return rule

    def init_producer_id(self) -> tuple[int, int]:
        return 1000, 0

    def produce(self, topic: str, producer_id: int, epoch: int, base_sequence: int, count: int) -> Answer:
        return self._current.pop(0)

    def init_transactional(self, rule: str, transactional_id: str | None, producer_id: int, epoch: int,
                           timeout_ms: int) -> InitAnswer:
        return self.init_answers[rule].pop(0)


def run_rules(transport: Transport, rules: tuple[WireRule, ...] = RULES) -> list[RuleResult]:
    results = []
    for rule in rules:
        result = RuleResult("wire", rule.name, rule.description)
        expected = expected_answers(rule)
        try:
            topic = transport.fresh_partition(rule.name)
            producer_id, _ = transport.init_producer_id()
        except (OSError, BrokerUnavailable, WireError) as exc:
            result.note = f"could not set up: {exc}"
            results.append(result)
            continue
        base: int | None = None
        sent: list[dict[str, Any]] = []
        for step, want in zip(rule.steps, expected, strict=True):
            pid = producer_id if step.pid == "allocated" else producer_id + UNKNOWN_PID_OFFSET
            try:
                got = transport.produce(topic, pid, step.epoch, step.base_sequence, step.count)
            except (OSError, WireError) as exc:
                result.note = f"step {len(sent) + 1} failed: {exc}"
                break
            if got.error == "NONE" and base is None:
                base = got.base_offset  # the partition's first offset: compare relative offsets
            relative = Answer(got.error, got.base_offset - (base or 0)) if got.error == "NONE" else got
            sent.append({"request": step.describe(), "expected": want.to_json(), "actual": relative.to_json()})
            result.checked += 1
            if relative.to_json() != want.to_json():
                result.violations += 1
                result.examples.append({"sequence": sent})
                break
        results.append(result)
    return results


# --- InitProducerId with a transactional id -------------------------------------------------------------

@dataclass(frozen=True)
class InitStep:
    """``InitProducerId(transactional_id, expected, timeout)``: ``expected`` is none, the current (pid, epoch), a
    stale epoch of the current pid, the current epoch of a producer id the coordinator never gave out, or the
    current producer id without an epoch; the transactional id is the rule's own, none (an idempotent producer)
    or empty."""

    expected: str = "none"  # none | current | stale | other-pid | pid-only
    transactional_id: str = "own"  # own | none | empty
    timeout_ms: int = 60_000

    def describe(self) -> str:
        tid = {"own": "transactional_id", "none": "null", "empty": '""'}[self.transactional_id]
        timeout = f", timeout_ms={self.timeout_ms}" if self.timeout_ms != 60_000 else ""
        return f"InitProducerId({tid}, expected={self.expected}{timeout})"

    def tid(self, own: str) -> str | None:
        return {"own": own, "none": None, "empty": ""}[self.transactional_id]


@dataclass(frozen=True)
class InitRule:
    name: str
    description: str
    steps: tuple[InitStep, ...]


INIT_RULES: tuple[InitRule, ...] = (
    InitRule("init_producer_id.first_and_bump", "a new transactional id starts at epoch 0; initialising again "
             "keeps the producer id and bumps the epoch", (InitStep(), InitStep())),
    InitRule("init_producer_id.expected_current_epoch", "KIP-360: with the current (pid, epoch) expected, the "
             "epoch is bumped", (InitStep(), InitStep("current"))),
    InitRule("init_producer_id.expected_stale_epoch", "KIP-360: an expected epoch older than the current one is "
             "fenced", (InitStep(), InitStep(), InitStep("stale"))),
    InitRule("init_producer_id.expected_other_producer_id", "KIP-360: an expected producer id that is not the "
             "current one is fenced", (InitStep(), InitStep("other-pid"))),
    InitRule("init_producer_id.idempotent", "without a transactional id, each call gives a new producer id at "
             "epoch 0", (InitStep(transactional_id="none"), InitStep(transactional_id="none"))),
    InitRule("init_producer_id.empty_transactional_id", "an empty transactional id is INVALID_REQUEST",
             (InitStep(transactional_id="empty"),)),
    InitRule("init_producer_id.producer_id_without_epoch", "an expected producer id without an epoch is "
             "INVALID_REQUEST", (InitStep(), InitStep("pid-only"))),
    InitRule("init_producer_id.transaction_timeout", "a transaction timeout of 0 or above "
             "transaction.max.timeout.ms (900000) is INVALID_TRANSACTION_TIMEOUT",
             (InitStep(timeout_ms=0), InitStep(timeout_ms=900_001), InitStep())),
)


@dataclass(frozen=True)
class InitAnswer:
    error: str
    producer_id: int = -1
    epoch: int = -1

    def relative_to(self, first_pid: int | None) -> dict[str, Any]:
        """The answer with the producer id said relative to the rule's first one (ids differ per broker)."""
        if self.error != "NONE":
            return {"error": self.error}
        same = first_pid is None or self.producer_id == first_pid
        return {"error": "NONE", "epoch": self.epoch, "producer_id": "first" if same else "other"}


def _expected_pid_epoch(step: InitStep, last: InitAnswer | None) -> tuple[int, int]:
    if step.expected == "none" or last is None or last.error != "NONE":
        return -1, -1
    if step.expected == "current":
        return last.producer_id, last.epoch
    if step.expected == "stale":
        return last.producer_id, max(0, last.epoch - 1)
    if step.expected == "pid-only":
        return last.producer_id, -1
    return last.producer_id + UNKNOWN_PID_OFFSET, last.epoch


def expected_init_answers(rule: InitRule) -> list[InitAnswer]:
    """The spec coordinator's answers to the rule's steps, for a transactional id it has never seen."""
    from txnspec.spec import coordinator as spec_coordinator
    from txnspec.spec import coordinator_state as spec_coord_state
    from txnspec.spec.messages import InitProducerId, InitProducerIdResponse

    state = spec_coord_state.CoordinatorState()
    answers: list[InitAnswer] = []
    for step in rule.steps:
        pid, epoch = _expected_pid_epoch(step, answers[-1] if answers else None)
        result = spec_coordinator.handle_init_producer_id(state, InitProducerId(step.tid("t"), step.timeout_ms,
                                                                                pid, epoch))
        state = result.state
        r = result.response
        assert isinstance(r, InitProducerIdResponse)
        answers.append(InitAnswer(r.error.name, r.producer_id, r.producer_epoch))
    return answers


def _first_producer_id(answers: list[InitAnswer]) -> int | None:
    """The producer id of the first answer that gave one: the others are said relative to it."""
    return next((a.producer_id for a in answers if a.error == "NONE"), None)


class InitTransport(Protocol):
    def init_transactional(self, rule: str, transactional_id: str | None, producer_id: int, epoch: int,
                           timeout_ms: int) -> InitAnswer: ...


def run_init_rules(transport: InitTransport, run: str, rules: tuple[InitRule, ...] = INIT_RULES
                   ) -> list[RuleResult]:
    results = []
    for rule in rules:
        result = RuleResult("wire", rule.name, rule.description)
        expected = expected_init_answers(rule)
        tid = f"txnspec-wire-{run}-{rule.name}"
        got: list[InitAnswer] = []
        sent: list[dict[str, Any]] = []
        for step, want in zip(rule.steps, expected, strict=True):
            pid, epoch = _expected_pid_epoch(step, got[-1] if got else None)
            try:
                answer = transport.init_transactional(rule.name, step.tid(tid), pid, epoch, step.timeout_ms)
            except (OSError, WireError) as exc:
                result.note = f"step {len(sent) + 1} failed: {exc}"
                break
            got.append(answer)
            actual = answer.relative_to(_first_producer_id(got))
            wanted = want.relative_to(_first_producer_id(expected))
            sent.append({"request": step.describe(), "expected": wanted, "actual": actual})
            result.checked += 1
            if actual != wanted:
                result.violations += 1
                result.examples.append({"sequence": sent})
                break
        results.append(result)
    return results
