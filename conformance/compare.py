"""Kafka, RocketMQ and Pulsar side by side: one table of guarantees, each cell model-checked.

Each system's spec says, for each guarantee of :mod:`txnspec.spec.guarantees`, which scenario and
properties decide it and what verdict its source leads us to expect (or why it does not apply). This
module runs those checks (each distinct scenario and variant once, with every property any row needs)
and fills the table: *holds*, *violated* with the length of the shortest counterexample and the
command that prints it, or *n/a*. A cell whose verdict differs from the expected one is a finding (or
a spec bug) and makes ``txnspec compare`` exit 1.

The table is computed, never written by hand: docs/comparison.md is the ``--markdown-out`` of a run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

from txnspec.spec.catalog import SystemSpec, system_named, systems
from txnspec.spec.guarantees import GUARANTEES, GuaranteeCheck, NotApplicable


@dataclass(frozen=True)
class ScenarioRun:
    """What one model check found for the properties the comparison needs."""

    system: str
    scenario: str
    variant: str
    complete: bool
    states: int
    seconds: float
    verdicts: dict[str, str]                 # property -> holds / violated / unknown
    counterexample_lengths: dict[str, int]   # violated property -> steps of its shortest counterexample
    partners: dict[str, str]                 # always property -> its sometimes partner


@dataclass(frozen=True)
class Cell:
    system: str
    guarantee: str
    status: str                  # holds / violated / vacuous (a partner never held) / unknown / n/a
    expected: str                # holds / violated / n/a
    scenario: str = ""
    variant: str = ""
    properties: tuple[str, ...] = ()
    violated_property: str = ""
    counterexample_length: int | None = None
    states: int | None = None
    reference: str = ""
    note: str = ""

    @property
    def as_expected(self) -> bool:
        return self.status == self.expected

    @property
    def command(self) -> str:
        """The command that shows this cell's evidence (the counterexample of a violation)."""
        if self.status == "n/a":
            return ""
        variant = f" --variant {self.variant}" if self.variant != "current" else ""
        shown = (self.violated_property,) if self.violated_property else self.properties
        return f"txnspec check --scenario {self.scenario}{variant}" + "".join(f" --property {p}" for p in shown)

    def text(self) -> str:
        text = f"violated ({self.counterexample_length} steps)" if self.status == "violated" else self.status
        return text if self.as_expected else f"{text} [expected {self.expected}]"


@dataclass(frozen=True)
class Comparison:
    systems: tuple[str, ...]
    titles: dict[str, str]
    cells: tuple[Cell, ...]
    runs: tuple[ScenarioRun, ...]

    @property
    def ok(self) -> bool:
        return all(c.as_expected for c in self.cells)

    def cell(self, system: str, guarantee: str) -> Cell:
        for c in self.cells:
            if c.system == system and c.guarantee == guarantee:
                return c
        raise KeyError(f"no cell for {system}/{guarantee}")

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "systems": list(self.systems),
                "guarantees": [asdict(g) for g in GUARANTEES],
                "cells": [{**asdict(c), "command": c.command, "as_expected": c.as_expected} for c in self.cells],
                "runs": [asdict(r) for r in self.runs]}

    def render_text(self) -> str:
        titles = [self.titles[s] for s in self.systems]
        rows = [[g.title, *(self.cell(s, g.key).text() for s in self.systems)] for g in GUARANTEES]
        widths = [max(len(r[i]) for r in [["guarantee", *titles], *rows]) for i in range(len(titles) + 1)]
        line = "  ".join("{:<" + str(w) + "}" for w in widths)
        out = [line.format("guarantee", *titles), line.format(*("-" * w for w in widths))]
        out.extend(line.format(*r) for r in rows)
        violations = [c for c in self.cells if c.status == "violated"]
        if violations:
            out.append("")
            out.append("counterexamples:")
            out.extend(f"  {self.titles[c.system]}, {c.guarantee}: {c.command}" for c in violations)
        surprises = [c for c in self.cells if not c.as_expected]
        out.append("")
        if surprises:
            out.append(f"{len(surprises)} cell(s) differ from the expected verdict:")
            out.extend(f"  {self.titles[c.system]}, {c.guarantee}: found {c.status}, expected {c.expected}"
                       for c in surprises)
        else:
            total = sum(r.states for r in self.runs)
            out.append(f"every cell as expected ({len(self.runs)} model checks, {total:,} states in all)")
        return "\n".join(out)

    def render_markdown(self) -> str:
        titles = [self.titles[s] for s in self.systems]
        out = ["# Transactional messages: Kafka, RocketMQ and Pulsar compared", "",
               "Generated by `txnspec compare --markdown-out docs/comparison.md`; do not edit by hand. Each cell",
               "is a model check of the system's spec (`spec/`, `spec/rocketmq/`, `spec/pulsar/`) on a bounded",
               "scenario: *holds* on the whole bounded state space, *violated* with the length of the shortest",
               "counterexample (the command below prints it), or *n/a* where the guarantee does not apply.", "",
               "| guarantee | " + " | ".join(titles) + " |",
               "|---|" + "---|" * len(titles)]
        for g in GUARANTEES:
            out.append(f"| {g.title} | " + " | ".join(self.cell(s, g.key).text() for s in self.systems) + " |")
        out += ["", "## What each guarantee means", ""]
        out += [f"- **{g.title}** (`{g.key}`): {g.description}." for g in GUARANTEES]
        for system in self.systems:
            out += ["", f"## {self.titles[system]}", ""]
            for g in GUARANTEES:
                c = self.cell(system, g.key)
                if c.status == "n/a":
                    out.append(f"- **{g.title}**: not applicable: {c.note}")
                    continue
                states = f"{c.states:,} states" if c.states is not None else "incomplete"
                line = (f"- **{g.title}**: {c.text()}; scenario `{c.scenario}`"
                        + (f", variant `{c.variant}`" if c.variant != "current" else "")
                        + f", properties {', '.join(f'`{p}`' for p in c.properties)} ({states}). `{c.command}`")
                if c.reference:
                    line += f" {c.reference.rstrip('.')}."
                if c.note:
                    line += f" {c.note.rstrip('.')}."
                out.append(line)
        return "\n".join(out) + "\n"


