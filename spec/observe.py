"""What a client of Kafka observes of the system model: the projection ``txnspec diff`` compares variants by.

What is modelled
    The observer is every client application together: the producers' applications and any consumer
    that reads the partitions or the group's offsets. Per step of the system model it sees

    * the application's calls (``producer-0.commitTransaction()``...): an action label;
    * with ``level="wire"`` also each request and answer between a producer and a broker, by type with
      the EndTxn result or the answer's error (not producer ids, epochs or sequences, which differ
      between transaction versions by design and are no client-level behaviour);
    * and the :class:`ClientView` of the state: each producer's ``TransactionManager`` state (which
      calls it accepts or fails), what each application was told about its transactions, the records a
      consumer reads from offset 0 of each data partition at read_committed and at read_uncommitted,
      and the group's committed offsets (``OffsetFetch``) and whether a ``requireStable`` fetch would
      answer ``UNSTABLE_OFFSET_COMMIT``.

    Everything else (coordinator and partition internals, markers, faults, the network) is silent.

Assumptions
    A record is known by the transaction that wrote it: ``P0t1`` is a record of producer 0's first
    transaction (``P0'`` after one crash and restart: its next incarnation), which is what an application
    that writes its own values can tell apart. Positions in the log and producer ids are not observed.

Left out
    Timing (the view is compared step by step, not by a clock) and consumer positions other than 0. The
    projection handed to the checker (``checker.language.Projection``) is built from these functions in
    ``cli/diff.py`` (spec imports nothing of the checker but its model contract).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Literal

from txnspec.checker.model import Projection
from txnspec.spec.actions import APPLICATION_CALLS, Action
from txnspec.spec.messages import EndTxn, IsolationLevel
from txnspec.spec.network import is_request, producer_index
from txnspec.spec.system import System, SystemState, Tag

Level = Literal["application", "wire"]
Label = tuple[Hashable | None, Hashable | None]  # an observable step: (action label, the new view if it changed)
LEVELS: tuple[Level, ...] = ("application", "wire")
APPLICATION_KINDS = APPLICATION_CALLS  # initTransactions ... abortTransaction


@dataclass(frozen=True, slots=True)
class PartitionView:
    partition: str
    read_committed: tuple[str, ...]
    read_uncommitted: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ClientView:
    """What clients see of one state (see the module docstring)."""

    producers: tuple[str, ...]  # TransactionManager state per producer
    told: tuple[tuple[str, str], ...]  # (transaction, outcome the application was told), in order
    partitions: tuple[PartitionView, ...]
    committed_offsets: tuple[tuple[str, int], ...]
    offsets_unstable: bool

    def lines(self) -> dict[str, str]:
        """One line per observed item, keyed by what it is about (a diff shows the changed ones)."""
        out = {f"producer-{i}": f"producer-{i} is {phase}" for i, phase in enumerate(self.producers)}
        for transaction, outcome in self.told:
            out[f"told {transaction}"] = f"{transaction} told {outcome}"
        for p in self.partitions:
            out[f"{p.partition} rc"] = f"read_committed {p.partition}: [{' '.join(p.read_committed)}]"
            out[f"{p.partition} ru"] = f"read_uncommitted {p.partition}: [{' '.join(p.read_uncommitted)}]"
        offsets = ", ".join(f"{tp}={o}" for tp, o in self.committed_offsets) or "none"
        out["offsets"] = f"committed offsets: {offsets}" + (" (a commit pending: UNSTABLE_OFFSET_COMMIT)"
                                                             if self.offsets_unstable else "")
        return out


def record_name(tag: Tag | None) -> str:
    if tag is None:
        return "?"
    producer, incarnation, txn = tag
    restarts = "'" * incarnation
    return f"P{producer}{restarts}t{txn}"


def client_view(system: System, state: SystemState) -> ClientView:
    names: dict[tuple[str, int], str] = {(b.partition, b.base_offset): record_name(b.tag) for b in state.ghost.batches}
    partitions = []
    for name in system.scenario.partitions:
        pstate = state.partition(name)
        reads = []
        for isolation in (IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED):
            offsets = system.protocol.fetch(pstate, 0, isolation).records
            reads.append(tuple(names.get((name, o), "?") for o in offsets))
        partitions.append(PartitionView(name, reads[0], reads[1]))
    group = state.group
    committed = tuple((f"{g}/{p}", r.offset) for (g, p), r in group.committed)
    return ClientView(
        producers=tuple(p.phase.value for p in state.producers),
        told=tuple((record_name(tag), outcome) for tag, outcome in state.ghost.told),
        partitions=tuple(partitions), committed_offsets=committed, offsets_unstable=bool(group.pending))


def action_label(action: Action, level: Level = "application") -> Hashable | None:
    """The observable label of a system-model action, or None when a client cannot see it."""
    if action.kind in APPLICATION_KINDS:
        return str(action)
    if level == "wire" and action.is_delivery and (producer_index(action.source) is not None
                                                   or producer_index(action.target) is not None):
        return f"{action.source}->{action.target}: {wire_name(action)}"
    return None


def wire_name(action: Action) -> str:
    """A delivered message as a client sees it on the wire: its type, the EndTxn result, the answer's error."""
    body = action.body
    name = type(body).__name__
    if isinstance(body, EndTxn):
        return f"EndTxn({body.result})"
    if not is_request(body):  # a response type (spec.network.RESPONSES): every one carries its error
        return f"{name}({body.error})"
    return name


def render_label(label: Label, previous: ClientView | None) -> str:
    """A label as text: the call or message, then what changed in the view since ``previous``."""
    action, view = label
    parts = [str(action)] if action is not None else []
    if isinstance(view, ClientView):
        before = previous.lines() if previous is not None else {}
        parts += [line for key, line in view.lines().items() if before.get(key) != line]
    return "; ".join(parts) if parts else "(nothing visible)"


def render_labels(labels: tuple[Label, ...], start: Hashable | None) -> list[str]:
    """Each label of an observable trace as text, each with the view changes since the one before it."""
    out = []
    current = start if isinstance(start, ClientView) else None
    for label in labels:
        out.append(render_label(label, current))
        if isinstance(label[1], ClientView):
            current = label[1]
    return out


def projection(system: System, level: Level = "application") -> Projection:
    """What clients observe of ``system``'s steps at ``level``, as the checker's :class:`Projection`."""
    if level not in LEVELS:
        raise ValueError(f"unknown observation level {level!r}; known: {', '.join(LEVELS)}")
    return Projection(lambda action: action_label(action, level), lambda state: client_view(system, state))
