"""The RocketMQ system model: transactional producers, one broker and a one-way network, composed into the
state machine the checker explores.

System
    Each transaction ``k`` is one message (the 5.x client's ``TransactionImpl.MAX_MESSAGE_NUM`` is 1 and
    the classic client sends one message per ``sendMessageInTransaction``). Its producer
    (``DefaultMQProducerImpl``) sends the half message synchronously, runs the local transaction
    (``TransactionListener.executeLocalTransaction``), and sends a **one-way** END_TRANSACTION with the
    result (none for ``UNKNOW``). A local transaction that answered ``UNKNOW`` finishes later, by the
    application's choice. A CHECK from the broker is answered by ``checkLocalTransaction`` with another
    one-way END_TRANSACTION for the copy the check named. The broker is :mod:`.broker`.

    * Listener (the variant): ``consistent`` answers a check with the local transaction's outcome and
      ``UNKNOW`` while it is undecided; ``inconsistent`` answers COMMIT or ROLLBACK while the local
      transaction is still undecided (a check that reads uncommitted state or defaults), the case of
      issue #8158.
    * Environment, each within the scenario's budget: lose or duplicate a one-way message (END or
      CHECK), a broker crash that loses the in-memory op batch, and a half send whose reply was lost so
      that the client's retry stores a second half (``retryTimesWhenSendFailed``; the first is an orphan).

Assumes
    The network is a bag (any delivery order: delay and reordering). The half send is synchronous and
    its reply reaches the producer unless the ``half_retry`` fault says otherwise. Time is abstract
    (see :mod:`.broker`). The producer group is reachable unless a CHECK is lost.

Leaves out
    Several brokers and queues (a half retry stores both halves on the one broker), producer crash and
    restart, delayed-level messages, and what consumers do after reading (redelivery is at-least-once
    anyway and not the transaction's business).

Ghost state (read only by the properties): the offsets committed and rolled back by an accepted END,
the keys an END has resolved, and the keys checked again after they were resolved.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from txnspec.spec.environment import Action, FaultLedger, count
from txnspec.spec.rocketmq import broker as broker_mod
from txnspec.spec.rocketmq.broker import Broker, CheckStep, EndType

FAULTS = ("loss", "duplicate", "crash", "half_retry")


class Local(enum.Enum):
    """The application's local transaction for a key."""

    NOT_RUN = "not run"
    PENDING = "pending"        # executeLocalTransaction returned UNKNOW: it finishes later
    COMMITTED = "committed"
    ROLLED_BACK = "rolled back"


class Phase(enum.Enum):
    INIT = "init"
    HALF_SENT = "half sent"    # SEND_OK, the half's offset is known
    ENDED = "ended"            # the local transaction ran and endTransaction was called


@dataclass(frozen=True, slots=True)
class Txn:
    key: int
    phase: Phase = Phase.INIT
    offset: int | None = None  # the half the client's END names (sendResult.queueOffset)
    local: Local = Local.NOT_RUN
    told: str | None = None    # TransactionSendResult.localTransactionState returned to the application


@dataclass(frozen=True, slots=True, order=True)
class EndTransaction:
    """One-way END_TRANSACTION (``commitOrRollback``, ``tranStateTableOffset``/``commitLogOffset``)."""

    key: int
    offset: int
    end: str                   # EndType value; a str so that messages order
    from_check: bool

    @property
    def kind(self) -> str:
        return "deliver END_TRANSACTION"

    def __str__(self) -> str:
        origin = ", fromTransactionCheck" if self.from_check else ""
        return f"END_TRANSACTION(k{self.key}, offset {self.offset}, {EndType(self.end)}{origin})"


@dataclass(frozen=True, slots=True, order=True)
class CheckTransactionState:
    """One-way CHECK_TRANSACTION_STATE for the half copy at ``offset``."""

    key: int
    offset: int

    @property
    def kind(self) -> str:
        return "deliver CHECK_TRANSACTION_STATE"

    def __str__(self) -> str:
        return f"CHECK_TRANSACTION_STATE(k{self.key}, offset {self.offset})"


Message = EndTransaction | CheckTransactionState


@dataclass(frozen=True, slots=True)
class Ghost:
    committed: frozenset[int] = frozenset()    # half offsets an accepted COMMIT named
    rolled_back: frozenset[int] = frozenset()  # half offsets an accepted ROLLBACK named
    resolved: frozenset[int] = frozenset()     # keys some accepted END resolved
    late_checks: frozenset[int] = frozenset()  # keys checked again after they were resolved


@dataclass(frozen=True, slots=True)
class RocketState(FaultLedger):
    broker: Broker
    txns: tuple[Txn, ...]
    network: tuple[Message, ...] = ()
    faults_used: tuple[tuple[str, int], ...] = ()
    ghost: Ghost = field(default_factory=Ghost)


@dataclass(frozen=True)
class RocketConfig:
    """What a scenario and a variant fix: how many transactions, the check bound, the fault budgets, and
    whether the application's check listener is consistent with its local transaction."""

    transactions: int = 1
    check_max: int = 2                   # transactionCheckMax (15 in RocketMQ; small here)
    faults: tuple[tuple[str, int], ...] = ()
    consistent_listener: bool = True

    def budget(self, fault: str) -> int:
        return count(self.faults, fault)


