"""The README's oracle example runs as written."""

from __future__ import annotations

import doctest
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_examples_run() -> None:
    failures, attempted = doctest.testfile(str(README), module_relative=False)
    assert attempted > 10 and failures == 0
