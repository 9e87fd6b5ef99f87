"""What the request probes of the wire rules share (:mod:`.timeout`, :mod:`.request_tv`): a check that records the
requests sent so far, so that a violation's example is the whole sequence that led to it, and the retry of an
answer a client would retry.

Assumes
    A probe's rule is one :class:`~txnspec.audit.report.RuleResult`; its first failed check ends the probe.
    A retriable answer (:data:`~txnspec.audit.trace_replay.RETRIABLE`: a coordinator still loading, not yet the
    leader) is asked again a bounded number of times (:data:`~txnspec.audit.trace_replay.RETRIES`), as a client
    does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from txnspec.audit.report import RuleResult
from txnspec.audit.trace_replay import RETRIABLE, RETRIES

POLL_SECONDS = 0.25  # between retries, and between the reads of a probe waiting for the broker


class Checker:
    """Compares each answer with the spec's and counts it in ``result``; a mismatch is a violation whose example is
    every request sent so far (``{"request", "expected", "actual"}``)."""

    def __init__(self, result: RuleResult) -> None:
        self.result = result
        self.sent: list[dict[str, Any]] = []

    def __call__(self, request: str, expected: Any, actual: Any) -> bool:
        self.sent.append({"request": request, "expected": expected, "actual": actual})
        self.result.checked += 1
        if actual == expected:
            return True
        self.result.violations += 1
        self.result.examples.append({"sequence": list(self.sent)})
        return False


def retrying(call: Callable[..., dict[str, Any]], *args: Any, sleep: Callable[[float], None] = time.sleep
             ) -> dict[str, Any]:
    """``call(*args)``, asked again while its answer's error is retriable (bounded)."""
    answer: dict[str, Any] = call(*args)
    for _ in range(RETRIES):
        if answer.get("error") not in RETRIABLE:
            break
        sleep(POLL_SECONDS)
        answer = call(*args)
    return answer
