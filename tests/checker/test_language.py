"""The observable-language difference (checker/language.py) on small hand-made transition systems."""

from __future__ import annotations

import doctest
from collections.abc import Hashable, Iterable

import pytest

from txnspec.checker import language
from txnspec.checker.language import Projection, language_difference
from txnspec.checker.model import Model

pytestmark = pytest.mark.quick  # the whole module is in the quick tier

TAU = "tau"  # a silent action in these toys
SEE_ACTIONS = Projection(lambda action: None if action == TAU else action)


def lts(name: str, edges: dict[int, list[tuple[str, int]]]) -> Model[int]:
    """A model over integer states from an edge table; state 0 is initial."""
    def steps(state: int) -> Iterable[tuple[Hashable, int]]:
        return edges.get(state, [])
    return Model(name, lambda: [0], steps)


def labels(trace: language.ObservableTrace | None) -> list[Hashable] | None:
    return None if trace is None else [action for action, _view in trace.labels]


def test_doctests() -> None:
    assert doctest.testmod(language).failed == 0


def test_silent_steps_are_not_observed() -> None:
    with_silent = lts("a", {0: [(TAU, 1)], 1: [("x", 2)], 2: [(TAU, 3)], 3: [("y", 4)]})
    direct = lts("b", {0: [("x", 1)], 1: [("y", 2)]})
    result = language_difference(with_silent, direct, SEE_ACTIONS)
    assert result.equal and result.complete
    assert result.states == (5, 3)


def test_trace_equivalence_ignores_where_the_choice_is_made() -> None:
    # a.(b + c) and a.b + a.c have the same traces (they differ only in refusals, which this does not judge)
    late = lts("late", {0: [("a", 1)], 1: [("b", 2), ("c", 3)]})
    early = lts("early", {0: [("a", 1), ("a", 2)], 1: [("b", 3)], 2: [("c", 4)]})
    assert language_difference(late, early, SEE_ACTIONS).equal


def test_shortest_differences_in_both_directions_with_behaviours() -> None:
    left = lts("left", {0: [("a", 1)], 1: [(TAU, 2), ("b", 3)], 2: [("c", 4)], 3: [("d", 5)], 5: [("e", 6)]})
    right = lts("right", {0: [("a", 1)], 1: [("b", 2)], 2: [("d", 3)], 3: [("f", 4)]})
    result = language_difference(left, right, SEE_ACTIONS)
    assert not result.equal
    only_left, only_right = result.only
    assert labels(only_left) == ["a", "c"]  # shorter than a.b.d.e, which right does not allow either
    assert labels(only_right) == ["a", "b", "d", "f"]
    assert only_left is not None and only_right is not None
    assert [a for a, _ in only_left.steps[1:]] == ["a", TAU, "c"]  # a concrete behaviour of left, silent step included
    assert [s for _, s in only_left.steps] == [0, 1, 2, 4]
    assert [a for a, _ in only_left.other_steps[1:]] == ["a"]  # right up to the common prefix
    assert [a for a, _ in only_right.steps[1:]] == ["a", "b", "d", "f"]


def test_a_change_of_view_is_observed_without_an_action_label() -> None:
    # both do one silent step; the view (state parity) tells them apart
    left = lts("left", {0: [(TAU, 1)]})
    right = lts("right", {0: [(TAU, 2)]})
    parity = Projection(lambda action: None, lambda state: state % 2)
    result = language_difference(left, right, parity)
    assert result.only[0] is not None and result.only[0].labels == ((None, 1),)
    assert result.only[1] is None  # right's step changes nothing visible: a silent step
    assert language_difference(right, right, parity).equal


def test_the_state_cap_makes_the_result_incomplete() -> None:
    chain = lts("chain", {n: [("tick", n + 1)] for n in range(100)})
    result = language_difference(chain, chain, SEE_ACTIONS, max_states=10)
    assert not result.complete and not result.equal
    assert result.only == (None, None)
    assert result.stop_reason == "state cap of 10 reached"
    with pytest.raises(ValueError, match="max_states must be positive"):
        language_difference(chain, chain, SEE_ACTIONS, max_states=0)


def test_initial_states_with_different_views_are_refused() -> None:
    left, right = lts("a", {}), Model("b", lambda: [1], lambda s: [])
    with pytest.raises(ValueError, match="initial states show different views"):
        language_difference(left, right, Projection(lambda a: a, lambda s: s))
