"""The state of the Kafka system model and its configuration: what one point of the explored space holds.

System
    :class:`System` is a scenario and a protocol, with what the components are configured with derived
    from them. :class:`SystemState` holds the transaction coordinator's state, one partition state per
    partition (the group's ``__consumer_offsets`` partition included when the scenario commits offsets),
    the group coordinator's state, the producers, the network (a bag of envelopes), the fault budget left
    and the ghost state. All of it is frozen and hashable; equal states are equal values.

Left out
    Everything that changes a state: the actions, in :mod:`txnspec.spec.system` and the modules it composes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from txnspec.spec import coordinator as coord
from txnspec.spec import group as group_mod
from txnspec.spec import partition as partition_mod
from txnspec.spec.constants import group_offsets_partition
from txnspec.spec.ghost import Ghost
from txnspec.spec.network import Envelope, producer_address, send
from txnspec.spec.producer import ClientConfig, Producer, dispatch
from txnspec.spec.protocol import CURRENT, Protocol
from txnspec.spec.scenarios import Scenario
from txnspec.spec.values import replace, value


@value
class Budget:
    """How many more times each fault may happen (``txnspec.spec.scenarios.FAULTS``)."""

    loss: int = 0
    duplicate: int = 0
    append_failure: int = 0
    timeout: int = 0
    failover: int = 0
    crash: int = 0
    expire_batch: int = 0
    rebalance: int = 0


@value
class SystemState:
    coordinator: coord.CoordinatorState
    partitions: tuple[tuple[str, Any], ...]  # partition name -> partition_mod.PartitionState
    group: Any  # group_mod.GroupState
    producers: tuple[Producer, ...]
    network: tuple[Envelope, ...] = ()  # a bag, kept sorted so equal bags are equal tuples
    budget: Budget = Budget()
    ghost: Ghost = field(default_factory=Ghost)

    def partition(self, name: str) -> Any:
        for p, state in self.partitions:
            if p == name:
                return state
        raise KeyError(name)


@dataclass(frozen=True)
class System:
    """A scenario and a protocol: everything the actions need besides the state."""

    scenario: Scenario
    protocol: Protocol = CURRENT
    coordinator_config: coord.CoordinatorConfig = field(init=False)
    limits: Any = field(init=False)
    offsets_partition: str = field(init=False)
    client: ClientConfig = field(init=False)

    def __post_init__(self) -> None:
        s, proto = self.scenario, self.protocol
        config = replace(proto.coordinator_config, max_epoch=s.max_epoch, transaction_version=s.transaction_version)
        object.__setattr__(self, "coordinator_config", config)
        object.__setattr__(self, "limits", partition_mod.PartitionLimits(max_sequence=s.max_sequence,
                                                                         max_epoch=s.max_epoch))
        object.__setattr__(self, "offsets_partition", group_offsets_partition(s.group_id))
        object.__setattr__(self, "client", ClientConfig(
            partitions=s.partitions, transactions_per_producer=s.transactions_per_producer,
            records_per_transaction=s.records_per_transaction, commit_offsets=s.commit_offsets,
            group_id=s.group_id, transaction_version=s.transaction_version, max_sequence=s.max_sequence,
            waits_for_produce_before_end_txn=proto.client_waits_for_produce_before_end_txn,
            bumps_epoch_after_abortable_error=proto.client_bumps_epoch_after_abortable_error,
            max_in_flight=s.max_in_flight, expires_batches=s.budget("expire_batch") > 0))

    @property
    def tv2(self) -> bool:
        return self.scenario.transaction_version >= 2


def initial_state(system: System) -> SystemState:
    s = system.scenario
    producers = tuple(
        Producer(index=i, transactional_id=tid, generation=s.initial_generation if s.group_members else -1)
        for i, tid in enumerate(s.producer_transactional_ids))
    budget = Budget(**{fault: s.budget(fault) for fault in Budget.__dataclass_fields__})
    return SystemState(
        coordinator=coord.CoordinatorState(),
        partitions=tuple((p, partition_mod.PartitionState())
                         for p in (*s.partitions, *((system.offsets_partition,) if s.commit_offsets else ()))),
        group=initial_group(system, producers),
        producers=producers,
        budget=budget,
    )


def initial_group(system: System, producers: tuple[Producer, ...]) -> Any:
    """The group coordinator at the start: the scenario's group (if it commits offsets), Stable with every
    producer's member at the initial generation when the producers are members, else Empty."""
    s = system.scenario
    if not s.commit_offsets:
        return group_mod.GroupState()
    members = tuple(sorted((p.member_id, None) for p in producers)) if s.group_members else ()
    return group_mod.GroupState(groups=(group_mod.ClassicGroup(s.group_id, s.initial_generation, members),))


def replace_producer(state: SystemState, producer: Producer) -> SystemState:
    producers = list(state.producers)
    producers[producer.index] = producer
    return replace(state, producers=tuple(producers))


def set_partition(state: SystemState, name: str, partition_state: Any) -> SystemState:
    return replace(state, partitions=tuple((p, partition_state if p == name else s) for p, s in state.partitions))


def correlations_in_flight(state: SystemState, p: Producer) -> frozenset[Any]:
    """The contexts of ``p``'s messages in flight: correlation ids, and the batches whose produce or answer is on
    its way."""
    address = producer_address(p.index)
    return frozenset(e.context for e in state.network if e.source == address or e.target == address)


# the client's Sender is a pure function of small shared values, met again and again across states
_dispatch = functools.lru_cache(maxsize=1 << 16)(dispatch)


def with_dispatch(system: System, state: SystemState, p: Producer) -> SystemState:
    """``state`` with producer ``p`` after its Sender ran (what it sends goes on the network)."""
    p, out = _dispatch(system.client, p, correlations_in_flight(state, p))
    state = replace_producer(state, p)
    return replace(state, network=send(state.network, *out))
