"""The machinery that makes the successor function fast (spec/values.py and the memoised steps): values build,
hash and compare as plain frozen dataclasses do; memoised functions and interning return objects equal to what
the plain functions return; the network's bag stays the sorted bag; and every memoised step of the system model
gives, on every state of several small scenarios, exactly the successors (same actions, same order, equal
states) that its handlers give when run directly on the whole state."""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections import deque
from collections.abc import Iterator

import pytest

from txnspec.spec import system as sysm
from txnspec.spec.actions import Action, ActionKind, deliver
from txnspec.spec.brokers import (
    coordinator_receives,
    group_receives,
    marker_envelope,
    partition_receives,
)
from txnspec.spec.errors import Errors
from txnspec.spec.faults import (
    _abandoned,
    _abort_timed_out,
    _fence_member,
    _rebalance,
    admin_abort_steps,
    expiry_steps,
    heartbeat_steps,
    slow_failover_steps,
)
from txnspec.spec.messages import EndTxnResponse, ErrorResponse, InitProducerIdResponse, Produce, ProduceResponse
from txnspec.spec.model import build_system
from txnspec.spec.network import (
    COORDINATOR,
    GROUP,
    NETWORK,
    Envelope,
    ProducerAddress,
    contexts,
    deliveries,
    producer_address,
    remove_one,
    send,
    stable_repr,
)
from txnspec.spec.producer import dispatch, expire_batch, first_in_flight, receive, request_timed_out, restarted
from txnspec.spec.system_state import UNREAD, Budget, projection
from txnspec.spec.txn_markers import markers_for
from txnspec.spec.values import Interner, cache_stats, clear_caches, intern, memoised, replace, value

K = ActionKind


# --- values -------------------------------------------------------------------------------------------------

@value
class Pair:
    left: int
    right: tuple[int, ...] = ()


@value
class Other:
    left: int
    right: tuple[int, ...] = ()


def test_make_and_replace_build_what_the_constructor_builds() -> None:
    made = Pair._make(1, (2, 3))  # type: ignore[attr-defined]
    assert made == Pair(1, (2, 3)) and hash(made) == hash(Pair(1, (2, 3)))
    assert replace(made, right=()) == Pair(1) and made.right == (2, 3)  # the original is unchanged
    assert dataclasses.astuple(made) == (1, (2, 3))


def test_made_and_replaced_values_are_frozen_values_of_their_class() -> None:
    for made in (Pair._make(1, ()), replace(Pair(1), left=2)):  # type: ignore[attr-defined]
        assert type(made) is Pair
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.left = 3  # type: ignore[misc]
        assert not hasattr(made, "__dict__")


def test_values_of_two_classes_with_equal_fields_differ_in_equality_and_hash() -> None:
    one: object = Pair(1)
    assert one != Other(1) and hash(one) != hash(Other(1))


def test_memoised_returns_what_the_function_returns_and_is_cleared_with_every_table() -> None:
    calls = []

    @memoised(maxsize=4)
    def double(x: int) -> int:
        calls.append(x)
        return 2 * x

    assert [double(i) for i in (1, 2, 1, 2)] == [2, 4, 2, 4] and calls == [1, 2]
    name = double.__qualname__
    assert cache_stats()[name] == (2, 2, 2)
    clear_caches()
    assert cache_stats()[name] == (0, 0, 0)
    assert double(1) == 2 and calls == [1, 2, 1]


def test_interning_shares_one_object_per_value_and_keeps_types_apart() -> None:
    table = Interner(limit=3)
    a, b = Pair(1, (2,)), Pair(1, (2,))
    assert table(a) is a and table(b) is a
    action = Action(K.LOSE, "network")
    plain = tuple(action)
    assert plain == action and table(action) is action
    assert type(table(plain)) is tuple  # an equal tuple of another type is not replaced by the NamedTuple
    table(Pair(2))
    assert len(table) == 3
    assert table(Pair(4)) == Pair(4) and len(table) == 1  # full: it starts afresh


# --- the network's bag ----------------------------------------------------------------------------------------

