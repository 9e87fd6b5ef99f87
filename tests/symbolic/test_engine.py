"""The generic symbolic engine on a toy system: a counter that counts up to a bound and resets."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
import z3

from txnspec.checker.symbolic import (
    Invariant,
    StepInvariant,
    SymbolicModel,
    Transition,
    bmc,
    check_inductive,
)

pytestmark = pytest.mark.quick  # the whole module is in the quick tier

ROOT = Path(__file__).resolve().parents[2]


def counter(bound: int = 3, buggy: bool = False) -> SymbolicModel:
    """x counts from 0 up to ``bound`` then resets; y counts the resets (never modified by Inc)."""
    limit = bound + 1 if buggy else bound
    inc = Transition("Inc", lambda c, p: c["x"] < limit, lambda c, n, p: n["x"] == c["x"] + 1, ("x",))
    reset = Transition("Reset", lambda c, p: c["x"] == bound,
                       lambda c, n, p: z3.And(n["x"] == 0, n["y"] == c["y"] + p["by"]), ("x", "y"),
                       {"by": z3.IntSort()})
    return SymbolicModel({"x": z3.IntSort(), "y": z3.IntSort()},
                         lambda s: z3.And(s["x"] == 0, s["y"] == 0), [inc, reset])


BOUNDED = Invariant("bounded", lambda s: z3.And(s["x"] >= 0, s["x"] <= 3))
NOT_TWO_AT_ONCE = Invariant("x_small", lambda s: s["x"] <= 2)


def test_induction_proves_a_bound() -> None:
    result = check_inductive(counter(), [BOUNDED])
    assert result.ok and result.status == "proved"
    assert set(result.timings) >= {"bounded/init", "bounded/Inc", "bounded/Reset"}


def test_induction_names_the_transition_that_breaks_it() -> None:
    result = check_inductive(counter(buggy=True), [BOUNDED])
    assert result.status == "violated"
    [failure] = result.failures
    assert (failure.kind, failure.transition, failure.invariant) == ("step", "Inc", "bounded")
    pre, post = failure.states
    assert post["x"] == pre["x"] + 1 == 4


def swapper() -> SymbolicModel:
    """a and b swap their values; both start at 0."""
    swap = Transition("Swap", lambda c, p: z3.BoolVal(True),
                      lambda c, n, p: z3.And(n["a"] == c["b"], n["b"] == c["a"]), ("a", "b"))
    return SymbolicModel({"a": z3.IntSort(), "b": z3.IntSort()}, lambda s: z3.And(s["a"] == 0, s["b"] == 0), [swap])


A_ZERO = Invariant("a_zero", lambda s: s["a"] == 0)


def test_a_strengthening_invariant_makes_it_inductive() -> None:
    alone = check_inductive(swapper(), [A_ZERO])
    assert alone.status == "violated" and alone.failures[0].transition == "Swap"
    assert check_inductive(swapper(), [A_ZERO], [Invariant("b_zero", lambda s: s["b"] == 0)]).ok


def test_k_induction_proves_what_plain_induction_cannot() -> None:
    assert check_inductive(swapper(), [A_ZERO], k=2).ok
    assert check_inductive(counter(buggy=True), [BOUNDED], k=3).status == "violated"


def test_bmc_finds_the_shortest_path() -> None:
    result = bmc(counter(), [NOT_TWO_AT_ONCE], depth=6)
    assert result.status == "violated" and result.depth == 3
    assert [name for name, _ in result.path] == ["init", "Inc", "Inc", "Inc"]
    assert [state["x"] for _, state in result.path] == [0, 1, 2, 3]


def test_bmc_step_invariant_and_clean_run() -> None:
    monotone = StepInvariant("x_grows", lambda c, n: n["x"] >= c["x"])
    result = bmc(counter(), [monotone], depth=6)
    assert result.status == "violated" and result.path[-1][0] == "Reset"
    assert bmc(counter(), [BOUNDED], depth=8).ok


def test_unchanged_comes_from_modifies() -> None:
    model = counter()
    succ = model.successor(model.transition("Inc"), {"x": 1, "y": 7}, {})
    assert succ == {"x": 2, "y": 7}
    assert model.successor(model.transition("Reset"), {"x": 1, "y": 7}, {"by": 1}) is None


def test_unknown_is_reported_as_unknown() -> None:
    # nonlinear integer arithmetic with a tiny timeout: z3 gives up rather than answering
    hard = SymbolicModel({"a": z3.IntSort(), "b": z3.IntSort(), "c": z3.IntSort()},
                         lambda s: z3.And(s["a"] > 0, s["b"] > 0, s["c"] > 0),
                         [Transition("Stay", lambda c, p: z3.BoolVal(True), lambda c, n, p: z3.BoolVal(True), ())])
    fermat = Invariant("fermat3", lambda s: s["a"] ** 3 + s["b"] ** 3 != s["c"] ** 3)
    result = check_inductive(hard, [fermat], timeout_ms=50)
    assert result.status in ("unknown", "proved")  # never "violated"
    if result.status == "unknown":
        assert result.failures[0].status == "unknown"


def test_the_engine_imports_nothing_of_txnspec_but_itself() -> None:
    for path in sorted((ROOT / "checker" / "symbolic").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            modules: list[Any] = []
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module]
            for module in modules:
                if module.startswith("txnspec"):
                    assert module.startswith("txnspec.checker.symbolic"), f"{path.name} imports {module}"
