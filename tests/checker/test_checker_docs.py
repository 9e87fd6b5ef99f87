"""The checker's doctests run, and importing the checker stays light (networkx only on demand)."""

from __future__ import annotations

import doctest
import subprocess
import sys

import pytest

from txnspec.checker import explicit, liveness, report, stable_fingerprint, traces


@pytest.mark.parametrize("module", [explicit, liveness, report, stable_fingerprint, traces], ids=lambda m: m.__name__)
def test_doctests(module: object) -> None:
    outcome = doctest.testmod(module)  # type: ignore[arg-type]
    assert outcome.failed == 0


def test_a_safety_check_does_not_import_networkx() -> None:
    code = ("import sys; from txnspec.checker import Model, Property, check; "
            "check(Model('m', lambda: [0], lambda n: [('inc', n + 1)] if n < 3 else [], is_final=lambda n: n == 3)); "
            "print('networkx' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