def _envelopes() -> list[Envelope]:
    bodies = [ErrorResponse(Errors.NONE), ProduceResponse(Errors.NONE, 0, 0), EndTxnResponse(Errors.NONE),
              InitProducerIdResponse(Errors.NONE, 1, 0), Produce("p0", 1, 0, 0, 1, True, "t1")]
    return [Envelope(s, t, b, c) for s, t, b, c in itertools.product(
        (producer_address(0), "coordinator", "p0"), (producer_address(1), "group"), bodies, (0, 1))]


def test_send_and_remove_keep_the_bag_sorted_as_sorting_it_does() -> None:
    rng = random.Random(7)
    pool = _envelopes()
    for _ in range(300):
        bag: tuple[Envelope, ...] = ()
        content: list[Envelope] = []
        for _ in range(rng.randrange(1, 6)):
            added = rng.sample(pool, rng.randrange(1, 3)) + rng.sample(content, min(len(content), 1))
            bag, content = send(bag, *added), content + added
            assert bag == tuple(sorted(content, key=stable_repr))
        gone = rng.choice(content)
        content.remove(gone)
        assert remove_one(bag, gone) == tuple(sorted(content, key=stable_repr))
        assert [e for e, _ in deliveries(bag)] == list(dict.fromkeys(bag))
        assert all(rest == remove_one(bag, e) for e, rest in deliveries(bag))
        producer = producer_address(0)
        assert contexts(bag, producer) == frozenset(e.context for e in bag if producer in (e.source, e.target))


def test_the_bag_is_interned() -> None:
    a, b = _envelopes()[:2]
    assert send(send((), a), b) is send(send((), b), a)


def test_a_memoised_step_that_reads_outside_its_key_fails_loudly() -> None:
    state = projection(ghost=sysm.Ghost())
    with pytest.raises(TypeError):
        iter(state.producers)
    with pytest.raises(TypeError):
        bool(state.group)
    with pytest.raises(TypeError):
        _ = UNREAD.cache


# --- the memoised successor function against its handlers run on whole states --------------------------------

def _all_states(system: sysm.System) -> list[sysm.SystemState]:
    start = sysm.initial_state(system)
    seen, queue, order = {start}, deque([start]), [start]
    while queue:
        for _, nxt in sysm.next_steps(system, queue.popleft()):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
                order.append(nxt)
    return order


def _bag(*envelopes: Envelope) -> tuple[Envelope, ...]:
    return tuple(sorted(envelopes, key=repr))


def _with_dispatch(system: sysm.System, state: sysm.SystemState, p: sysm.Producer) -> sysm.SystemState:
    """The client's Sender run directly (no table), its messages added by sorting the whole bag."""
    address = p.address
    used = frozenset(e.context for e in state.network if address in (e.source, e.target))
    p, out = dispatch(system.client, p, used)
    producers = tuple(p if q.index == p.index else q for q in state.producers)
    return replace(state, producers=producers, network=_bag(*state.network, *out))


def _spent(state: sysm.SystemState, fault: str) -> sysm.SystemState:
    return replace(state, budget=replace(state.budget, **{fault: getattr(state.budget, fault) - 1}))


