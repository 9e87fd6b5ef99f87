"""The reference implementation built with one seeded bug (:mod:`txnspec.impl.mutants`: Kafka's rules with one
field replaced), as a replay adapter: what the conformance suite's mutation score
(:mod:`txnspec.conformance.mutation`) replays against."""

from __future__ import annotations

from txnspec.conformance.adapters.impl_adapter import ImplAdapter
from txnspec.impl.mutants import rules_of


class ImplMutantAdapter(ImplAdapter):
    """The implementation with one seeded bug: every cluster it builds follows the mutant's rules."""

    def __init__(self, mutant: str) -> None:
        super().__init__(rules_of(mutant))
        self.mutant = mutant
