"""Progress lines: shown on a terminal, never in a pipe or with --json."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest

# small scenarios: both searches show their final counts on a terminal however short they are (a longer one
# shows more lines about once a second), so a line missing from a pipe or with --json is missing for that reason
DIFF = ["diff", "--scenario", "zombie", "--variant", "tv1", "--variant", "kafka-17754"]
CHECK = ["check", "--scenario", "tiny", "--variant", "tv1"]


def run(argv: list[str], terminal: bool) -> tuple[int, str]:
    """Run txnspec with stderr on a pseudo-terminal (or a pipe); its exit status and what stderr showed."""
    command = [sys.executable, "-c", "import sys; from txnspec.cli import main; sys.exit(main())", *argv]
    if not terminal:
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        return done.returncode, done.stderr
    controller, terminal_end = pty.openpty()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=terminal_end)
    os.close(terminal_end)
    shown = b""
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        shown += chunk
    os.close(controller)
    return process.wait(timeout=300), shown.decode(errors="replace")


@pytest.mark.parametrize(("argv", "expected"), [(DIFF, "macro-state pairs"), (CHECK, "states/s")])
def test_progress_on_a_terminal_only(argv: list[str], expected: str) -> None:
    status, shown = run(argv, terminal=True)
    assert status in (0, 1)
    assert expected in shown and "\r" in shown
    status, piped = run(argv, terminal=False)
    assert expected not in piped
    status, with_json = run([*argv, "--json"], terminal=True)
    assert expected not in with_json
