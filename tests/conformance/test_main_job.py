"""The main job says clearly what it needs when Java is missing, and still runs what does not need it."""

from __future__ import annotations

import pytest

from txnspec.conformance import cli_main


def test_missing_java_is_named_with_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_main.shutil, "which", lambda name: None)
    problem = cli_main.java_problem()
    assert problem is not None
    assert "Java 17" in problem and "JAVA_HOME" in problem


def test_java_present_here_is_not_a_problem() -> None:
    assert cli_main.java_problem() is None


def test_main_without_java_fails_the_spark_stage_only(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli_main, "java_problem", lambda: "Spark needs Java 17 (test)")
    status = cli_main.cli_main(["main", "--scenario", "tiny"])
    out, err = capsys.readouterr()
    assert status == 1
    assert "cannot run: Spark needs Java 17 (test)" in err
    assert "ok   cases on the spec" in out and "ok   model check (tiny)" in out
    assert out.splitlines()[-1] == "3 passed, 1 failed"
