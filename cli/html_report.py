"""``--html-out``: the reports of check, diff, conform and audit as self-contained HTML pages.

What is modelled
    Each command's result becomes a :class:`txnspec.checker.html.Page`: its summary, the properties (or
    rules, or directions of a diff) with their verdicts, each counterexample or difference as an SVG
    sequence diagram (:mod:`txnspec.checker.sequence`), and the run's figures. The one Kafka-specific
    piece is :func:`diagram_event`: how a step of the system model (or of a conformance trace) becomes a
    message between lifelines with the coordinator's and the partitions' state changes beside it.

Assumptions
    :func:`diagram_event` reads the typed action (:class:`txnspec.spec.actions.Action`, or the ``action`` of a
    trace's :class:`~txnspec.conformance.traces.Step`): its ``source`` and ``target`` lifelines, a delivered
    message's body, an application call's kind and partition; its text is used only for the other steps. The
    notes beside a step are the model's ``state_notes`` lines the step changed (typed per component in
    :func:`txnspec.spec.model.state_notes`, never picked out of ``describe_state`` by their prefixes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from txnspec.checker.html import Diagram, Page, Table, write_page
from txnspec.checker.sequence import DiagramEvent, sequence_svg
from txnspec.spec.actions import APPLICATION_CALLS, Action, ActionKind
from txnspec.spec.network import describe as describe_message

__all__ = ["audit_page", "check_page", "conform_page", "diagram_event", "diff_page", "write_page"]

NotesOf = Callable[[Any], Sequence[str]]
"""A state's lines worth noting beside a step that changed them (``Model.metadata["state_notes"]``)."""


def notes_of(model: Any) -> NotesOf:
    """The model's ``state_notes`` (the Kafka model's: the coordinator and the partitions), else every line of its
    ``describe_state``."""
    notes = model.metadata.get("state_notes")
    if notes is not None:
        return cast(NotesOf, notes)
    describe = model.describe_state or repr
    return lambda state: describe(state).splitlines()


def diagram_event(action: Any, before: Any = None, after: Any = None, notes: NotesOf | None = None) -> DiagramEvent:
    """One step of a Kafka behaviour as a diagram event: who sends what to whom, and what state changed.

    ``before``/``after`` are the system states around the step and ``notes`` gives a state's lines worth noting
    (:func:`notes_of`); the lines ``after`` has and ``before`` had not are the step's notes.
    """
    act: Action = getattr(action, "action", action)  # a trace's Step carries its action
    source = str(act.source or "environment")  # a lifeline's name (report text)
    target = str(act.target or source)
    if act.is_delivery:
        label = describe_message(act.body)
    elif act.kind in APPLICATION_CALLS:
        label = f"{act.kind.value}({act.partition if act.kind is ActionKind.SEND else ''})"
    else:
        label = str(act)
    changed: tuple[str, ...] = ()
    if notes is not None and before is not None and after is not None:
        old = set(notes(before))
        changed = tuple(line for line in notes(after) if line not in old)
    return DiagramEvent(source, target, label, changed)


def _diagram(title: str, steps: Sequence[tuple[Any, Any]], lifelines: Sequence[str], notes: NotesOf | None,
             caption: str = "", texts: Sequence[str] | None = None) -> Diagram:
    """A path ``(None, initial), (action, state)...`` as a diagram whose last step is highlighted."""
    events = [diagram_event(action, steps[i - 1][1], state, notes) for i, (action, state) in
              enumerate(steps) if i > 0]
    if events:
        last = events[-1]
        events[-1] = DiagramEvent(last.source, last.target, last.label, last.notes, highlight=True)
    used = {who for e in events for who in (e.source, e.target)}
    lines = [w for w in lifelines if w in used]
    return Diagram(title, sequence_svg(lines, events, title=title),
                   tuple(texts) if texts is not None else tuple(str(a) for a, _ in steps[1:]),
                   highlight_last=True, caption=caption)


