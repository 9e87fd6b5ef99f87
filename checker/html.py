"""A self-contained HTML report page: a summary, tables, sequence diagrams and figures in one file.

What is modelled
    A :class:`Page` is a title, a verdict line, key/value facts (the run's summary), tables (properties
    and their verdicts, rules...), figures (counts, timings) and :class:`Diagram` sections (an SVG of
    :mod:`txnspec.checker.sequence` with the steps as text below it). :func:`render_page` makes one HTML
    document of it with the CSS inline and no script, link, font or image from anywhere else, so it
    opens offline and can be mailed as one file.

Left out
    Interactivity (the page has no JavaScript) and any styling beyond a small inline stylesheet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

_CSS = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #1d1d1f; background: #fafafa; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 28px; }
.verdict { font-size: 16px; padding: 8px 12px; border-radius: 6px; display: inline-block; }
.verdict.ok { background: #e3f4e1; color: #1f5f1a; } .verdict.bad { background: #fbe4e2; color: #8c1d13; }
.verdict.unknown { background: #fff3d6; color: #7a5a00; }
table { border-collapse: collapse; margin: 8px 0; background: #fff; }
th, td { border: 1px solid #d5d8dc; padding: 4px 10px; text-align: left; font-size: 13px; vertical-align: top; }
th { background: #eef1f5; } td.ok { color: #1f5f1a; } td.bad { color: #8c1d13; font-weight: bold; }
.diagram { overflow-x: auto; background: #fff; border: 1px solid #d5d8dc; padding: 8px; margin: 8px 0; }
ol.steps { font-family: monospace; font-size: 12px; } ol.steps li.highlight { color: #b3261e; font-weight: bold; }
.facts td:first-child { font-weight: bold; }
"""


@dataclass(frozen=True)
class Table:
    title: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    status_column: int | None = None  # cells of this column styled by their text (holds / violated ...)


@dataclass(frozen=True)
class Diagram:
    title: str
    svg: str
    steps: tuple[str, ...] = ()
    highlight_last: bool = False
    caption: str = ""


@dataclass(frozen=True)
class Page:
    title: str
    verdict: str
    verdict_class: str  # "ok", "bad" or "unknown"
    facts: tuple[tuple[str, str], ...] = ()
    tables: tuple[Table, ...] = ()
    diagrams: tuple[Diagram, ...] = ()
    figures: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)


_GOOD = {"holds", "pass", "passed", "held", "ok", "no difference"}
_BAD = {"violated", "fail", "failed", "diverge", "diverged", "difference", "error"}


def _cell(text: str, styled: bool) -> str:
    cls = ""
    if styled:  # a verdict cell holds one verdict word (or "no difference"), matched whole
        cls = ' class="ok"' if text in _GOOD else ' class="bad"' if text in _BAD else ""
    return f"<td{cls}>{escape(text)}</td>"


def _table(t: Table) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in t.headers)
    body = "".join("<tr>" + "".join(_cell(c, i == t.status_column) for i, c in enumerate(row)) + "</tr>"
                   for row in t.rows)
    return f"<h2>{escape(t.title)}</h2><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _pairs(title: str, pairs: Sequence[tuple[str, str]]) -> str:
    if not pairs:
        return ""
    rows = "".join(f"<tr><td>{escape(k)}</td><td>{escape(v)}</td></tr>" for k, v in pairs)
    return f'<h2>{escape(title)}</h2><table class="facts"><tbody>{rows}</tbody></table>'


def _diagram(d: Diagram) -> str:
    items = []
    for i, step in enumerate(d.steps, start=1):
        cls = ' class="highlight"' if d.highlight_last and i == len(d.steps) else ""
        items.append(f"<li{cls}>{escape(step)}</li>")
    caption = f"<p>{escape(d.caption)}</p>" if d.caption else ""
    steps = f'<ol class="steps">{"".join(items)}</ol>' if items else ""
    return f'<section class="counterexample"><h2>{escape(d.title)}</h2>{caption}' \
           f'<div class="diagram">{d.svg}</div>{steps}</section>'


def render_page(page: Page) -> str:
    """The page as one HTML document (see the module docstring)."""
    notes = "".join(f"<p>{escape(n)}</p>" for n in page.notes)
    body = [f"<h1>{escape(page.title)}</h1>",
            f'<p class="verdict {escape(page.verdict_class)}" id="verdict">{escape(page.verdict)}</p>', notes,
            _pairs("Summary", page.facts), *(_table(t) for t in page.tables),
            *(_diagram(d) for d in page.diagrams), _pairs("Figures", page.figures)]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(page.title)}</title><style>{_CSS}</style></head>\n<body>\n"
            + "\n".join(part for part in body if part) + "\n</body></html>\n")


def write_page(path: Path, page: Page) -> None:
    """Write ``page`` to ``path`` (its folder is created), through a temporary file so nothing is half-written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(render_page(page), encoding="utf-8")
    tmp.replace(path)
