"""The Pulsar system model: transaction clients, one transaction coordinator, topic partitions with their
transaction buffers, one subscription with pending acks, and the network.

System
    Each client (``TransactionImpl`` with one producer and one consumer) opens a transaction
    (``NEW_TXN``), sends one message to each partition of the scenario (``ADD_PARTITION_TO_TXN`` then
    ``SEND``), optionally acks the input message in the transaction (``ADD_SUBSCRIPTION_TO_TXN`` then
    ``ACK``), and commits or aborts (``END_TXN``). ``commit()`` waits for every send and ack to answer and
    turns into an abort when one failed (``hasOpsFailed``); a client whose timer fired (``TIME_OUT``)
    can neither commit nor abort. The END answer decides the client's state: success →
    COMMITTED/ABORTED, ``TransactionNotFound``/``InvalidTxnStatus`` → ERROR (#19629), a timeout or a lost
    coordinator → still COMMITTING, and the application calls ``commit()`` again.

    The coordinator is :mod:`.coordinator`, the participants :mod:`.buffer`. The coordinator's timeout
    aborts an OPEN transaction (a fair action: the timer always fires eventually).

    Environment, each within the scenario's budget: duplicate a client request (a stray retransmission
    after a reconnect), lose an END answer (the client's request times out), a coordinator crash with
    recovery from its log.

Assumes
    ``NEW_TXN``, ``ADD_PARTITION_TO_TXN`` and ``ADD_SUBSCRIPTION_TO_TXN`` are answered at once (the Java
    client waits for them before the send or ack they guard); the coordinator's marker RPCs to the
    participants are answered at once and never lost (the TC retries them without bound, #23550, so
    losing one only delays). Sends, acks and END requests travel in a bag: any order.

Leaves out
    Several coordinators, broker crashes and buffer recovery, deleted topics and subscriptions, TC
    unload on ledger fencing, batch and cumulative acks, user-set sequence ids (the dedup
    counterexample of RULES §2.10 P-S6).

Ghost state: each transaction's decision (set when the coordinator leaves OPEN), and whether a COMMIT
END was answered with an error although the transaction had been committed.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from txnspec.spec.environment import Action, FaultLedger, count
from txnspec.spec.pulsar import buffer as buf
from txnspec.spec.pulsar import coordinator as tcm
from txnspec.spec.pulsar.coordinator import SUBSCRIPTION, TxnAction

FAULTS = ("duplicate", "loss", "tc_crash", "client_timeout")


class ClientState(enum.Enum):
    """``Transaction.State``, with NONE before ``newTransaction``."""

    NONE = "NONE"
    OPEN = "OPEN"
    COMMITTING = "COMMITTING"
    ABORTING = "ABORTING"
    COMMITTED = "COMMITTED"
    ABORTED = "ABORTED"
    ERROR = "ERROR"
    TIME_OUT = "TIME_OUT"


@dataclass(frozen=True, slots=True)
class Client:
    index: int
    state: ClientState = ClientState.NONE
    txn: int | None = None
    to_send: tuple[str, ...] = ()
    to_ack: bool = False
    awaiting: frozenset[int] = frozenset()   # op numbers of sends and acks not answered yet
    next_op: int = 0                         # op number = message number = producer sequence id
    ops_failed: bool = False
    end_in_flight: bool = False


@dataclass(frozen=True, slots=True, order=True)
class Msg:
    """A message in flight: ``kind`` says what it is; unused fields are -1 / ""."""

    kind: str          # "SEND", "ACK", "END_TXN", "SEND_RECEIPT", "ACK_RESPONSE", "END_TXN_RESPONSE"
    client: int
    txn: int = -1
    partition: str = ""
    op: int = -1
    result: str = ""   # an action for END_TXN; "ok", an error name or "Timeout" for responses

    def __str__(self) -> str:
        if self.kind == "SEND":
            return f"SEND(txn {self.txn}, {self.partition}, message {self.op})"
        if self.kind == "ACK":
            return f"ACK(txn {self.txn}, input 0)"
        if self.kind == "END_TXN":
            return f"END_TXN(txn {self.txn}, {self.result})"
        return f"{self.kind}(client {self.client}, {'op ' + str(self.op) + ', ' if self.op >= 0 else ''}{self.result})"


REQUESTS = frozenset({"SEND", "ACK", "END_TXN"})


@dataclass(frozen=True, slots=True)
class Ghost:
    decisions: tuple[tuple[int, str], ...] = ()   # txn -> COMMIT/ABORT, when it left OPEN
    end_error_after_decision: bool = False

    def decision(self, txn: int) -> str | None:
        return dict(self.decisions).get(txn)


@dataclass(frozen=True, slots=True)
class PulsarState(FaultLedger):
    tc: tcm.Coordinator
    buffers: tuple[tuple[str, buf.TransactionBuffer], ...]
    subscription: buf.Subscription
    clients: tuple[Client, ...]
    network: tuple[Msg, ...] = ()
    faults_used: tuple[tuple[str, int], ...] = ()
    ghost: Ghost = field(default_factory=Ghost)

    def buffer(self, partition: str) -> buf.TransactionBuffer:
        return dict(self.buffers)[partition]


@dataclass(frozen=True)
class PulsarConfig:
    clients: int = 1
    partitions: tuple[str, ...] = ("p0",)
    ack_input: bool = False
    faults: tuple[tuple[str, int], ...] = ()
    dedup: bool = False

    def budget(self, fault: str) -> int:
        return count(self.faults, fault)


def initial_state(config: PulsarConfig) -> PulsarState:
    return PulsarState(tcm.Coordinator(), tuple((p, buf.TransactionBuffer()) for p in config.partitions),
                       buf.Subscription(), tuple(Client(i) for i in range(config.clients)))


# --- helpers ---------------------------------------------------------------------------------------

def _send(network: tuple[Msg, ...], *messages: Msg) -> tuple[Msg, ...]:
    return tuple(sorted((*network, *messages)))


def _with_client(state: PulsarState, client: Client) -> tuple[Client, ...]:
    return tuple(client if c.index == client.index else c for c in state.clients)


def _owner(state: PulsarState, txn: int) -> int:
    return next(c.index for c in state.clients if c.txn == txn)


def _with_buffer(state: PulsarState, partition: str, tb: buf.TransactionBuffer) -> PulsarState:
    return replace(state, buffers=tuple((p, tb if p == partition else b) for p, b in state.buffers))


def _decide(ghost: Ghost, before: tcm.Coordinator, after: tcm.Coordinator, txn: int, action: TxnAction) -> Ghost:
    meta = before.meta(txn)
    if meta is not None and meta.status is tcm.OPEN and ghost.decision(txn) is None and after.meta(txn) != meta:
        return replace(ghost, decisions=tuple(sorted((*ghost.decisions, (txn, action.value)))))
    return ghost


def _apply_end(state: PulsarState, txn: int, action: TxnAction, *, waiter: bool) -> PulsarState:
    """Run ``endTransaction`` and deliver its markers to the participants (answered at once)."""
    result = tcm.end_transaction(state.tc, txn, action, waiter=waiter)
    ghost = _decide(state.ghost, state.tc, result.tc, txn, action)
    owner = _owner(state, txn)
    if result.error is not None:
        if not waiter:
            return replace(state, ghost=ghost)
        if action is TxnAction.COMMIT and ghost.decision(txn) == action.value:
            ghost = replace(ghost, end_error_after_decision=True)
        return replace(state, ghost=ghost,
                       network=_send(state.network, Msg("END_TXN_RESPONSE", owner, txn, result=result.error)))
    state = replace(state, tc=result.tc, ghost=ghost)
    state = _answer(state, owner, txn, result.answered)
    return _run_markers(state, result.markers)


def _answer(state: PulsarState, owner: int, txn: int, count: int) -> PulsarState:
    if not count:
        return state
    answers = [Msg("END_TXN_RESPONSE", owner, txn, result="ok")] * count
    return replace(state, network=_send(state.network, *answers))


def _run_markers(state: PulsarState, markers: tuple[tcm.EndMarker, ...]) -> PulsarState:
    for marker in markers:
        if marker.participant == SUBSCRIPTION:
            state = replace(state, subscription=buf.end_on_subscription(state.subscription, marker.txn, marker.action))
        else:
            tb = buf.end_on_partition(state.buffer(marker.participant), marker.txn, marker.action,
                                      marker.low_watermark)
            state = _with_buffer(state, marker.participant, tb)
        done = tcm.participant_done(state.tc, marker.txn, marker.participant)
        state = _answer(replace(state, tc=done.tc), _owner(state, marker.txn), marker.txn, done.answered)
    return state


# --- client actions --------------------------------------------------------------------------------

def client_steps(config: PulsarConfig, state: PulsarState) -> Iterator[tuple[Action, PulsarState]]:
    for c in state.clients:
        if c.state is ClientState.NONE:
            tc, txn = tcm.new_transaction(state.tc)
            opened = replace(c, state=ClientState.OPEN, txn=txn, to_send=config.partitions, to_ack=config.ack_input)
            yield (Action("newTransaction", f"client {c.index}: newTransaction -> txn {txn}"),
                   replace(state, tc=tc, clients=_with_client(state, opened)))
            continue
        if c.state is ClientState.OPEN and c.txn is not None:
            yield from _client_ops(state, c, c.txn)
            if not c.to_send and not c.to_ack and not c.awaiting:
                yield _end(state, c, c.txn, "commit")
                yield _end(state, c, c.txn, "abort")
            if state.used("client_timeout") < config.budget("client_timeout"):
                timed_out = replace(c, state=ClientState.TIME_OUT)
                yield (Action("client timer fires", f"client {c.index}: transaction timer fires (TIME_OUT)"),
                       replace(state, clients=_with_client(state, timed_out),
                               faults_used=state.spend("client_timeout")))
        if c.state is ClientState.COMMITTING and not c.end_in_flight and c.txn is not None:
            yield _end(state, c, c.txn, "commit")


def _client_ops(state: PulsarState, c: Client, txn: int) -> Iterator[tuple[Action, PulsarState]]:
    for partition in c.to_send:
        tc, error = tcm.add_partition(state.tc, txn, partition)
        rest = tuple(p for p in c.to_send if p != partition)
        if error is not None:
            failed = replace(c, to_send=rest, ops_failed=True)
            yield (Action("send", f"client {c.index}: ADD_PARTITION_TO_TXN({partition}) fails: {error}"),
                   replace(state, clients=_with_client(state, failed)))
            continue
        sent = replace(c, to_send=rest, awaiting=c.awaiting | {c.next_op}, next_op=c.next_op + 1)
        msg = Msg("SEND", c.index, txn, partition, c.next_op)
        yield (Action("send", f"client {c.index}: send to {partition} in txn {txn}"),
               replace(state, tc=tc, clients=_with_client(state, sent), network=_send(state.network, msg)))
    if c.to_ack:
        tc, error = tcm.add_partition(state.tc, txn, SUBSCRIPTION)
        if error is not None:
            failed = replace(c, to_ack=False, ops_failed=True)
            yield (Action("ack", f"client {c.index}: ADD_SUBSCRIPTION_TO_TXN fails: {error}"),
                   replace(state, clients=_with_client(state, failed)))
            return
        acking = replace(c, to_ack=False, awaiting=c.awaiting | {c.next_op}, next_op=c.next_op + 1)
        msg = Msg("ACK", c.index, txn, op=c.next_op)
        yield (Action("ack", f"client {c.index}: ack input 0 in txn {txn}"),
               replace(state, tc=tc, clients=_with_client(state, acking), network=_send(state.network, msg)))


def _end(state: PulsarState, c: Client, txn: int, call: str) -> tuple[Action, PulsarState]:
    """``commit()`` (an abort when an op failed) or ``abort()``: one END_TXN to the coordinator."""
    action = TxnAction.ABORT if call == "abort" or c.ops_failed else TxnAction.COMMIT
    ending = ClientState.COMMITTING if action is TxnAction.COMMIT else ClientState.ABORTING
    msg = Msg("END_TXN", c.index, txn, result=action.value)
    text = f"client {c.index}: {call}()" + (" -> abort (an op failed)" if call == "commit" and c.ops_failed else "")
    return (Action(call, text),
            replace(state, clients=_with_client(state, replace(c, state=ending, end_in_flight=True)),
                    network=_send(state.network, msg)))


# --- deliveries ------------------------------------------------------------------------------------

def deliver(config: PulsarConfig, state: PulsarState) -> Iterator[tuple[Action, PulsarState]]:
    seen: set[Msg] = set()
    for i, msg in enumerate(state.network):
        if msg in seen:
            continue
        seen.add(msg)
        rest = replace(state, network=state.network[:i] + state.network[i + 1:])
        yield Action(f"deliver {msg.kind}", f"deliver {msg}"), _deliver(config, rest, msg)


def _deliver(config: PulsarConfig, state: PulsarState, msg: Msg) -> PulsarState:
    if msg.kind == "SEND":
        result = buf.append(state.buffer(msg.partition), msg.txn, msg.op, producer=msg.client, sequence_id=msg.op,
                            dedup=config.dedup)
        reply = Msg("SEND_RECEIPT", msg.client, msg.txn, op=msg.op, result=result.error or "ok")
        return replace(_with_buffer(state, msg.partition, result.buffer), network=_send(state.network, reply))
    if msg.kind == "ACK":
        sub, error = buf.ack(state.subscription, msg.txn)
        reply = Msg("ACK_RESPONSE", msg.client, msg.txn, op=msg.op, result=error or "ok")
        return replace(state, subscription=sub, network=_send(state.network, reply))
    if msg.kind == "END_TXN":
        return _apply_end(state, msg.txn, TxnAction(msg.result), waiter=True)
    c = state.clients[msg.client]
    if msg.kind in ("SEND_RECEIPT", "ACK_RESPONSE"):
        if msg.op not in c.awaiting:  # the answer to a stray retransmission
            return state
        done = replace(c, awaiting=c.awaiting - {msg.op}, ops_failed=c.ops_failed or msg.result != "ok")
        return replace(state, clients=_with_client(state, done))
    # END_TXN_RESPONSE: only the first answer to an END completes the client's future
    if c.state not in (ClientState.COMMITTING, ClientState.ABORTING) or not c.end_in_flight:
        return state
    if msg.result == "ok":
        final = ClientState.COMMITTED if c.state is ClientState.COMMITTING else ClientState.ABORTED
        return replace(state, clients=_with_client(state, replace(c, state=final, end_in_flight=False)))
    if msg.result in ("Timeout", "CoordinatorNotFound"):
        return replace(state, clients=_with_client(state, replace(c, end_in_flight=False)))
    return replace(state, clients=_with_client(state, replace(c, state=ClientState.ERROR, end_in_flight=False)))


# --- coordinator timer and faults ------------------------------------------------------------------

def coordinator_timeout(state: PulsarState) -> Iterator[tuple[Action, PulsarState]]:
    for txn, meta in state.tc.txns:
        if meta.status is tcm.OPEN:
            yield (Action("transaction timeout", f"coordinator: txn {txn} times out (abort)"),
                   _apply_end(state, txn, TxnAction.ABORT, waiter=False))


def faults(config: PulsarConfig, state: PulsarState) -> Iterator[tuple[Action, PulsarState]]:
    seen: set[Msg] = set()
    for i, msg in enumerate(state.network):
        if msg in seen:
            continue
        seen.add(msg)
        if msg.kind in REQUESTS and state.used("duplicate") < config.budget("duplicate"):
            yield (Action("duplicate", f"duplicate {msg}"),
                   replace(state, network=_send(state.network, msg), faults_used=state.spend("duplicate")))
        if msg.kind == "END_TXN_RESPONSE" and state.used("loss") < config.budget("loss"):
            timeout = replace(msg, result="Timeout")
            yield (Action("lose", f"lose {msg} (the client's request times out)"),
                   replace(state, network=_send(state.network[:i] + state.network[i + 1:], timeout),
                           faults_used=state.spend("loss")))
    if state.used("tc_crash") < config.budget("tc_crash"):
        tc, markers, lost = tcm.recover(state.tc)
        retries = [Msg("END_TXN_RESPONSE", _owner(state, txn), txn, result="CoordinatorNotFound")
                   for txn, meta in state.tc.txns for _ in range(meta.waiters)]
        assert len(retries) == lost
        crashed = replace(state, tc=tc, network=_send(state.network, *retries), faults_used=state.spend("tc_crash"))
        yield (Action("coordinator crash", "coordinator crashes and recovers from its log"),
               _run_markers(crashed, markers))


ACTION_KINDS = ("newTransaction", "send", "ack", "commit", "abort", "client timer fires", "deliver SEND",
                "deliver ACK", "deliver END_TXN", "deliver SEND_RECEIPT", "deliver ACK_RESPONSE",
                "deliver END_TXN_RESPONSE", "transaction timeout", "duplicate", "lose", "coordinator crash")
FAIR_KINDS = frozenset({"deliver SEND", "deliver ACK", "deliver END_TXN", "deliver SEND_RECEIPT",
                        "deliver ACK_RESPONSE", "deliver END_TXN_RESPONSE", "transaction timeout"})


def next_steps(config: PulsarConfig, state: PulsarState) -> Iterator[tuple[Action, PulsarState]]:
    yield from client_steps(config, state)
    yield from deliver(config, state)
    yield from coordinator_timeout(state)
    yield from faults(config, state)


def is_final(state: PulsarState) -> bool:
    return not state.network and not state.tc.txns


def describe_state(state: PulsarState) -> str:
    lines = ["coordinator: " + ", ".join(f"txn {t} {m.status} {sorted(m.partitions)}"
                                          + (f" waiting {sorted(m.waiting)}" if m.waiting else "")
                                          for t, m in state.tc.txns) or "coordinator: no transaction"]
    for c in state.clients:
        lines.append(f"client {c.index}: {c.state.value} txn {c.txn}" + (" ops failed" if c.ops_failed else ""))
    for p, tb in state.buffers:
        entries = " ".join(f"{k}:{t}" + (f"/m{m}" if k == "data" else "") for k, t, m in tb.entries)
        lines.append(f"{p}: [{entries}] maxRead {tb.max_read_position} ongoing {list(tb.ongoing)} "
                     f"aborted {sorted(tb.aborted)} lwm {tb.low_watermark}")
    s = state.subscription
    lines.append(f"subscription: input 0 {'deleted' if s.deleted else 'pending ' + str(s.pending)}")
    if state.ghost.decisions:
        lines.append("decided: " + ", ".join(f"txn {t} {a}" for t, a in state.ghost.decisions))
    if state.network:
        lines.append("in flight: " + "; ".join(str(m) for m in state.network))
    return "\n".join(lines)
