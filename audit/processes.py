"""The processes the audit starts (brokers): a free loopback port, and a stop that leaves nothing behind.

Each broker runs in its own session (``start_new_session=True``), so its whole process group is signalled.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop_process(process: subprocess.Popen[bytes], grace_seconds: float = 5.0) -> None:
    """Stop a process started in its own session: SIGTERM to its group, SIGKILL after ``grace_seconds``."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace_seconds)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=5)
