"""The partial-order reduction's verdicts on the fault scenarios are those of the full search (the rest of the
comparison, and why it holds, in tests/spec/test_reduction.py; these searches are most of its cost, so they run in
a module of their own and the two workers share them)."""

from __future__ import annotations

import pytest
from test_reduction import ALL_VARIANTS, FAULTY, SMALL, _verdicts

assert set(FAULTY) <= set(SMALL)


@pytest.mark.parametrize("variant", ALL_VARIANTS)
@pytest.mark.parametrize("name", FAULTY)
def test_verdicts_are_those_of_the_full_search_with_faults(name: str, variant: str) -> None:
    assert _verdicts(name, variant, reduced=True) == _verdicts(name, variant, reduced=False)
