"""Sequence diagrams as standalone SVG: lifelines, one arrow per message, state notes beside each step.

What is modelled
    A diagram is a list of lifelines (actors, left to right) and a list of :class:`DiagramEvent` in time
    order, top to bottom. An event between two lifelines is an arrow; an event of one lifeline with
    itself (a local step: an application call, a timeout) is a small loop on that lifeline. Each event
    may carry notes (the state changes it caused), written in a column right of the lifelines on the
    event's row, and may be highlighted (the step a counterexample or a difference ends on).

How
    Plain SVG text built here (no library, no script, no external font or stylesheet), so a page that
    inlines it renders without a network. Every event is a ``<g class="message">`` with ``data-step``;
    tests and readers can count them.

Left out
    Activation bars, message overlap avoidance, text wrapping beyond cutting long labels (the full text
    is in each element's ``<title>``, shown as a tooltip).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

COLUMN, ROW, TOP, NOTE_CHAR = 240, 34, 56, 6.6
MAX_LABEL = 40
MAX_NOTE = 110


@dataclass(frozen=True, slots=True)
class DiagramEvent:
    """One step: ``source`` sends ``label`` to ``target`` (equal for a local step), with state ``notes``."""

    source: str
    target: str
    label: str
    notes: tuple[str, ...] = ()
    highlight: bool = False


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def sequence_svg(lifelines: Sequence[str], events: Sequence[DiagramEvent], *, title: str = "") -> str:
    """The diagram as an ``<svg>`` element (see the module docstring). Unknown lifelines are appended."""
    actors = list(dict.fromkeys(lifelines))
    for event in events:
        for who in (event.source, event.target):
            if who not in actors:
                actors.append(who)
    x = {who: 30 + COLUMN // 2 + i * COLUMN for i, who in enumerate(actors)}
    notes_x = 30 + len(actors) * COLUMN + 10
    rows = [max(1, len(e.notes)) for e in events]
    ys: list[int] = []
    y = TOP + 30
    for n in rows:
        ys.append(y)
        y += ROW + (n - 1) * 15
    height = y + 30
    longest_note = max((len(_cut(n, MAX_NOTE)) for e in events for n in e.notes), default=0)
    width = int(notes_x + longest_note * NOTE_CHAR + 30)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="sequence" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title or "sequence diagram")}">',
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" '
           'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#333"/></marker></defs>',
           f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>']
    for who, cx in x.items():
        out.append(f'<g class="lifeline" data-name="{escape(who)}">'
                   f'<rect x="{cx - 70}" y="12" width="140" height="28" rx="5" fill="#e8eef7" stroke="#4a6fa5"/>'
                   f'<text x="{cx}" y="31" text-anchor="middle" font-size="13" font-family="sans-serif">'
                   f'{escape(_cut(who, 20))}</text>'
                   f'<line x1="{cx}" y1="40" x2="{cx}" y2="{height - 10}" stroke="#9aa9bf" '
                   'stroke-dasharray="4 4"/></g>')
    if any(e.notes for e in events):
        out.append(f'<text x="{notes_x}" y="31" font-size="12" font-family="sans-serif" fill="#555">'
                   'state changes</text>')
    for i, (event, ey) in enumerate(zip(events, ys, strict=True), start=1):
        colour = "#b3261e" if event.highlight else "#333"
        weight = ' font-weight="bold"' if event.highlight else ""
        label = escape(_cut(f"{i}. {event.label}", MAX_LABEL))
        parts = [f'<g class="message{" highlight" if event.highlight else ""}" data-step="{i}">',
                 f"<title>{escape(f'{i}. {event.source} -> {event.target}: {event.label}')}</title>"]
        sx, tx = x[event.source], x[event.target]
        if sx == tx:
            parts.append(f'<path d="M{sx},{ey - 6} h28 v12 h-26" fill="none" stroke="{colour}" '
                         f'marker-end="url(#arrow)"/>')
            parts.append(f'<text x="{sx + 34}" y="{ey + 4}" font-size="11" font-family="sans-serif" '
                         f'fill="{colour}"{weight}>{label}</text>')
        else:
            parts.append(f'<line x1="{sx}" y1="{ey}" x2="{tx}" y2="{ey}" stroke="{colour}" stroke-width="1.4" '
                         f'marker-end="url(#arrow)"/>')
            mid = (sx + tx) / 2
            parts.append(f'<text x="{mid}" y="{ey - 5}" text-anchor="middle" font-size="11" '
                         f'font-family="sans-serif" fill="{colour}"{weight}>{label}</text>')
        for j, note in enumerate(event.notes):
            parts.append(f'<text class="note" x="{notes_x}" y="{ey + 4 + j * 15}" font-size="11" '
                         f'font-family="monospace" fill="#2e5e2e">{escape(_cut(note, MAX_NOTE))}</text>')
        parts.append("</g>")
        out.append("".join(parts))
    out.append("</svg>")
    return "\n".join(out)
