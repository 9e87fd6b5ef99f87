"""The registry of protocol variants: what a :class:`Variant` is, and the table every variant module adds to.

Kept apart from the package's ``__init__`` so that the variant modules (:mod:`.bugs`, :mod:`.versions`) import
it without importing the package that loads them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from txnspec.spec.protocol import CURRENT, Protocol
from txnspec.spec.scenarios import Scenario


@dataclass(frozen=True)
class Variant:
    name: str
    description: str
    reference: str
    change_protocol: Callable[[Protocol], Protocol] = lambda p: p
    change_scenario: Callable[[Scenario], Scenario] = lambda s: s
    expected_violation: str | None = None  # the property the checker must find violated

    @property
    def protocol(self) -> Protocol:
        return self.change_protocol(CURRENT) if self.name != "current" else CURRENT

    def scenario(self, s: Scenario) -> Scenario:
        return self.change_scenario(s)


VARIANTS: dict[str, Variant] = {}


def register(v: Variant) -> Variant:
    VARIANTS[v.name] = v
    return v
