"""A generic symbolic engine over z3: transition systems, induction, k-induction and BMC.

System
    A :class:`SymbolicModel` is a set of typed state variables, an initial predicate and a list of named
    :class:`Transition` records (mypyvy's ``transition name(params) modifies x, y``: a guard, an update
    relation over the modified variables and the parameters, every other variable unchanged).
    :func:`check_inductive` proves invariants by induction (or k-induction), one
    (transition, invariant) pair per solver scope; :func:`bmc` unrolls to a depth and returns the
    shortest path to a violation.

Assumptions
    The engine knows nothing of Kafka: it imports nothing of txnspec (a test enforces it).
"""

from txnspec.checker.symbolic.bmc import BmcResult, bmc
from txnspec.checker.symbolic.induction import Failure, ProofResult, check_inductive
from txnspec.checker.symbolic.transition import (
    Invariant,
    StepInvariant,
    SymbolicModel,
    Transition,
    Vars,
    decode_frame,
)

__all__ = [
    "BmcResult", "Failure", "Invariant", "ProofResult", "StepInvariant", "SymbolicModel", "Transition", "Vars",
    "bmc", "check_inductive", "decode_frame",
]