def initial_state(config: RocketConfig) -> RocketState:
    return RocketState(Broker(), tuple(Txn(k) for k in range(config.transactions)))


# --- helpers ---------------------------------------------------------------------------------------

def _bag_add(network: tuple[Message, ...], *messages: Message) -> tuple[Message, ...]:
    return tuple(sorted((*network, *messages), key=lambda m: (type(m).__name__, m)))


def _bag_remove(network: tuple[Message, ...], index: int) -> tuple[Message, ...]:
    return network[:index] + network[index + 1:]


def _with_txn(state: RocketState, txn: Txn) -> tuple[Txn, ...]:
    return tuple(txn if t.key == txn.key else t for t in state.txns)


_LOCAL_RESULTS = {"COMMIT_MESSAGE": (Local.COMMITTED, EndType.COMMIT),
                  "ROLLBACK_MESSAGE": (Local.ROLLED_BACK, EndType.ROLLBACK),
                  "UNKNOW": (Local.PENDING, None)}


def check_answer(config: RocketConfig, local: Local) -> tuple[str, ...]:
    """What ``checkLocalTransaction`` may answer for a local transaction in state ``local``."""
    if local is Local.COMMITTED:
        return ("COMMIT_MESSAGE",)
    if local is Local.ROLLED_BACK:
        return ("ROLLBACK_MESSAGE",)
    return ("UNKNOW",) if config.consistent_listener else ("COMMIT_MESSAGE", "ROLLBACK_MESSAGE")


# --- actions ---------------------------------------------------------------------------------------

def send_half(config: RocketConfig, state: RocketState) -> Iterator[tuple[Action, RocketState]]:
    """``sendMessageInTransaction``: the synchronous half send (SEND_OK); with the ``half_retry`` fault,
    a first attempt stores a half whose reply is lost and the retry stores a second one."""
    for txn in state.txns:
        if txn.phase is not Phase.INIT:
            continue
        broker, offset = broker_mod.put_half(state.broker, txn.key)
        sent = replace(txn, phase=Phase.HALF_SENT, offset=offset)
        yield (Action("sendMessageInTransaction", f"sendMessageInTransaction(k{txn.key}) -> half at {offset}"),
               replace(state, broker=broker, txns=_with_txn(state, sent)))
        if state.used("half_retry") < config.budget("half_retry"):
            broker2, retried = broker_mod.put_half(broker, txn.key)
            yield (Action("half send retried", f"half send of k{txn.key} retried: orphan at {offset}, "
                          f"half at {retried}"),
                   replace(state, broker=broker2, txns=_with_txn(state, replace(sent, offset=retried)),
                           faults_used=state.spend("half_retry")))


def execute_local_transaction(state: RocketState) -> Iterator[tuple[Action, RocketState]]:
    """``executeLocalTransaction`` then ``endTransaction``: a one-way END unless the result is UNKNOW."""
    for txn in state.txns:
        if txn.phase is not Phase.HALF_SENT or txn.offset is None:
            continue
        for result, (local, end) in _LOCAL_RESULTS.items():
            ended = replace(txn, phase=Phase.ENDED, local=local, told=result)
            network = state.network
            if end is not None:
                network = _bag_add(network, EndTransaction(txn.key, txn.offset, end.value, False))
            yield (Action("executeLocalTransaction", f"executeLocalTransaction(k{txn.key}) = {result}"),
                   replace(state, txns=_with_txn(state, ended), network=network))


def local_transaction_finishes(state: RocketState) -> Iterator[tuple[Action, RocketState]]:
    """A local transaction that answered UNKNOW commits or rolls back later (the application's choice)."""
    for txn in state.txns:
        if txn.local is not Local.PENDING:
            continue
        for local in (Local.COMMITTED, Local.ROLLED_BACK):
            yield (Action("local transaction finishes", f"local transaction k{txn.key} {local.value}"),
                   replace(state, txns=_with_txn(state, replace(txn, local=local))))


def deliver(config: RocketConfig, state: RocketState) -> Iterator[tuple[Action, RocketState]]:
    seen: set[Message] = set()
    for i, message in enumerate(state.network):
        if message in seen:
            continue
        seen.add(message)
        rest = replace(state, network=_bag_remove(state.network, i))
        if isinstance(message, EndTransaction):
            yield _deliver_end(rest, message)
        else:
            yield from _deliver_check(config, rest, message)


def _deliver_end(state: RocketState, message: EndTransaction) -> tuple[Action, RocketState]:
    """``EndTransactionProcessor.processRequest``; its response is never read (one-way)."""
    outcome = broker_mod.end_transaction(state.broker, message.key, message.offset, EndType(message.end))
    ghost = state.ghost
    if outcome.op is not None:
        committed = ghost.committed | {message.offset} if outcome.put_real else ghost.committed
        rolled_back = ghost.rolled_back if outcome.put_real else ghost.rolled_back | {message.offset}
        ghost = replace(ghost, committed=committed, rolled_back=rolled_back, resolved=ghost.resolved | {message.key})
    return Action(message.kind, f"deliver {message}"), replace(state, broker=outcome.broker, ghost=ghost)


