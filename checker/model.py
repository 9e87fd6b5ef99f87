"""The model contract: what a specification hands to the checker engines.

The engines in this package know nothing about Kafka. A specification describes itself with a
:class:`Model` (initial states, labelled successor steps, named properties) and the engines explore it.
This follows stateright's ``Model`` trait and Hypothesis's rule against subclassing in a public API:
a model is a value made of plain functions, not a class to inherit from.

Contract
--------
* States are frozen, hashable values (equal states must hash equally); the engines store them as
  dictionary keys.
* ``next_steps(state)`` yields ``(action, next_state)`` pairs. An action is any hashable label; its
  ``str()`` is what reports show, so give it a readable ``__str__`` (e.g. ``EndTxn(t1, COMMIT)``),
  and a ``kind`` attribute (what coverage counts), as :class:`Label` does; the engines never read the text.
  A disabled action simply yields nothing.
* Properties are named predicates over one state (see :class:`Property`). Every ``always`` property
  should have a ``sometimes`` partner so that a run which explores too little cannot pass.

What the contract leaves out: the engines never mutate states, never need an action's parameters, and
never call anything but the functions given here.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

S = TypeVar("S", bound=Hashable)
Action = Hashable


@dataclass(frozen=True, slots=True)
class Label:
    """A ready-made action for a model without a type of its own: a ``kind`` (what coverage counts, see
    :func:`txnspec.checker.report.action_kind`) and its arguments, shown as ``kind(arg, ...)`` in reports.

    >>> str(Label("inc", (3,))), str(Label("tick")), Label("inc", (3,)).kind
    ('inc(3)', 'tick', 'inc')
    """

    kind: str
    args: tuple[Hashable, ...] = ()

    def __str__(self) -> str:
        return f"{self.kind}({', '.join(map(str, self.args))})" if self.args else self.kind


class Expectation(enum.Enum):
    """How a property's predicate is judged over the explored state space."""

    ALWAYS = "always"
    """Holds in every reachable state (a safety invariant); a violation is a shortest path to it."""

    SOMETIMES = "sometimes"
    """Holds in at least one reachable state; its absence is a failure (the run explored too little)."""

    LEADS_TO = "leads_to"
    """Whenever ``trigger`` holds, ``condition`` eventually holds, on every weakly fair behaviour."""


@dataclass(frozen=True, slots=True)
class Property(Generic[S]):
    """A named predicate with an expectation.

    Attributes
    ----------
    name:
        Stable identifier used on the command line (``--property NAME``) and in reports.
    expectation:
        How the predicate is judged (:class:`Expectation`).
    condition:
        The predicate over one state.
    trigger:
        For ``LEADS_TO`` only: the states from which ``condition`` must eventually be reached.
    partner:
        For an ``ALWAYS`` property, the name of the ``SOMETIMES`` property that shows the invariant is
        not vacuous (for example "no aborted read" is partnered with "an aborted batch was fetched").
    description:
        One sentence a reader of a report understands without the source.
    """

    name: str
    expectation: Expectation
    condition: Callable[[S], bool]
    trigger: Callable[[S], bool] | None = None
    partner: str | None = None
    description: str = ""

    @staticmethod
    def always(name: str, condition: Callable[[Any], bool], *, partner: str | None = None,
               description: str = "") -> Property[Any]:
        return Property(name, Expectation.ALWAYS, condition, partner=partner, description=description)

    @staticmethod
    def sometimes(name: str, condition: Callable[[Any], bool], *, description: str = "") -> Property[Any]:
        return Property(name, Expectation.SOMETIMES, condition, description=description)

    @staticmethod
    def leads_to(name: str, trigger: Callable[[Any], bool], condition: Callable[[Any], bool], *,
                 description: str = "") -> Property[Any]:
        return Property(name, Expectation.LEADS_TO, condition, trigger=trigger, description=description)


