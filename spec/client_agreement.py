"""The one client's agreement: the model's producer and the client compared on every reachable step of a scenario.

Models
    :func:`agreement` explores a system breadth first and, for every step a producer takes in every reachable
    state, compares what the model's producer did with what :mod:`txnspec.spec.client` does on the lifted state
    (:func:`txnspec.spec.projection.compare_step`). What still differs is data: :data:`KNOWN_DIFFERENCES`, each with
    its reason; ``tests/spec/test_client_agreement.py`` checks that exactly those differ.

Kafka sources followed
    None directly: both sides cite ``TransactionManager``, ``Sender`` and ``RecordAccumulator``.

Assumptions
    The network is a bag: the requests a step sent are the messages of the producer's address that the step added.

Not modelled
    Steps of the servers, the network or the group (no producer takes them).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from txnspec.spec.actions import Action
from txnspec.spec.network import Address, producer_index
from txnspec.spec.projection import Difference, K, compare_step, settled

# (step, aspect) -> why spec/producer.py deliberately differs from spec/client.py there
KNOWN_DIFFERENCES: Mapping[Difference, str] = {
    ("Produce answered OUT_OF_ORDER_SEQUENCE_NUMBER", "retrying"):
        "a duplicated Produce is the client's re-send of a batch whose first copy is still on its way "
        "(spec/faults.py): when one copy is answered with a retriable error while the other is on the network, the "
        "model's batch stays in flight with that copy, where spec/client.py, which sees one copy, re-enqueues it "
        "for a retry",
}


@dataclass
class Agreement:
    """What :func:`agreement` found: the (state, step) pairs compared, and how often each difference showed."""

    states: int = 0
    pairs: int = 0
    differences: dict[Difference, int] = field(default_factory=dict)
    unsettled: int = 0
    examples: dict[Difference, tuple[Any, Action]] = field(default_factory=dict)


PRODUCER_STEPS = frozenset({K.INIT_TRANSACTIONS, K.BEGIN_TRANSACTION, K.SEND, K.SEND_OFFSETS_TO_TRANSACTION,
                            K.COMMIT_TRANSACTION, K.ABORT_TRANSACTION, K.RETRY, K.CRASH, K.EXPIRE_BATCH})


def producer_of(action: Action) -> int | None:
    """The producer whose client takes ``action`` (None: a step of the servers, the network or the group)."""
    if action.kind in PRODUCER_STEPS or action.is_delivery:
        return producer_index(action.target if action.is_delivery else action.actor)
    return None


def agreement(system: Any, limit: int | None = None) -> Agreement:
    """Explore ``system`` (a :class:`~txnspec.spec.system_state.System`) breadth first and compare every step a
    producer takes in every reachable state."""
    from collections import deque

    from txnspec.spec import system as sysm
    from txnspec.spec.system_state import correlations_in_flight

    config = system.client
    found = Agreement()
    # both are pure functions of a producer's own state, met again and again across states
    compare = functools.lru_cache(maxsize=1 << 18)(compare_step)
    is_settled = functools.lru_cache(maxsize=1 << 18)(settled)
    start = sysm.initial_state(system)
    seen = {start}
    queue = deque(seen)
    while queue and (limit is None or found.states < limit):
        state = queue.popleft()
        found.states += 1
        transit = [correlations_in_flight(state, p) for p in state.producers]
        found.unsettled += sum(not is_settled(config, p, t) for p, t in zip(state.producers, transit, strict=True))
        for action, nxt in sysm.next_steps(system, state):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
            index = producer_of(action)
            if index is None:
                continue
            p, after = state.producers[index], nxt.producers[index]
            sent = tuple(_new_requests(state, nxt, p.address))
            found.pairs += 1
            for difference in compare(config, p, transit[index], action, after, correlations_in_flight(nxt, after),
                                      sent):
                found.differences[difference] = found.differences.get(difference, 0) + 1
                found.examples.setdefault(difference, (state, action))
    return found


def _new_requests(state: Any, nxt: Any, address: Address) -> Iterator[object]:
    """The messages ``address`` sent in the step from ``state`` to ``nxt`` (the network is a bag)."""
    before = list(state.network)
    for envelope in nxt.network:
        if envelope in before:
            before.remove(envelope)
        elif envelope.source == address:
            yield envelope.body