def _deliver_check(config: RocketConfig, state: RocketState, message: CheckTransactionState
                   ) -> Iterator[tuple[Action, RocketState]]:
    """``checkTransactionState`` → ``checkLocalTransaction`` → one-way END for the copy, fromTransactionCheck."""
    txn = state.txns[message.key]
    for answer in check_answer(config, txn.local):
        _, end = _LOCAL_RESULTS[answer]
        network = state.network
        if end is not None:
            network = _bag_add(network, EndTransaction(message.key, message.offset, end.value, True))
        yield (Action(message.kind, f"deliver {message}: checkLocalTransaction = {answer}"),
               replace(state, network=network))


def check_service(config: RocketConfig, state: RocketState) -> Iterator[tuple[Action, RocketState]]:
    """``TransactionalMessageCheckService``: one step of ``check`` at the half consume offset."""
    outcome = broker_mod.check_step(state.broker, config.check_max)
    if outcome is None:
        return
    entry = state.broker.half_queue[outcome.offset]
    new = replace(state, broker=outcome.broker)
    if outcome.step is CheckStep.CHECKED:
        assert outcome.copy_offset is not None
        late = entry.key in state.ghost.resolved
        new = replace(new, network=_bag_add(state.network, CheckTransactionState(entry.key, outcome.copy_offset)),
                      ghost=replace(state.ghost, late_checks=state.ghost.late_checks | {entry.key})
                      if late else state.ghost)
        text = f"check half {outcome.offset} (k{entry.key}): re-put as {outcome.copy_offset}, CHECK sent"
    else:
        text = f"check half {outcome.offset} (k{entry.key}): {outcome.step.value}"
    yield Action("check", text), new


def flush_op_batch(state: RocketState) -> Iterator[tuple[Action, RocketState]]:
    if state.broker.op_batch:
        yield (Action("write op batch", f"write op records {sorted(state.broker.op_batch)}"),
               replace(state, broker=broker_mod.flush_op_batch(state.broker)))


def faults(config: RocketConfig, state: RocketState) -> Iterator[tuple[Action, RocketState]]:
    seen: set[Message] = set()
    for i, message in enumerate(state.network):
        if message in seen:
            continue
        seen.add(message)
        if state.used("loss") < config.budget("loss"):
            yield (Action("lose", f"lose {message}"),
                   replace(state, network=_bag_remove(state.network, i), faults_used=state.spend("loss")))
        if state.used("duplicate") < config.budget("duplicate"):
            yield (Action("duplicate", f"duplicate {message}"),
                   replace(state, network=_bag_add(state.network, message), faults_used=state.spend("duplicate")))
    if state.broker.op_batch and state.used("crash") < config.budget("crash"):
        yield (Action("broker crash", f"broker crash: op records {sorted(state.broker.op_batch)} lost"),
               replace(state, broker=broker_mod.crash(state.broker), faults_used=state.spend("crash")))


ACTION_KINDS = ("sendMessageInTransaction", "half send retried", "executeLocalTransaction",
                "local transaction finishes", "deliver END_TRANSACTION", "deliver CHECK_TRANSACTION_STATE",
                "check", "write op batch", "lose", "duplicate", "broker crash")
# the protocol's own steps; never the application's choices or the faults
FAIR_KINDS = frozenset({"deliver END_TRANSACTION", "deliver CHECK_TRANSACTION_STATE", "check", "write op batch"})


def next_steps(config: RocketConfig, state: RocketState) -> Iterator[tuple[Action, RocketState]]:
    yield from send_half(config, state)
    yield from execute_local_transaction(state)
    yield from local_transaction_finishes(state)
    yield from deliver(config, state)
    yield from check_service(config, state)
    yield from flush_op_batch(state)
    yield from faults(config, state)


def is_final(state: RocketState) -> bool:
    """Quiet: nothing in flight, the check loop has read everything, no op record in memory, every
    transaction ended and decided."""
    return (not state.network and state.broker.half_offset == len(state.broker.half_queue)
            and not state.broker.op_batch
            and all(t.phase is Phase.ENDED and t.local is not Local.PENDING for t in state.txns))


def describe_state(state: RocketState) -> str:
    b = state.broker
    lines = [f"k{t.key}: {t.phase.value}, half {t.offset}, local {t.local.value}, told {t.told}" for t in state.txns]
    lines.append("half queue: " + ", ".join(f"{q}:k{e.key}#{e.check_times}" for q, e in enumerate(b.half_queue))
                 + f" | consume offset {b.half_offset}")
    lines.append(f"op records: written {sorted(b.op_durable)}, in memory {sorted(b.op_batch)}")
    lines.append(f"real topic: {[f'k{k}' for k in b.real_queue]}; discarded {list(b.discarded)}")
    if state.network:
        lines.append("in flight: " + "; ".join(str(m) for m in state.network))
    return "\n".join(lines)
