"""The audit report: each rule or guarantee checked against a broker, held or violated.

Both audit levels produce :class:`RuleResult` rows: the wire level (one row per broker rule the spec
states, e.g. "a duplicate of one of the last 5 batches is answered with its original offset") and the
client level (one row per anomaly kind the history checker looks for, e.g. "aborted read"). A violated
row carries up to a few minimal reproducing sequences: the requests sent (or the operations of the
history) and what the spec expected against what the broker answered.

Exit statuses follow the rest of txnspec: 0 every rule held, 1 something was violated, 2 the broker
could not be reached or started (see :class:`BrokerUnavailable`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Level = Literal["wire", "client"]
Outcome = Literal["held", "violated", "not checked"]


class BrokerUnavailable(Exception):
    """The broker could not be started or reached; the message says which and why."""


@dataclass
class RuleResult:
    level: Level
    rule: str                     # a stable identifier, e.g. "produce.duplicate_of_last_batch"
    description: str              # one sentence a reader understands without the source
    checked: int = 0              # how many times the rule was exercised
    violations: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)  # minimal reproducing sequences
    note: str = ""                # e.g. why a rule could not be checked on this broker

    @property
    def outcome(self) -> Outcome:
        if self.violations:
            return "violated"
        return "held" if self.checked else "not checked"


@dataclass
class AuditReport:
    broker: str
    levels: tuple[Level, ...]
    seed: int
    rules: list[RuleResult] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)  # broker version, bootstrap, ops run, timings

    @property
    def ok(self) -> bool:
        return all(r.violations == 0 for r in self.rules)

    def to_json(self) -> dict[str, Any]:
        return {"broker": self.broker, "levels": list(self.levels), "seed": self.seed, "facts": self.facts,
                "ok": self.ok,
                "rules": [{**asdict(r), "outcome": r.outcome} for r in self.rules]}

    def render(self) -> str:
        lines = [f"txnspec audit of {self.broker} (levels: {', '.join(self.levels)}; seed {self.seed})"]
        for key, value in self.facts.items():
            lines.append(f"  {key}: {value}")
        for level in self.levels:
            rows = [r for r in self.rules if r.level == level]
            lines.append("")
            lines.append(f"{level} level: {sum(r.outcome == 'held' for r in rows)} held, "
                         f"{sum(r.outcome == 'violated' for r in rows)} violated, "
                         f"{sum(r.outcome == 'not checked' for r in rows)} not checked")
            for r in rows:
                lines.append(f"  {r.outcome.upper():11} {r.rule}  ({r.checked} checked, {r.violations} violated)")
                lines.append(f"              {r.description}")
                if r.note:
                    lines.append(f"              note: {r.note}")
                for example in r.examples[:3]:
                    lines.append("              e.g. " + json.dumps(example, sort_keys=True, default=str))
        held = sum(r.outcome == "held" for r in self.rules)
        violated = sum(r.outcome == "violated" for r in self.rules)
        lines.append("")
        lines.append(f"{held} held, {violated} violated")
        return "\n".join(lines)
