"""Kafka behaviour cases (format ``txn-case/1``) run against a target: the spec or the implementation.

A case (see ``conformance/data/FORMAT.md``) gives one component's state, then steps: a request or
event (``when``) and what Kafka's own unit test asserts afterwards (``then``). A target turns ``given``
into a session and each ``when`` into an *observation*: a dict with the keys ``then`` may check
(``error``, ``producer_id``, ``log_append``, ``state``, ``records`` ...). The runner compares ``then``
with the observation partially (a key absent from ``then`` is not checked) and reports per case.

Comparison rules (FORMAT.md): objects compare partially; lists compare whole (same length), lists of
strings (partition names) as sets, other lists in order with their objects compared partially;
``None`` compares exactly (``log_append: null`` means nothing was written).

A malformed case (a line that is not UTF-8 or not JSON or nested too deeply, an unknown component, a
``when`` the target does not know, a value of the wrong type) is reported as an error for that case
(``malformed``); the other cases still run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from txnspec.conformance.cases.format import (
    COMPONENTS,
    CaseInputError,
    CaseSession,
    CaseTarget,
    iter_cases,
    parse_case_line,
)

__all__ = ["COMPONENTS", "CaseInputError", "CaseReport", "CaseResult", "CaseSession", "CaseTarget", "Mismatch",
           "compare", "iter_cases", "parse_case_line", "run_case", "run_cases", "target_named"]

@dataclass(frozen=True)
class Mismatch:
    step: int
    path: str
    expected: Any
    actual: Any

    def __str__(self) -> str:
        return f"step {self.step}: {self.path}: expected {self.expected!r}, got {self.actual!r}"


@dataclass(frozen=True)
class CaseResult:
    case_id: str
    verdict: str  # "pass" | "fail" | "error"
    mismatches: tuple[Mismatch, ...] = ()
    error: str = ""
    source: str = ""
    malformed: bool = False  # the case itself is bad input (not the target's failure)

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"


@dataclass
class CaseReport:
    results: list[CaseResult] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return sum(r.passed for r in self.results)

    @property
    def failed(self) -> int:
        return len(self.results) - self.passed


def compare(expected: Any, actual: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Differences between an expectation and an observation, as ``(path, expected, actual)``."""
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            return [(path or "<root>", expected, actual)]
        diffs: list[tuple[str, Any, Any]] = []
        for key, want in expected.items():
            sub = f"{path}.{key}" if path else str(key)
            if key not in actual:
                diffs.append((sub, want, "<not reported>"))
            else:
                diffs.extend(compare(want, actual[key], sub))
        return diffs
    if isinstance(expected, list):
        if not isinstance(actual, list | tuple) or len(actual) != len(expected):
            return [(path, expected, actual)]
        if all(isinstance(x, str) for x in expected):
            return [] if set(expected) == set(actual) else [(path, expected, actual)]
        diffs = []
        for i, (want, got) in enumerate(zip(expected, actual, strict=True)):
            diffs.extend(compare(want, got, f"{path}[{i}]"))
        return diffs
    if expected is None or isinstance(expected, bool) or isinstance(actual, bool):
        return [] if expected is actual or (expected == actual and type(expected) is type(actual)) else [
            (path, expected, actual)]
    return [] if expected == actual else [(path, expected, actual)]


def run_case(case: Mapping[str, Any], target: CaseTarget) -> CaseResult:
    """Run one parsed case; never raises for a problem with the case or the target."""
    case_id = str(case["id"])
    source = str(case.get("source", ""))
    try:
        session = target(case["component"], case["given"])
        mismatches: list[Mismatch] = []
        for i, step in enumerate(case["steps"]):
            observation = session.apply(step["when"])
            for path, want, got in compare(step.get("then", {}), observation):
                mismatches.append(Mismatch(i, path, want, got))
        verdict = "fail" if mismatches else "pass"
        return CaseResult(case_id, verdict, tuple(mismatches), source=source)
    except CaseInputError as exc:
        return CaseResult(case_id, "error", error=f"malformed case: {exc}", source=source, malformed=True)
    except Exception as exc:  # a crash inside the target is that case's error, not the run's
        return CaseResult(case_id, "error", error=f"{type(exc).__name__}: {exc}", source=source)


def run_cases(path: Path, target: CaseTarget) -> CaseReport:
    report = CaseReport()
    for lineno, case in iter_cases(path):
        if isinstance(case, CaseInputError):
            report.results.append(CaseResult(f"<line {lineno}>", "error", error=str(case), malformed=True))
        else:
            report.results.append(run_case(case, target))
    return report


def target_named(name: str) -> CaseTarget:
    """The case target called ``name`` (``spec`` or ``impl``)."""
    if name == "spec":
        from txnspec.conformance.cases.targets.spec_target import spec_session
        return spec_session
    if name == "impl":
        from txnspec.conformance.cases.targets.impl_target import impl_session
        return impl_session
    raise CaseInputError(f"unknown target {name!r} (expected 'spec' or 'impl')")
