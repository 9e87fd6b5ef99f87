"""The conformance matrix: every Kafka scenario at both transaction versions against one adapter, one table.

Each cell is one conformance run (:func:`txnspec.conformance.spark_job.run_job`, seeded random walks) of a
scenario at TV2 (variant ``current``) or TV1 (variant ``tv1``), all cells in one Spark session. A row says
how many traces passed and diverged, which action kinds the traces took out of *every* kind the model
defines (:class:`txnspec.spec.actions.ActionKind`), and which coordinator transitions they went through out
of every transition Kafka's table allows (``TransactionState.validPreviousStates``, plus a new transactional
id's first state): a kind or a transition no trace takes shows as a gap, never as full coverage.

Assumes: random walks only (a covering set needs each scenario's whole state graph, and ``large``'s is big).
Leaves out: the other systems (RocketMQ, Pulsar) and the variants that are bugs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from txnspec.spec.actions import ActionKind
from txnspec.spec.txn_state import VALID_PREVIOUS_STATES, TxnState

# (variant, the transaction version the table shows)
VERSIONS: tuple[tuple[str, int], ...] = (("current", 2), ("tv1", 1))
NEW_ID = "-"  # transitions_between's name for a transactional id the coordinator does not know yet


def all_kinds() -> tuple[str, ...]:
    """Every action kind of the model, as coverage names them."""
    return tuple(k.value for k in ActionKind)


def all_transitions() -> tuple[str, ...]:
    """Every coordinator transition Kafka's table allows, named as traces' coverage names them."""
    allowed = {f"{before.value}->{after.value}" for after, befores in VALID_PREVIOUS_STATES.items()
               for before in befores}
    return tuple(sorted(allowed | {f"{NEW_ID}->{TxnState.EMPTY.value}"}))


@dataclass(frozen=True)
class Cell:
    """One scenario at one transaction version."""

    scenario: str
    variant: str
    transaction_version: int
    traces: int
    passed: int
    diverged: int
    errors: int
    kinds: tuple[str, ...]  # the kinds the traces took
    transitions: tuple[str, ...]  # the coordinator transitions the traces went through (of all_transitions)

    @property
    def missing_kinds(self) -> tuple[str, ...]:
        return tuple(k for k in all_kinds() if k not in self.kinds)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "missing_kinds": list(self.missing_kinds), "all_kinds": len(all_kinds()),
                "all_transitions": len(all_transitions())}


def cell_from_summary(summary: dict[str, Any], transaction_version: int) -> Cell:
    coverage = summary["coverage"]
    known = set(all_transitions())
    return Cell(summary["scenario"], summary["variant"], transaction_version, summary["traces"], summary["passed"],
                summary["diverged"], summary["errors"], tuple(sorted(coverage["kinds"])),
                tuple(sorted(t for t in coverage["transitions"] if t in known)))


def kafka_scenarios() -> tuple[str, ...]:
    from txnspec.spec.scenarios import SCENARIOS

    return tuple(SCENARIOS)


def run_matrix(adapter: str, traces: int, *, out: Path, session: Any, seed: int = 0, max_steps: int = 200,
               scenarios: Sequence[str] | None = None, versions: Sequence[tuple[str, int]] = VERSIONS,
               on_cell: Callable[[Cell], None] | None = None) -> list[Cell]:
    """Run every (scenario, version) cell on ``session``; results under ``out/<scenario>-<variant>/``."""
    from txnspec.conformance.spark_job import JobConfig, run_job

    cells = []
    for scenario in scenarios or kafka_scenarios():
        for variant, version in versions:
            config = JobConfig(scenario=scenario, traces=traces, strategy="random", variant=variant, seed=seed,
                               max_steps=max_steps, adapter=adapter)
            result = run_job(config, out=out / f"{scenario}-{variant}", session=session)
            cell = cell_from_summary(result.summary, version)
            cells.append(cell)
            if on_cell is not None:
                on_cell(cell)
    return cells


def render(cells: Sequence[Cell], adapter: str, *, short: bool = False) -> str:
    """The matrix as a table (``short``: one line per cell without the gaps, for the main job)."""
    n_kinds, n_transitions = len(all_kinds()), len(all_transitions())
    lines = [f"conformance matrix against {adapter}: {len(cells)} runs, "
             f"{sum(c.traces for c in cells):,} traces, {sum(c.diverged + c.errors for c in cells)} failed",
             f"  {'scenario':18} {'TV':>2} {'traces':>7} {'passed':>7} {'diverged':>8} "
             f"{'kinds':>7} {'transitions':>11}"]
    for c in cells:
        diverged = c.diverged + c.errors
        lines.append(f"  {c.scenario:18} {c.transaction_version:>2} {c.traces:>7} {c.passed:>7} {diverged:>8} "
                     f"{len(c.kinds):>3}/{n_kinds:<3} {len(c.transitions):>5}/{n_transitions:<5}")
        if not short and c.missing_kinds:
            lines.append(f"      kinds never taken: {', '.join(c.missing_kinds)}")
    taken = {k for c in cells for k in c.kinds}
    through = {t for c in cells for t in c.transitions}
    lines.append(f"  all cells together: {len(taken)}/{n_kinds} action kinds, "
                 f"{len(through)}/{n_transitions} coordinator transitions")
    gaps = [k for k in all_kinds() if k not in taken] + [t for t in all_transitions() if t not in through]
    if gaps:
        lines.append(f"  never taken by any cell: {', '.join(gaps)}")
    return "\n".join(lines)
