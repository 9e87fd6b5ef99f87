"""The reference implementation with one seeded bug switched on (:mod:`txnspec.impl._mutants`), as a replay
adapter: what the conformance suite's mutation score (:mod:`txnspec.conformance.mutation`) replays against."""

from __future__ import annotations

from txnspec.conformance.adapters.impl_adapter import ImplAdapter
from txnspec.impl import _mutants


class ImplMutantAdapter(ImplAdapter):
    """The implementation with one seeded bug switched on (in the process that replays)."""

    def __init__(self, mutant: str) -> None:
        if mutant not in _mutants.MUTANTS:
            raise ValueError(f"unknown implementation mutant {mutant!r}; known: {', '.join(_mutants.MUTANTS)}")
        super().__init__()
        self.mutant = mutant

    def reset(self, scenario: str, variant: str = "current") -> None:
        _mutants.activate(self.mutant)
        super().reset(scenario, variant)
