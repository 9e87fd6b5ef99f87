"""Mutation check: each seeded mistake in the spec is killed by the property expected to kill it, and
the unmutated protocol holds on the same scenario (so the kill is the mistake's, not the scenario's)."""

from __future__ import annotations

import pytest

from txnspec.checker import check
from txnspec.checker.model import Model
from txnspec.spec import properties as props
from txnspec.spec import system as sysm
from txnspec.spec.model import fairness
from txnspec.spec.mutants import Mutant, build_mutant_model, mutants
from txnspec.spec.protocol import CURRENT

MUTANTS = {m.name: m for m in mutants()}


def test_there_are_at_least_ten_mutants() -> None:
    assert len(MUTANTS) >= 10


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_the_mutant_is_killed_by_its_property(name: str) -> None:
    mutant = MUTANTS[name]
    result = check(build_mutant_model(mutant))
    assert result.verdict(mutant.killed_by).holds is False, result.render()


def _current_on(mutant: Mutant) -> Model[sysm.SystemState]:
    system = sysm.System(mutant.scenario, CURRENT)
    return Model("current", lambda: (sysm.initial_state(system),), lambda s: sysm.next_steps(system, s),
                 props.properties(system), is_final=props.is_final(system), fairness=fairness)


@pytest.mark.parametrize("scenario", sorted({(m.scenario.name, m.scenario.transaction_version,
                                               m.scenario.partition_verification) for m in MUTANTS.values()}))
def test_the_current_protocol_holds_where_the_mutants_are_killed(scenario: tuple[str, int, bool]) -> None:
    mutant = next(m for m in MUTANTS.values()
                  if (m.scenario.name, m.scenario.transaction_version, m.scenario.partition_verification) == scenario)
    result = check(_current_on(mutant))
    assert result.complete and result.ok, result.render()
