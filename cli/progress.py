"""One progress line on a terminal for the long-running commands (check, diff, conform, audit).

Shown only when asked (the commands ask when ``sys.stderr.isatty()`` and no ``--json``): the line is
rewritten in place on stderr and cleared at the end, so nothing of it is left in logs or in the output.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def progress_line(show: bool) -> Iterator[Callable[[str], None]]:
    """A function that shows one line of progress (a no-op when ``show`` is False)."""
    width = [0]

    def line(text: str) -> None:
        if show:
            width[0] = max(width[0], len(text) + 2)
            print(f"\r  {text}".ljust(width[0]), end="", file=sys.stderr, flush=True)

    try:
        yield line
    finally:
        if show and width[0]:
            print("\r" + " " * width[0] + "\r", end="", file=sys.stderr, flush=True)
