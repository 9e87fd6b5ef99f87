"""The format of Kafka behaviour cases (``txn-case/1``, ``conformance/data/FORMAT.md``): reading a case file,
the error a malformed case raises, and what a case target is.

Kept apart from the runner (:mod:`txnspec.conformance.cases`) so that the case targets
(:mod:`txnspec.conformance.cases.targets`) import the format without importing the runner that loads them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

COMPONENTS = ("coordinator", "partition", "client", "group")


class CaseInputError(ValueError):
    """The case is malformed or asks for something the format does not define."""


class CaseSession(Protocol):
    """One component instance built from a case's ``given``."""

    def apply(self, when: Mapping[str, Any]) -> dict[str, Any]:
        """Apply one request or event and return the observation (see module doc)."""
        ...


# A target builds a session for a component from the case's ``given``.
CaseTarget = Callable[[str, Mapping[str, Any]], CaseSession]


def parse_case_line(line: str, lineno: int) -> dict[str, Any]:
    try:
        case = json.loads(line)
    except json.JSONDecodeError as exc:
        raise CaseInputError(f"line {lineno}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise CaseInputError(f"line {lineno}: JSON nested too deeply") from None
    if not isinstance(case, dict):
        raise CaseInputError(f"line {lineno}: a case must be a JSON object, got {type(case).__name__}")
    for key, kind in (("id", str), ("component", str), ("given", dict), ("steps", list)):
        if key not in case:
            raise CaseInputError(f"line {lineno}: case has no {key!r}")
        if not isinstance(case[key], kind):
            raise CaseInputError(f"line {lineno}: {key!r} must be a {kind.__name__}")
    if case["component"] not in COMPONENTS:
        raise CaseInputError(
            f"case {case['id']}: unknown component {case['component']!r} (expected one of {COMPONENTS})")
    for i, step in enumerate(case["steps"]):
        if not isinstance(step, dict) or not isinstance(step.get("when"), dict) \
                or not isinstance(step.get("then", {}), dict):
            raise CaseInputError(f"case {case['id']}: step {i} must be an object with 'when' and 'then' objects")
    return case


def iter_cases(path: Path) -> Iterator[tuple[int, dict[str, Any] | CaseInputError]]:
    """Yield ``(line number, case or the error that made it unreadable)`` for each non-blank line."""
    with path.open("rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield lineno, CaseInputError(f"line {lineno}: not UTF-8 (byte 0x{raw[exc.start]:02x} at column "
                                             f"{exc.start + 1})")
                continue
            if line.strip():
                try:
                    yield lineno, parse_case_line(line, lineno)
                except CaseInputError as exc:
                    yield lineno, exc
