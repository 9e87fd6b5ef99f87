"""Pieces the RocketMQ and Pulsar system models share: labelled actions, fault budgets, weak fairness by
action kind, and the lookup of a scenario or variant by name.

A fault budget is data (``(fault, times)`` pairs, sorted, so that states stay hashable and canonical);
a state records how many times each fault was used the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TypeVar

Counts = tuple[tuple[str, int], ...]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Action:
    """A step's label: ``kind`` is its coverage and fairness class, ``text`` what reports show."""

    kind: str
    text: str

    def __str__(self) -> str:
        return self.text


def count(counts: Counts, fault: str) -> int:
    return dict(counts).get(fault, 0)


def with_one_more(counts: Counts, fault: str) -> Counts:
    used = dict(counts)
    used[fault] = used.get(fault, 0) + 1
    return tuple(sorted(used.items()))


class FaultLedger:
    """Mixin of a frozen state with a ``faults_used`` field: how often a fault was used, and the counts after
    one more (the state stays canonical: counts are sorted pairs)."""

    __slots__ = ()
    faults_used: Counts

    def used(self, fault: str) -> int:
        return count(self.faults_used, fault)

    def spend(self, fault: str) -> Counts:
        """The fault counts after one more ``fault``."""
        return with_one_more(self.faults_used, fault)


def fairness_by_kind(fair_kinds: Collection[str]) -> Callable[[object], str | None]:
    """Weak fairness per action kind for the protocol's own steps; None for choices and faults."""
    def fairness(action: object) -> str | None:
        kind = getattr(action, "kind", None)
        return kind if kind in fair_kinds else None
    return fairness


def named(table: Mapping[str, T], name: str, what: str) -> T:
    """``table[name]``, or a ``KeyError`` naming the known ``what``s."""
    try:
        return table[name]
    except KeyError:
        raise KeyError(f"unknown {what} {name!r}; known: {', '.join(table)}") from None
