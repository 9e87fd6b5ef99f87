"""The partial-order reduction's verdicts on the fault scenarios are those of the full search (the rest of the
comparison, and why it holds, in tests/spec/test_reduction.py). The default tier compares every variant on
``loss`` (the cheapest: about a CPU second a variant) and the current protocol on the others; every variant on
``faults`` (one loss, one failed append and one crash in one budget: about 5 CPU seconds a variant), ``crash``
and ``append-failure`` is most of the sweep's cost (``-m slow``), so it runs in a module of its own and two
workers share the sweep."""

from __future__ import annotations

import pytest
from test_reduction import FAULTY, SMALL, _verdicts, verdict_cases

assert set(FAULTY) <= set(SMALL)


@pytest.mark.parametrize(("name", "variant"), verdict_cases(FAULTY))
def test_verdicts_are_those_of_the_full_search_with_faults(name: str, variant: str) -> None:
    assert _verdicts(name, variant, reduced=True) == _verdicts(name, variant, reduced=False)
