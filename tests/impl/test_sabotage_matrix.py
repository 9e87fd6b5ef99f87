"""The sabotage matrix: each durability mechanism turned off, and the project's own tests that catch it.

Every mechanism is a switch of the injected :class:`~txnspec.impl.durability.Durability` policy. For each one a
subprocess makes the sabotaged policy the default (before any test module is imported, so clusters, stores and
the tests' own policies all inherit it) and runs that mechanism's catching tests through ``pytest.main``: every
one of them must fail. A control run with nothing sabotaged must pass them all, so a failure is the sabotage's
doing. The same table is printed in ``docs/durability.md``; a test keeps the two equal.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from txnspec.impl.durability import SABOTAGES

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "durability.md"
STORAGE = "tests/impl/test_storage_failures.py"
DURABLE = "tests/impl/test_durable.py"
CHECKS = "tests/impl/test_durability_checks.py"
CUT = "tests/impl/test_txn_log_cut.py"

# mechanism -> the tests that must fail without it
CATCHERS: dict[str, tuple[str, ...]] = {
    "check_frame_crc": (f"{STORAGE}::test_a_flipped_byte_inside_a_record_value_is_caught_by_the_crc",),
    "check_snapshot_checksum": (f"{CHECKS}::test_a_snapshot_whose_checksum_fails_is_ignored_and_the_log_replayed",),
    "restore_aborted_index": (f"{CHECKS}::test_the_aborted_index_comes_back_from_the_snapshot",),
    "persist_producer_ids": (f"{STORAGE}::test_producer_ids_are_not_reused_after_a_restart",
                             f"{DURABLE}::test_producer_ids_are_never_reused_across_restarts"),
    "resend_prepared_markers": (f"{DURABLE}::test_recovery_completes_a_transaction_prepared_before_the_crash",),
    "loop_short_writes": (f"{CHECKS}::test_short_writes_are_continued_until_the_frame_is_whole",),
    "fsync_files": (f"{STORAGE}::test_fsync_is_a_cluster_setting_and_fsyncs_every_append",),
    "fsync_directories": (f"{CHECKS}::test_every_created_or_renamed_file_has_its_directory_fsynced",),
}

RUNNER = """
import sys
from txnspec.impl import durability
if sys.argv[1] != "-":
    durability.DEFAULT = durability.sabotaged(sys.argv[1])
import pytest
sys.exit(pytest.main(["-q", "-rf", "-p", "no:cacheprovider", "-p", "no:randomly", *sys.argv[2:]]))
"""


def run(sabotage: str | None, tests: tuple[str, ...]) -> tuple[int, set[str], str]:
    """Exit code, the failed test ids, and the output of the tests run under ``sabotage`` (None: control)."""
    out = subprocess.run([sys.executable, "-c", RUNNER, sabotage or "-", *tests], cwd=ROOT, capture_output=True,
                         text=True, timeout=600, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    failed = set(re.findall(r"^FAILED (\S+)", out.stdout, re.MULTILINE))
    return out.returncode, {f.split("[")[0] for f in failed}, out.stdout[-3000:] + out.stderr[-2000:]


def test_every_mechanism_has_catching_tests() -> None:
    assert set(CATCHERS) == set(SABOTAGES)


def test_the_catching_tests_pass_with_every_mechanism_on() -> None:
    code, failed, output = run(None, tuple(sorted({t for ts in CATCHERS.values() for t in ts})))
    assert code == 0 and not failed, output


@pytest.mark.parametrize("sabotage", sorted(SABOTAGES))
def test_each_sabotage_is_caught_by_the_projects_tests(sabotage: str) -> None:
    code, failed, output = run(sabotage, CATCHERS[sabotage])
    assert code == 1, output
    assert failed == set(CATCHERS[sabotage]), output


def test_the_matrix_is_printed_in_docs() -> None:
    rows = [line for line in DOC.read_text().splitlines() if line.startswith("| `")]
    documented = {}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        documented[cells[0].strip("`")] = (cells[1], tuple(t.strip("` ") for t in cells[2].split("<br>")))
    assert documented == {name: (SABOTAGES[name], tuple(t.split("::", 1)[1] for t in tests))
                          for name, tests in CATCHERS.items()}
    assert CUT  # the transaction-log cut test is named in the doc as the test of recovery itself
    assert "test_a_cut_at_every_byte_of_the_last_three_frames" in DOC.read_text()
