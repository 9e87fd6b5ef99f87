"""``txnspec compare``: the guarantees table is computed from model checks, and docs/comparison.md is it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from txnspec.cli import main
from txnspec.conformance.compare import Cell, Comparison, ScenarioRun, compare, run_scenario
from txnspec.spec.catalog import systems
from txnspec.spec.guarantees import GUARANTEES, GuaranteeCheck, NotApplicable

DOC = Path(__file__).resolve().parents[2] / "docs" / "comparison.md"


def test_every_system_names_each_guarantee_exactly_once() -> None:
    for system in systems():
        keys = [row.guarantee for row in system.guarantees]
        assert sorted(keys) == sorted(g.key for g in GUARANTEES), system.name
        for row in system.guarantees:
            if isinstance(row, GuaranteeCheck):
                assert row.scenario in system.scenarios, (system.name, row)
                assert row.variant in system.variants, (system.name, row)
                model = system.build_model(row.scenario, row.variant)
                for name in row.properties:
                    model.property(name)  # raises KeyError naming the model's properties
            else:
                assert row.why, (system.name, row)


def test_a_guarantee_row_rejects_an_unknown_guarantee() -> None:
    with pytest.raises(ValueError, match="unknown guarantee 'exactly_twice'"):
        GuaranteeCheck("exactly_twice", "tiny", ("x",), "holds")
    with pytest.raises(ValueError, match="unknown guarantee"):
        NotApplicable("exactly_twice", "no")


def test_a_scenario_run_reports_violations_with_their_shortest_counterexample() -> None:
    broken = run_scenario("kafka", "retry", "no-duplicate-detection", ["no_duplicate_append"])
    assert broken.verdicts["no_duplicate_append"] == "violated"
    assert broken.counterexample_lengths == {"no_duplicate_append": 8}
    fixed = run_scenario("kafka", "retry", "current", ["no_duplicate_append"])
    assert fixed.complete and fixed.states == 841
    assert fixed.verdicts == {"no_duplicate_append": "holds", "batch_appended": "holds"}  # the partner is judged


def _comparison(status: str, expected: str, partner_status: str = "holds") -> Comparison:
    run = ScenarioRun("kafka", "retry", "current", True, 826, 0.1,
                      {"no_duplicate_append": status, "batch_appended": partner_status},
                      {"no_duplicate_append": 8} if status == "violated" else {},
                      {"no_duplicate_append": "batch_appended"})
    cell = Cell("kafka", "no_duplicate_committed", status, expected, "retry", "current", ("no_duplicate_append",),
                "no_duplicate_append" if status == "violated" else "", 8 if status == "violated" else None, 826)
    return Comparison(("kafka",), {"kafka": "Kafka"}, (cell,), (run,))


def test_a_cell_names_the_command_that_prints_its_counterexample() -> None:
    cell = _comparison("violated", "violated").cells[0]
    assert cell.text() == "violated (8 steps)"
    assert cell.command == "txnspec check --scenario retry --property no_duplicate_append"
    surprise = _comparison("violated", "holds")
    assert not surprise.ok and surprise.cells[0].text() == "violated (8 steps) [expected holds]"


def test_a_vacuous_check_is_not_reported_as_holding(monkeypatch: pytest.MonkeyPatch) -> None:
    """When a sometimes-partner never held, the guarantee was checked on nothing: 'vacuous', not 'holds'."""
    import txnspec.conformance.compare as compare_mod

    def partner_never_holds(system: str, scenario: str, variant: str, props: list[str]) -> ScenarioRun:
        verdicts = {p: "holds" for p in props} | {"nothing_happened": "violated"}
        return ScenarioRun(system, scenario, variant, True, 1, 0.0, verdicts, {},
                           {p: "nothing_happened" for p in props})

    monkeypatch.setattr(compare_mod, "run_scenario", partner_never_holds)
    result = compare(["kafka"])
    assert {c.status for c in result.cells} == {"vacuous"} and not result.ok


def test_the_cli_rejects_an_unknown_system(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "--system", "activemq"]) == 2
    assert "unknown system 'activemq'" in capsys.readouterr().err


def _doc_table() -> dict[tuple[str, str], str]:
    lines = DOC.read_text().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| guarantee |"))
    titles = [t.strip() for t in lines[header].strip("|").split("|")][1:]
    cells: dict[tuple[str, str], str] = {}
    for line in lines[header + 2:]:
        if not line.startswith("|"):
            break
        row = [c.strip() for c in line.strip("|").split("|")]
        for title, text in zip(titles, row[1:], strict=True):
            cells[(row[0], title)] = text
    return cells


def test_docs_comparison_shows_every_expected_verdict() -> None:
    """docs/comparison.md has one cell per guarantee and system, each the verdict that system's spec expects
    (the slow test below regenerates the file from the model checks and compares it byte for byte)."""
    table = _doc_table()
    for system in systems():
        for row in system.guarantees:
            title = next(g.title for g in GUARANTEES if g.key == row.guarantee)
            text = table[(title, system.title)]
            expected = "n/a" if isinstance(row, NotApplicable) else row.expected
            assert re.fullmatch(re.escape(expected) + r"( \(\d+ steps\))?", text), (system.name, row.guarantee, text)


@pytest.mark.slow
def test_docs_comparison_is_what_compare_computes() -> None:
    comparison = compare(jobs=2)
    assert comparison.ok, comparison.render_text()
    assert DOC.read_text() == comparison.render_markdown()
