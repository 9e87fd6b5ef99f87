"""Transition systems for z3: state variables per frame, named transitions with ``modifies``.

A frame is a dict from variable name to a z3 constant named ``name@tag``. A transition's guard sees
the current frame and its parameters; its update relates the current frame, the next frame and the
parameters, and may mention only the variables in ``modifies``: the engine adds ``x' == x`` for every
other variable (the ``UNCHANGED`` a TLA+ author would write by hand).

References: mypyvy (``transition ... modifies``), Apalache's per-action inductive checks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import z3

Vars = Mapping[str, Any]  # name -> z3 expression (a frame, or a transition's parameters)
Guard = Callable[[Vars, Vars], Any]  # (current, params) -> BoolRef
Update = Callable[[Vars, Vars, Vars], Any]  # (current, next, params) -> BoolRef
Decoder = Callable[[z3.ModelRef, Vars], dict[str, Any]]


@dataclass(frozen=True)
class Transition:
    """One named action: ``guard(cur, p) and update(cur, nxt, p)``; variables outside ``modifies`` keep their value."""

    name: str
    guard: Guard
    update: Update
    modifies: tuple[str, ...]
    params: Mapping[str, z3.SortRef] = field(default_factory=dict)


@dataclass(frozen=True)
class Invariant:
    """A state predicate ``formula(frame)`` that must hold in every reachable state."""

    name: str
    formula: Callable[[Vars], Any]
    doc: str = ""


@dataclass(frozen=True)
class StepInvariant:
    """A two-state predicate ``formula(cur, nxt)`` that every step must satisfy (an action property)."""

    name: str
    formula: Callable[[Vars, Vars], Any]
    doc: str = ""


AnyInvariant = Invariant | StepInvariant


def decode_frame(model: z3.ModelRef, frame: Vars) -> dict[str, Any]:
    """The values of a frame in a z3 model as Python ints, bools and strings (enum constants by name)."""
    out: dict[str, Any] = {}
    for name, const in frame.items():
        value = model.eval(const, model_completion=True)
        if z3.is_int_value(value):
            out[name] = value.as_long()
        elif z3.is_true(value):
            out[name] = True
        elif z3.is_false(value):
            out[name] = False
        else:
            out[name] = str(value)
    return out


@dataclass(frozen=True)
class SymbolicModel:
    """State variables (name -> sort), an initial predicate, named transitions and a decoder."""

    variables: Mapping[str, z3.SortRef]
    init: Callable[[Vars], Any]
    transitions: Sequence[Transition]
    decoder: Decoder = decode_frame
    axioms: Callable[[Vars], Any] | None = None  # frame-wise facts (domains) assumed in every state

    def __post_init__(self) -> None:
        names = [t.name for t in self.transitions]
        if len(set(names)) != len(names):
            raise ValueError(f"transition names are not unique: {names}")
        for t in self.transitions:
            unknown = set(t.modifies) - set(self.variables)
            if unknown:
                raise ValueError(f"transition {t.name} modifies unknown variables {sorted(unknown)}")

    def frame(self, tag: str | int) -> dict[str, Any]:
        return {name: z3.Const(f"{name}@{tag}", sort) for name, sort in self.variables.items()}

    def params(self, t: Transition, tag: str | int) -> dict[str, Any]:
        return {name: z3.Const(f"{t.name}.{name}@{tag}", sort) for name, sort in t.params.items()}

    def transition(self, name: str) -> Transition:
        for t in self.transitions:
            if t.name == name:
                return t
        raise KeyError(f"no transition named {name!r} (known: {', '.join(t.name for t in self.transitions)})")

    def domain(self, frame: Vars) -> Any:
        return z3.BoolVal(True) if self.axioms is None else self.axioms(frame)

    def step(self, t: Transition, cur: Vars, nxt: Vars, params: Vars) -> Any:
        """``guard and update and UNCHANGED(every variable t does not modify)``."""
        unchanged = [nxt[v] == cur[v] for v in self.variables if v not in t.modifies]
        return z3.And(t.guard(cur, params), t.update(cur, nxt, params), *unchanged)

    def successor(self, t: Transition, current: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any] | None:
        """The successor of concrete ``current`` under ``t`` with concrete ``params``, asked of z3 (None: disabled).

        Values are Python ints/bools or z3 expressions (for enum constants)."""
        cur, nxt, p = self.frame("c"), self.frame("n"), self.params(t, "c")
        s = z3.Solver()
        s.add(*(cur[k] == _val(v, cur[k]) for k, v in current.items()))
        s.add(*(p[k] == _val(v, p[k]) for k, v in params.items()))
        s.add(self.step(t, cur, nxt, p))
        if s.check() != z3.sat:
            return None
        return self.decoder(s.model(), nxt)


def _val(value: Any, like: Any) -> Any:
    if isinstance(value, bool):
        return z3.BoolVal(value)
    if isinstance(value, int) and z3.is_int(like):
        return z3.IntVal(value)
    return value
