"""The main job says clearly what it needs when Java is missing, and still runs what does not need it."""

from __future__ import annotations

import pytest

from txnspec.cli import main as cli_main
from txnspec.cli import main_job
from txnspec.conformance import environment


def test_missing_java_is_named_with_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(environment.shutil, "which", lambda name: None)
    problem = environment.java_problem()
    assert problem is not None
    assert "Java 17" in problem and "JAVA_HOME" in problem


def test_java_present_here_is_not_a_problem() -> None:
    assert environment.java_problem() is None


def test_main_without_java_fails_the_spark_stage_only(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(main_job, "java_problem", lambda: "Spark needs Java 17 (test)")
    status = cli_main(["main", "--scenario", "tiny"])
    out, err = capsys.readouterr()
    assert status == 1
    assert "cannot run: Spark needs Java 17 (test)" in err
    assert "ok   cases on the spec" in out and "ok   model check (tiny)" in out
    assert out.splitlines()[-1] == "3 passed, 1 failed"


@pytest.mark.parametrize("argv, named", [
    (["--traces", "-1"], "--traces must be a positive number"),
    (["--matrix-traces", "0"], "--matrix-traces must be a positive number"),
    (["--scenario", "nope"], "--scenario"),
    (["--conform-scenario", "nope", "--skip-spark"], "--conform-scenario"),
])
def test_bad_arguments_exit_2_before_any_stage(argv: list[str], named: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["main", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and named in err