def reference_steps(system: sysm.System, state: sysm.SystemState) -> Iterator[tuple[Action, sysm.SystemState]]:
    """The step relation with every handler run directly on the whole state: no table, no projection."""
    c = system.client
    for p in state.producers:  # the application's calls
        for action, q, runs_sender in sysm._calls(c, p):
            yield action, (_with_dispatch(system, state, q) if runs_sender
                           else replace(state, producers=tuple(q if r.index == q.index else r
                                                               for r in state.producers)))
    seen: set[Envelope] = set()
    for env in state.network:  # deliveries
        if env in seen:
            continue
        seen.add(env)
        rest = replace(state, network=remove_one(state.network, env))
        label = deliver(env, sysm._delivers_awaited(state, env))
        if env.target == COORDINATOR:
            yield label, coordinator_receives(system, rest, env, Errors.NONE)
            if state.budget.append_failure and type(env.body).__name__ in ("InitProducerId", "AddPartitionsToTxn",
                                                                         "EndTxn"):
                yield (Action(K.APPEND_FAILS, COORDINATOR, env),
                       coordinator_receives(system, _spent(rest, "append_failure"), env, Errors.NOT_ENOUGH_REPLICAS))
        elif env.target == GROUP:
            after = group_receives(system, rest, env)
            if after is not rest:
                yield label, after
        elif isinstance(env.target, ProducerAddress):
            p = state.producers[env.target.index]
            received = receive(c, p, env.body, env.context)
            if received is None:
                yield label, rest
            else:
                p, told = received
                ghost = rest.ghost if told is None else rest.ghost.tell(p.tag, told)
                yield label, _with_dispatch(system, replace(rest, ghost=ghost), p)
        else:
            appended = partition_receives(system, rest, env)
            if appended is not None:
                yield label, appended
    b = state.budget  # the environment
    seen = set()
    for env in state.network:
        if env in seen:
            continue
        seen.add(env)
        if b.loss:
            yield Action(K.LOSE, NETWORK, env), _spent(replace(state, network=remove_one(state.network, env)), "loss")
        if b.duplicate and isinstance(env.source, ProducerAddress) \
                and len(state.network) < system.scenario.max_messages_in_flight:
            yield Action(K.DUPLICATE, env.source, env), _spent(replace(state, network=_bag(*state.network, env)),
                                                               "duplicate")
    for tid, md in state.coordinator.cache:
        if b.timeout and system.protocol.is_timeout_candidate(md):
            yield (Action(K.TIMEOUT, COORDINATOR, transactional_id=tid),
                   _abort_timed_out(system, _spent(state, "timeout"), tid))
    for tid, md in state.coordinator.cache:
        if system.protocol.is_timeout_candidate(md) and _abandoned(state, tid):
            yield Action(K.ABANDONED_TIMEOUT, COORDINATOR, transactional_id=tid), _abort_timed_out(system, state, tid)
    if b.failover:
        result = system.protocol.coordinator_failover(state.coordinator, config=system.coordinator_config)
        markers = [marker_envelope(system, m, tid) for tid, m in result.markers]
        yield Action(K.FAILOVER, COORDINATOR), _spent(replace(state, coordinator=result.state,
                                                              network=_bag(*state.network, *markers)), "failover")
    if b.slow_failover or state.coordinator.not_led or state.coordinator.loading:
        yield from slow_failover_steps(system, state)  # unmemoised already
    for p in state.producers:
        if b.crash and p.phase is not sysm.UNINITIALIZED and not (c.two_phase_commit
                                                                  and p.phase is sysm.INITIALIZING):
            yield Action(K.CRASH, p.address), _spent(replace(state, producers=tuple(
                restarted(p) if q.index == p.index else q for q in state.producers)), "crash")
        transit = {e.context for e in state.network if p.address in (e.source, e.target)}
        for batch in sorted(p.in_flight) if b.expire_batch else ():
            gave_up = expire_batch(c, p, batch, waiting=batch not in transit)
            yield (Action(K.EXPIRE_BATCH, p.address, partition=batch[0], batch=batch),
                   _with_dispatch(system, _spent(state, "expire_batch"), gave_up))
    if b.rebalance and system.scenario.group_protocol == "consumer":
        yield from _fence_member(system, _spent(state, "rebalance"))  # unmemoised already
    elif b.rebalance:
        yield _rebalance(system, _spent(state, "rebalance"))
    if state.group.consumer_groups:
        yield from heartbeat_steps(system, state)  # unmemoised already
    yield from expiry_steps(system, state)  # unmemoised already: the same function on the whole state
    if b.admin_abort:
        yield from admin_abort_steps(system, state)  # unmemoised already
    for p in state.producers:  # the client's retries
        mine = [e for e in state.network if p.address in (e.source, e.target)]
        if p.awaiting is not None and not any(e.context == p.awaiting[1] for e in mine):
            yield Action(K.RETRY, p.address, request=p.awaiting[0]), _with_dispatch(system, state,
                                                                                    request_timed_out(p))
        for key in sorted(p.in_flight) if p.awaiting is None else ():
            if not any(e.context == key for e in mine) and first_in_flight(c, p, key):
                resend = Envelope(p.address, key[0], Produce(key[0], key[1], key[2], key[3], 1, True,
                                                             p.transactional_id), key, p.tag)
                in_retry = replace(p, retried=p.retried | {key}) if c.expires_batches else p
                yield (Action(K.RETRY, p.address, resend),
                       _with_dispatch(system, replace(state, network=_bag(*state.network, resend)), in_retry))
    cs = state.coordinator  # the coordinator's marker re-sends
    for tid, pending in cs.completions:
        completing = cs.metadata(tid)
        if completing is None or pending.coordinator_epoch != cs.coordinator_epoch:
            continue
        for _, marker in markers_for(cs, completing, pending.result):
            env = marker_envelope(system, marker, tid)
            answered = any(e.context == env.context and type(e.body).__name__ == "WriteTxnMarkersResponse"
                           for e in state.network)
            if env not in state.network and not answered:
                yield Action(K.RESEND_MARKER, COORDINATOR, env), replace(state, network=_bag(*state.network, env))