@dataclass(frozen=True)
class Model(Generic[S]):
    """A finite (bounded) transition system with named properties.

    Attributes
    ----------
    name:
        Shown in reports, e.g. ``kafka-eos[scenario=tiny, variant=tv2]``.
    init_states:
        Returns the initial states.
    next_steps:
        Labelled successors of a state: an iterable of ``(action, next_state)``.
    properties:
        The properties the engines judge.
    symmetry:
        Optional canonicaliser: maps a state to the representative of its symmetry class (states that
        differ only by a permutation of interchangeable ids). Must be idempotent, and the properties must
        give the same verdict on a state and its representative.
    is_final:
        Optional: states with no successor that are an expected end (not a deadlock).
    fairness:
        Optional: maps an action to its weak-fairness class (a hashable), or ``None`` for actions that
        need not happen (faults, client choices). ``LEADS_TO`` properties are judged on behaviours that
        are weakly fair for every class.
    describe_state:
        Optional: a short, human-readable rendering of a state for counterexample reports.
    ample:
        Optional partial-order reduction: given a state and all its enabled steps (in ``next_steps``' order),
        the steps to explore from it, a subset the model promises is an ample set (nonempty, persistent,
        invisible to every ``always`` and ``sometimes`` property unless it is every step, and every cycle of
        the reduced graph passes through a state where it is every step). See :meth:`partial_order`.
    """

    name: str
    init_states: Callable[[], Iterable[S]]
    next_steps: Callable[[S], Iterable[tuple[Action, S]]]
    properties: Sequence[Property[S]] = ()
    symmetry: Callable[[S], S] | None = None
    is_final: Callable[[S], bool] | None = None
    fairness: Callable[[Action], Hashable | None] | None = None
    describe_state: Callable[[S], str] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    ample: Callable[[S, list[tuple[Any, S]]], list[tuple[Any, S]]] | None = None  # (action, state) steps

    def partial_order(self) -> Model[S]:
        """This model with its ample sets as its successor function: every engine then explores the reduced
        graph, with the same verdicts on ``always`` and ``sometimes`` properties (not the same counts, nor the
        same counterexample lengths). ``leads_to`` properties are left out: weak fairness needs every
        interleaving. A ``ValueError`` if the model offers no reduction."""
        if self.ample is None:
            raise ValueError(f"{self.name} offers no partial-order reduction (or has it applied already)")
        ample, next_steps = self.ample, self.next_steps

        def reduced(state: S) -> list[tuple[Action, S]]:
            return ample(state, list(next_steps(state)))

        return replace(self, name=f"{self.name} (partial-order reduced)", next_steps=reduced, ample=None,
                       properties=tuple(p for p in self.properties if p.expectation is not Expectation.LEADS_TO))

    def property(self, name: str) -> Property[S]:
        """The property called ``name``; ``KeyError`` naming the known ones otherwise."""
        for prop in self.properties:
            if prop.name == name:
                return prop
        known = ", ".join(p.name for p in self.properties)
        raise KeyError(f"unknown property {name!r}; this model has: {known}")

    def safety_properties(self, names: Sequence[str] | None, engine: str) -> list[Property[S]]:
        """The properties ``names`` (every one of the model's without), for an engine that keeps no state graph:
        a ``ValueError`` names the ``leads_to`` ones among them, which need every edge."""
        selected = [self.property(n) for n in dict.fromkeys(names)] if names is not None else list(self.properties)
        liveness = [p.name for p in selected if p.expectation is Expectation.LEADS_TO]
        if liveness:
            raise ValueError(f"leads-to properties need the whole state graph, which {engine} does not keep: "
                             f"{', '.join(liveness)} (liveness stays local: use the exact engine for them)")
        return selected


@dataclass(frozen=True)
class Projection:
    """What an observer sees of a step.

    Attributes
    ----------
    action_label:
        The observable label of an action, or ``None`` when the action itself is unobservable.
    state_view:
        What the observer sees of a state; a step that changes it is observable even when its action
        is not. ``None``: only action labels are observed.
    """

    action_label: Callable[[Any], Hashable | None]
    state_view: Callable[[Any], Hashable] | None = None
