"""``txnspec conform`` with a user-written variant (loaded by the Spark workers too) and ``--html-out``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from txnspec.cli import main
from txnspec.cli.progress import progress_line
from txnspec.conformance.environment import java_problem

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "end_txn_keeps_epoch.py"
needs_spark = pytest.mark.skipif(java_problem() is not None, reason=str(java_problem()))


@pytest.fixture
def spark(local_spark: Any) -> Any:
    return local_spark  # the shared local[2] session (tests/conftest.py)


@pytest.mark.spark
@needs_spark
def test_a_variant_file_on_spark_and_the_report(spark: Any, tmp_path: Path) -> None:
    page = tmp_path / "conform.html"
    # the workers load the file as well: an unknown variant there would make every trace an error
    assert main(["conform", "--scenario", "delayed-end-txn", "--variant-file", str(EXAMPLE), "--traces", "6",
                 "--strategy", "random", "--out", str(tmp_path / "run"), "--html-out", str(page)]) == 0
    html = page.read_text()
    assert "6 passed, 0 diverged, 0 errors" in html and "end-txn-keeps-epoch" in html


@pytest.mark.spark
@needs_spark
def test_divergences_are_drawn(spark: Any, tmp_path: Path) -> None:
    page = tmp_path / "mutant.html"
    assert main(["conform", "--scenario", "offsets", "--adapter", "spec-mutant:lost-offsets", "--traces", "12",
                 "--out", str(tmp_path / "run"), "--html-out", str(page)]) == 1
    html = page.read_text()
    diagrams = html.split("<svg")[1:]
    assert diagrams and "diverged" in html
    for svg, listed in zip(diagrams, html.split('<ol class="steps">')[1:], strict=True):
        assert svg.count('<g class="message') == listed.split("</ol>")[0].count("<li")


def test_progress_line_only_when_shown(capsys: pytest.CaptureFixture[str]) -> None:
    with progress_line(False) as line:
        line("10 states")
    assert capsys.readouterr().err == ""
    with progress_line(True) as line:
        line("10 states")
        line("2,000 states")
    err = capsys.readouterr().err
    assert err.startswith("\r  10 states") and "\r  2,000 states" in err and err.endswith("\r")