def _with_partners(system: SystemSpec, scenario: str, variant: str, names: Iterable[str]) -> list[str]:
    model = system.build_model(scenario, variant)
    wanted = list(dict.fromkeys(names))
    for name in list(wanted):
        partner = model.property(name).partner
        if partner and partner not in wanted:
            wanted.append(partner)
    return wanted


def run_scenario(system_name: str, scenario: str, variant: str, properties: Sequence[str]) -> ScenarioRun:
    """Model-check ``properties`` (and their ``sometimes`` partners) of one scenario; picklable for a pool."""
    from txnspec.checker import check

    system = system_named(system_name)
    model = system.build_model(scenario, variant)
    # every state, as the other systems' models (which have no symmetry) count theirs: the table compares them
    result = check(model, properties=_with_partners(system, scenario, variant, properties), symmetry=False)
    lengths = {v.name: len(v.counterexample) for v in result.violated if v.counterexample is not None}
    partners = {p.name: p.partner for p in model.properties if p.partner}
    return ScenarioRun(system_name, scenario, variant, result.complete, result.states, result.seconds,
                       {v.name: v.status for v in result.verdicts}, lengths, partners)


def compare(only: Sequence[str] | None = None, jobs: int = 1,
            on_run: Callable[[ScenarioRun], None] | None = None) -> Comparison:
    """Check every guarantee row of every system (or of the systems named in ``only``)."""
    chosen = [s for s in systems() if not only or s.name in only]
    unknown = set(only or ()) - {s.name for s in chosen}
    if unknown:
        raise KeyError(f"unknown system {sorted(unknown)[0]!r}; known: {', '.join(s.name for s in systems())}")
    needed: dict[tuple[str, str, str], list[str]] = {}
    for system in chosen:
        keys = [row.guarantee for row in system.guarantees]
        missing = [g.key for g in GUARANTEES if g.key not in keys]
        duplicated = sorted({k for k in keys if keys.count(k) > 1})
        if missing or duplicated:
            raise ValueError(f"{system.title}'s GUARANTEES must name each guarantee once; "
                             f"missing {missing}, repeated {duplicated}")
        for row in system.guarantees:
            if isinstance(row, GuaranteeCheck):
                needed.setdefault((system.name, row.scenario, row.variant), []).extend(row.properties)
    plan = sorted(needed.items())
    runs: dict[tuple[str, str, str], ScenarioRun] = {}
    if jobs > 1 and len(plan) > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = {key: pool.submit(run_scenario, *key, props) for key, props in plan}
            for key, future in futures.items():
                runs[key] = future.result()
                if on_run:
                    on_run(runs[key])
    else:
        for key, props in plan:
            runs[key] = run_scenario(*key, props)
            if on_run:
                on_run(runs[key])
    cells = []
    for system in chosen:
        for row in system.guarantees:
            if isinstance(row, NotApplicable):
                cells.append(Cell(system.name, row.guarantee, "n/a", "n/a", note=row.why))
                continue
            run = runs[(system.name, row.scenario, row.variant)]
            statuses = [run.verdicts[p] for p in row.properties]
            violated = next((p for p in row.properties if run.verdicts[p] == "violated"), "")
            vacuous = any(run.verdicts.get(run.partners.get(p, ""), "holds") == "violated" for p in row.properties)
            if violated:
                status = "violated"
            elif vacuous:
                status = "vacuous"
            else:
                status = "holds" if run.complete and all(s == "holds" for s in statuses) else "unknown"
            cells.append(Cell(system.name, row.guarantee, status, row.expected, row.scenario, row.variant,
                              row.properties, violated, run.counterexample_lengths.get(violated),
                              run.states if run.complete else None, row.reference, row.note))
    return Comparison(tuple(s.name for s in chosen), {s.name: s.title for s in chosen}, tuple(cells),
                      tuple(runs.values()))


def dumps(comparison: Comparison) -> str:
    return json.dumps(comparison.to_json(), indent=2)