def check_page(model: Any, result: Any, command: str) -> Page:
    """The page of ``txnspec check``: verdicts, a diagram per counterexample, figures."""
    rows = tuple((v.name, v.expectation, v.status, v.description.splitlines()[0] if v.description else "")
                 for v in result.verdicts)
    lifelines = list(model.metadata.get("lifelines", ()))
    diagrams = tuple(_diagram(f"{cex.property}: shortest counterexample ({len(cex.steps) - 1} steps)", cex.steps,
                              lifelines, notes_of(model), caption=_how_it_ends(cex))
                     for cex in result.counterexamples)
    cls = "bad" if not result.ok else "ok" if result.complete else "unknown"
    violated = len(result.violated) + (result.deadlock is not None)
    verdict = (f"VIOLATED: {violated} of {len(result.verdicts)} properties fail" if not result.ok
               else f"all {len(result.verdicts)} properties hold on {result.states:,} states" if result.complete
               else f"incomplete: {result.stop_reason}")
    coverage = tuple((f"transitions: {kind}", f"{n:,}") for kind, n in result.coverage.items())
    return Page(
        f"txnspec check: {model.name}", verdict, cls,
        facts=(("command", command), ("model", model.name), ("complete", str(result.complete))),
        tables=(Table("Properties", ("property", "kind", "verdict", "meaning"), rows, status_column=2),),
        diagrams=diagrams,
        figures=(("distinct states", f"{result.states:,}"), ("transitions", f"{result.transitions:,}"),
                 ("depth", str(result.depth)), ("seconds", f"{result.seconds:.2f}"),
                 ("states per second", f"{result.states / max(result.seconds, 1e-9):,.0f}"), *coverage))


def _how_it_ends(cex: Any) -> str:
    text = "The state changes of the coordinator and the partitions are on the right."
    if cex.loop_start is not None:
        return f"{text} After the last step the behaviour returns to the state after step {cex.loop_start} and " \
               "repeats the steps from there forever (a weakly fair behaviour)."
    if cex.stutter:
        return f"{text} After the last step nothing more happens, forever: no weakly fair action is enabled."
    return text


def diff_page(summary: dict[str, Any], result: Any, models: Sequence[Any]) -> Page:
    """The page of ``txnspec diff``: each direction's shortest observable difference as a diagram."""
    rows = []
    diagrams = []
    for k, entry in enumerate(summary["directions"]):
        trace = result.only[k]
        rows.append((f"only {entry['allowed_by']}", "difference" if entry["difference"] else "no difference",
                     f"{len(entry['observations'])} observations, {len(entry['steps'])} steps"
                     if entry["difference"] else f"{entry['not_by']} can show everything {entry['allowed_by']} shows"
                     if summary["complete"] else "not found before the state cap"))
        if trace is None:
            continue
        model = models[k]
        observations = entry["observations"]
        caption = (f"A behaviour of {entry['allowed_by']}; below it, what clients observe of it. {entry['not_by']} "
                   "can show every observation but the last one, never that one after them.")
        diagrams.append(_diagram(f"only {entry['allowed_by']}: {observations[-1]}", trace.steps,
                                 list(model.metadata.get("lifelines", ())), notes_of(model), caption,
                                 texts=observations))
    cls = "bad" if result.only != (None, None) else "ok" if result.complete else "unknown"
    a, b = summary["variants"]
    return Page(
        f"txnspec diff: {a} vs {b} on {summary['scenario']}", summary["verdict"], cls,
        facts=(("scenario", summary["scenario"]), ("variants", f"{a} vs {b}"), ("observing", summary["observe"])),
        tables=(Table("Directions", ("direction", "verdict", "detail"), tuple(rows), status_column=1),),
        diagrams=tuple(diagrams),
        figures=(("states", f"{summary['states'][0]:,} + {summary['states'][1]:,}"),
                 ("macro-states", f"{summary['macro_states'][0]:,} + {summary['macro_states'][1]:,}"),
                 ("macro-state pairs", f"{summary['pairs']:,}"), ("seconds", f"{summary['seconds']:.2f}"),
                 ("complete", str(summary["complete"]))))


