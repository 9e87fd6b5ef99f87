"""Partial-order reduction of the Kafka system model: the states where one producer's own steps may be taken
alone, before anything else happens.

What is modelled
    The states of a scenario with several producers are mostly the independent progress of each: producer 0
    has read its answer or not, producer 1 has read its answer or not, and so on. A step that only the
    producer itself takes (an application call, the client reading an answer, a retry) commutes with every
    step of the brokers, the network and the other producers, as long as nothing else can reach that
    producer. In such a state the search may take that producer's steps alone: its *ample set*
    (Peled 1993; Godefroid 1996; Clarke, Grumberg and Peled, *Model Checking*, chapter 10). The states and
    interleavings left out are reorderings of ones kept.

    :func:`ample_steps` (``Model.ample``, ``txnspec check --partial-order``) returns producer ``i``'s enabled
    steps alone when all of these hold, for the first such producer, else every enabled step:

    * *C1, persistence*: nothing outside the set can touch what the set reads or writes, on any path, until
      one of the set's steps is taken. Producer ``i`` has no request in flight (no answer to it can appear,
      no duplicate of its requests, no broker reads its state); no loss can take an answer to it (no loss
      left, or no answer to it in flight); no crash, expired batch or rebalance is left in the budget (their
      budgets are shared between producers, and a rebalance writes every producer); while a duplicate is
      left, none of the set's steps grows the network (a duplicate is made only while fewer than
      ``max_messages_in_flight`` messages are in flight, so a growing step would disable one); and the
      abandoned-transaction timeout cannot be enabled or disabled by the set (producer ``i`` is live, so the
      timeout of its transactional id stays disabled; or it is its id's only instance and that id's
      transaction is not Ongoing; other ids' timeouts read only their own instances and messages).
    * *C2, invisibility*: no step of the set changes what a safety property reads: the coordinator, the
      partitions, the group, the ghost (so nothing the application is told), or a producer's id, epoch or
      fatal state.
    * *C3, no ignoring*: every cycle of the reduced graph passes through a fully expanded state. It holds by
      construction: a cycle of producers' own steps only is impossible, because those steps never take a
      request out of the network nor put an answer in (only a broker does), so such a cycle neither sends
      nor reads; what is left, the application's calls without a send, moves a producer forward
      (``txn_no`` only grows, and a crash is excluded above). ``tests/spec/test_reduction.py`` checks this
      on the scenarios' graphs.
    * *C0*: the set is never empty when a step is enabled.

    Under C0 to C3 every reachable violation of an ``always`` property, every ``sometimes`` witness and every
    deadlock of the full graph has a counterpart in the reduced one (stutter equivalence of the property's
    propositions), so verdicts agree; counts, and the lengths of counterexamples, do not.

Assumptions
    The properties read only the parts named under C2 (``spec/properties.py``); a variant that adds a
    property reading the network or another producer field must not be checked with the reduction.

Left out
    ``leads_to`` properties (weak fairness needs every interleaving kept: the reduction drops them) and
    reductions among broker steps: each changes what an invariant reads (the coordinator, a partition, the
    ghost), so none may be taken alone (C2); and two deliveries to one broker never commute, while any
    producer can still send to it. That is where the states of ``full`` still grow (docs/spec.md).
"""

from __future__ import annotations

from txnspec.spec.actions import Action, ActionKind
from txnspec.spec.producer_state import FATAL_ERROR, READY, UNINITIALIZED, Producer
from txnspec.spec.system_state import SystemState
from txnspec.spec.txn_state import ONGOING

Step = tuple[Action, SystemState]
NOT_LOCAL = frozenset({ActionKind.DUPLICATE, ActionKind.REBALANCE})  # faults named after a producer
# faults whose budget producers share, that write all of them, or (expire_producer, admin_abort) whose guard reads
# a producer
SHARED_BUDGETS = ("crash", "expire_batch", "rebalance", "expire_producer", "admin_abort")


def ample_steps(state: SystemState, steps: list[Step]) -> list[Step]:
    """The steps to explore from ``state``: one producer's own steps when they form an ample set, else all of
    ``steps`` (every enabled step of ``state``, in the order the model yields them)."""
    budget = state.budget
    if len(steps) < 2 or any(getattr(budget, fault) for fault in SHARED_BUDGETS):
        return steps
    network = state.network
    for producer in state.producers:
        address = producer.address
        own = [step for step in steps if step[0].actor == address and step[0].kind not in NOT_LOCAL]
        if not own or len(own) == len(steps):
            continue
        if any(e.source == address for e in network):
            continue
        if budget.loss and any(e.target == address for e in network):
            continue
        if budget.duplicate and any(len(after.network) > len(network) for _, after in own):
            continue
        if not _abandonment_unaffected(state, producer):
            continue
        if any(_visible(state, after, producer.index) for _, after in own):
            continue
        return own
    return steps


def _live(p: Producer) -> bool:
    return p.phase not in (FATAL_ERROR, UNINITIALIZED, READY)


def _abandonment_unaffected(state: SystemState, producer: Producer) -> bool:
    """No step of ``producer`` can enable or disable the abandoned-transaction timeout of its id before it
    is taken (``txnspec.spec.recovery._abandoned``): the producer is live, or it is the id's only instance and
    the id has no Ongoing transaction."""
    if _live(producer):
        return True
    tid = producer.transactional_id
    if any(p.transactional_id == tid and p is not producer for p in state.producers):
        return False
    md = state.coordinator.metadata(tid)
    return md is None or md.state is not ONGOING


def _visible(before: SystemState, after: SystemState, index: int) -> bool:
    """Whether the step changes what a safety property reads (C2)."""
    if (after.coordinator is not before.coordinator and after.coordinator != before.coordinator) \
            or after.partitions != before.partitions or after.group != before.group or after.ghost != before.ghost:
        return True
    p, q = before.producers[index], after.producers[index]
    return (p.producer_id, p.producer_epoch, p.phase is FATAL_ERROR) != \
        (q.producer_id, q.producer_epoch, q.phase is FATAL_ERROR)