# small scenarios that, together, take every kind of step (each fault, offsets, the group, several producers)
SCENARIOS = [("offsets", "current"), ("zombie", "current"), ("loss", "current"), ("append-failure", "current"),
             ("crash", "current"), ("failover", "current"), ("delayed-produce", "current"),
             ("rebalance", "current"), ("in-flight-2", "current"), ("epoch-exhaustion", "current"),
             ("offsets", "tv1"), ("delayed-produce", "tv1"), ("zombie", "kafka-3.9"), ("plain-commit", "current"),
             ("id-expiry", "current"), ("producer-expiry", "current"), ("two-phase-commit", "current"),
             ("two-phase-recovery", "kip-939-keep-prepared"), ("consumer-rebalance", "current"),
             ("admin-abort", "current"), ("txn-log-loading", "current")]


@pytest.mark.parametrize(("scenario", "variant"), SCENARIOS)
def test_the_memoised_steps_give_what_the_handlers_give_on_every_state(scenario: str, variant: str) -> None:
    system = build_system(scenario, variant)
    states = _all_states(system)
    for state in states:
        fast = list(sysm.next_steps(system, state))
        slow = list(reference_steps(system, state))
        assert [a for a, _ in fast] == [a for a, _ in slow], state
        assert [s for _, s in fast] == [s for _, s in slow], state
    assert len(states) > 80


def test_the_steps_kinds_covered_by_the_agreement_test() -> None:
    """The scenarios above take every kind of step the Kafka system model has, so none escapes the comparison."""
    taken: set[ActionKind] = set()
    for scenario, variant in SCENARIOS:
        system = build_system(scenario, variant)
        for state in _all_states(system):
            taken.update(a.kind for a, _ in sysm.next_steps(system, state))
    assert taken == set(ActionKind)


def test_cold_tables_give_the_successors_warm_tables_give() -> None:
    system = build_system("zombie")
    states = _all_states(system)
    warm = [list(sysm.next_steps(system, s)) for s in states[::7]]
    cold = []
    for s in states[::7]:
        clear_caches()
        cold.append(list(sysm.next_steps(system, s)))
    assert warm == cold


def test_stored_states_share_their_parts() -> None:
    system = build_system("retry")
    states = _all_states(system)
    assert len({id(s.ghost) for s in states}) == len({s.ghost for s in states})
    assert len({id(s.network) for s in states}) == len({s.network for s in states})
    assert len({id(s.producers) for s in states}) == len({s.producers for s in states})


def test_a_state_read_back_shares_its_parts_with_the_states_built() -> None:
    import copy
    import pickle

    system = build_system("offsets")
    state = _all_states(system)[-1]
    again = pickle.loads(pickle.dumps(state))
    assert again == state and hash(again) == hash(state) and again is not state
    assert all(getattr(again, f.name) is getattr(state, f.name) for f in dataclasses.fields(state))
    assert copy.deepcopy(state) == state


def test_a_systems_tables_are_no_part_of_it() -> None:
    system = build_system("tiny")
    _all_states(system)
    assert system.__dict__["_tables"]
    again = build_system("tiny")
    assert again == system and repr(again) == repr(system) and "_tables" not in again.__dict__
    assert intern(Budget()) == Budget()