def conform_page(summary: dict[str, Any], shrunk: Sequence[Any] = ()) -> Page:
    """The page of ``txnspec conform``: counts, coverage, and each shrunk divergence (a trace) as a diagram."""
    diverged = summary["diverged"] + summary["errors"]
    rows = tuple((d["trace_id"], "diverged", str(d["step"]), str(d["shrunk_length"]), d["detail"][:400])
                 for d in summary["first_divergences"])
    diagrams = []
    for trace in shrunk:
        steps = [(None, None), *((step, None) for step in trace.steps)]
        diagrams.append(_diagram(f"divergence {trace.id} (shrunk, {len(trace.steps)} steps)", steps,
                                 ["producer-0", "producer-1", "coordinator", "group"], None))
    cov = summary["coverage"]
    seconds = summary["seconds"]
    return Page(
        f"txnspec conform: {summary['scenario']} against {summary['adapter']}",
        f"{summary['passed']} passed, {summary['diverged']} diverged, {summary['errors']} errors",
        "bad" if diverged else "ok",
        facts=(("scenario", summary["scenario"]), ("variant", summary["variant"]), ("adapter", summary["adapter"]),
               ("master", summary["master"]), ("seed", str(summary["seed"])), ("strategy", summary["strategy"])),
        tables=(Table("Divergences", ("trace", "verdict", "step", "shrunk to", "detail"), rows, status_column=1),)
        if rows else (),
        diagrams=tuple(diagrams),
        figures=(("traces", f"{summary['traces']:,}"), ("steps", f"{summary['steps']:,}"),
                 ("action kinds covered", str(len(cov["kinds"]))),
                 ("coordinator transitions covered", str(len(cov["transitions"]))),
                 ("error codes seen", ", ".join(cov["error_codes"]) or "none"),
                 ("seconds", f"plan {seconds['plan']}, session {seconds['session']}, run {seconds['run']}")))


def audit_page(report: Any) -> Page:
    """The page of ``txnspec audit``: one row per rule, each violation's requests as a client/broker diagram."""
    rows = tuple((r.level, r.rule, r.outcome, str(r.checked), str(r.violations), r.description) for r in report.rules)
    diagrams = []
    for r in report.rules:
        for example in r.examples[:1]:
            sequence = example.get("sequence") if isinstance(example, dict) else None
            if not sequence:
                continue
            events = []
            for entry in sequence:
                events.append(DiagramEvent("client", "broker", str(entry.get("request", ""))))
                actual, expected = entry.get("actual"), entry.get("expected")
                notes = (f"spec expects {expected}",) if expected != actual else ()
                events.append(DiagramEvent("broker", "client", str(actual), notes, highlight=bool(notes)))
            diagrams.append(Diagram(f"{r.rule}: violated", sequence_svg(["client", "broker"], events, title=r.rule),
                                    caption=r.description))
    violated = sum(r.outcome == "violated" for r in report.rules)
    held = sum(r.outcome == "held" for r in report.rules)
    return Page(
        f"txnspec audit: {report.broker}", f"{held} held, {violated} violated", "bad" if violated else "ok",
        facts=(("broker", report.broker), ("levels", ", ".join(report.levels)), ("seed", str(report.seed)),
               *((str(k), str(v)) for k, v in report.facts.items())),
        tables=(Table("Rules", ("level", "rule", "outcome", "checked", "violated", "meaning"), rows,
                      status_column=2),),
        diagrams=tuple(diagrams),
        figures=(("rules", str(len(report.rules))), ("checks", str(sum(r.checked for r in report.rules)))))
