"""Conformance traces: what a spec run did, step by step, with what an implementation must observe.

Format
    A **trace** is a scenario name, a protocol variant, a seed, the strategy that made it and a list of
    **steps**. A step is one action of the system model (:class:`txnspec.spec.actions.Action`: its kind, the
    actor, the message or fault with its fields, stored structurally as :mod:`txnspec.conformance.action_codec`
    describes; an action is unique among the actions enabled in a state, so it identifies its step), the
    **observation** expected after it (a small JSON object: the messages the step put on the network, the
    records visible per partition at both isolation levels, the committed group offsets; see
    :mod:`txnspec.conformance.adapters.spec_adapter`) and, optionally, the expected **abstract state**
    (coordinator states, producer phases, partition offsets). ``label`` is the action's text, for people
    reading the file; readers ignore it.

    Canonical form: JSON Lines, one trace per line, keys sorted, no insignificant whitespace::

        {"format": "txnspec-trace/2", "id": "tiny/random/7", "scenario": "tiny", "variant": "current",
         "seed": 7, "strategy": "random", "steps": [{"action": {"actor": "producer-0",
         "kind": "initTransactions"}, "label": "producer-0.initTransactions()", "observation": {...},
         "abstract": {...}}, ...]}

    Format versions: ``txnspec-trace/1`` stored an action as its text; such files are refused with an
    error naming the version (regenerate them: the spec makes the same traces from the same seeds).

    ITF (Apalache ADR-015): one document per trace; state 0 is the initial state
    (``mbt::actionTaken = "init"``), state ``i`` the state after step ``i``, with variables ``action``
    (the structured action), ``observation`` and ``abstract``, ``mbt::actionTaken`` (the action kind, as
    Quint's model-based testing expects) and ``mbt::actionLabel`` (the action's text); the trace's id,
    scenario, variant, seed, strategy and format version travel in ``#meta``.

Errors
    :class:`TraceError` names the trace id (or the line number when the id is unknown) and the step
    index. :func:`load_jsonl` collects errors per line and keeps going: one bad line never stops the
    others from loading.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from txnspec.checker import traces as itf
from txnspec.conformance.action_codec import ActionFormatError, action_from_json, action_to_json
from txnspec.spec.actions import Action, ActionKind
from txnspec.spec.network import Address

FORMAT = "txnspec-trace/2"
OLD_FORMATS = {"txnspec-trace/1": "it stores each action as its text, not as data"}
STRATEGIES = ("covering", "random", "hypothesis", "manual", "shrunk")

JSON = Any


class TraceError(ValueError):
    """A malformed trace (or a step the spec does not enable), naming the trace and the step."""

    def __init__(self, trace_id: str, message: str, step: int | None = None) -> None:
        self.trace_id, self.step, self.reason = trace_id, step, message
        where = f"trace {trace_id!r}" + (f", step {step}" if step is not None else "")
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class Step:
    """One action of the system model and what must be observed after it."""

    action: Action
    observation: dict[str, JSON] = field(default_factory=dict)
    abstract: dict[str, JSON] | None = None

    @property
    def kind(self) -> ActionKind:
        return self.action.kind

    @property
    def source(self) -> Address:
        return self.action.source

    @property
    def target(self) -> Address:
        return self.action.target

    @property
    def awaited(self) -> bool | None:
        """For a delivery: the copy the producer waits for (True) or a stale copy (False)."""
        return self.action.awaited

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {"action": action_to_json(self.action), "label": str(self.action),
                                "observation": self.observation}
        if self.abstract is not None:
            out["abstract"] = self.abstract
        return out

    @staticmethod
    def from_json(data: JSON, trace_id: str, index: int) -> Step:
        if not isinstance(data, dict):
            raise TraceError(trace_id, f"a step must be a JSON object, not {type(data).__name__}", index)
        missing = [k for k in ("action", "observation") if k not in data]
        if missing:
            raise TraceError(trace_id, f"missing field(s): {', '.join(missing)}", index)
        try:
            action = action_from_json(data["action"])
        except ActionFormatError as exc:
            raise TraceError(trace_id, f"bad action: {exc}", index) from None
        if not isinstance(data["observation"], dict):
            raise TraceError(trace_id, "'observation' must be an object", index)
        abstract = data.get("abstract")
        if abstract is not None and not isinstance(abstract, dict):
            raise TraceError(trace_id, "'abstract' must be an object", index)
        return Step(action, data["observation"], abstract)


@dataclass(frozen=True)
class Trace:
    id: str
    scenario: str
    variant: str = "current"
    seed: int | None = None
    strategy: str = "manual"
    steps: tuple[Step, ...] = ()

    def __len__(self) -> int:
        return len(self.steps)

    def kinds(self) -> frozenset[ActionKind]:
        return frozenset(s.kind for s in self.steps)

    def with_steps(self, steps: Iterable[Step], *, id: str | None = None, strategy: str | None = None) -> Trace:
        return Trace(id or self.id, self.scenario, self.variant, self.seed, strategy or self.strategy, tuple(steps))

    def to_json(self) -> dict[str, JSON]:
        return {"format": FORMAT, "id": self.id, "scenario": self.scenario, "variant": self.variant,
                "seed": self.seed, "strategy": self.strategy, "steps": [s.to_json() for s in self.steps]}

    def to_line(self) -> str:
        """The canonical JSON Lines form (sorted keys, compact)."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    @staticmethod
    def from_json(data: JSON, where: str = "?") -> Trace:
        if not isinstance(data, dict):
            raise TraceError(where, f"a trace must be a JSON object, not {type(data).__name__}")
        trace_id = data.get("id")
        if not isinstance(trace_id, str) or not trace_id:
            if {"step", "state"} <= data.keys():
                raise CounterexampleDump(where, COUNTEREXAMPLE_DUMP)
            raise TraceError(where, "missing or empty 'id'")
        _check_format(data.get("format"), trace_id)
        missing = [k for k in ("scenario", "steps") if k not in data]
        if missing:
            raise TraceError(trace_id, f"missing field(s): {', '.join(missing)}")
        if not isinstance(data["scenario"], str):
            raise TraceError(trace_id, "'scenario' must be a string")
        if not isinstance(data["steps"], list):
            raise TraceError(trace_id, "'steps' must be an array")
        seed = data.get("seed")
        if seed is not None and not isinstance(seed, int):
            raise TraceError(trace_id, "'seed' must be an integer or null")
        steps = tuple(Step.from_json(s, trace_id, i) for i, s in enumerate(data["steps"]))
        return Trace(trace_id, data["scenario"], str(data.get("variant", "current")), seed,
                     str(data.get("strategy", "manual")), steps)

    @staticmethod
    def from_line(line: str, where: str = "?") -> Trace:
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TraceError(where, f"bad JSON: {exc}") from None
        return Trace.from_json(data, where)


COUNTEREXAMPLE_DUMP = ("a counterexample as `txnspec check --trace-out` or `--itf-out` writes it (every state of the "
                       "spec, for reading), not a conformance trace: `txnspec check ... --replay-out FILE` writes "
                       "one that replays")


class CounterexampleDump(TraceError):
    """The input is a model checker's counterexample (checker/traces.py), not a trace: said once per file."""


def _check_format(version: Any, trace_id: str) -> None:
    if version == FORMAT:
        return
    if version in OLD_FORMATS:
        raise TraceError(trace_id, f"format version {version!r} is no longer read ({OLD_FORMATS[version]}); this "
                                   f"reader knows {FORMAT!r}: generate the trace again from its scenario and seed")
    raise TraceError(trace_id, f"unknown format version {version!r} (this reader knows {FORMAT!r})")


# --- JSON Lines ---------------------------------------------------------------------------------

def dumps_jsonl(traces: Iterable[Trace]) -> str:
    return "".join(t.to_line() + "\n" for t in traces)


def write_jsonl(traces: Iterable[Trace], path: Path) -> int:
    n = 0
    with path.open("w", encoding="utf-8") as out:
        for t in traces:
            out.write(t.to_line() + "\n")
            n += 1
    return n


@dataclass(frozen=True)
class Loaded:
    """What :func:`load_jsonl` read: the good traces and one error per bad line."""

    traces: tuple[Trace, ...]
    errors: tuple[TraceError, ...]


def iter_jsonl(lines: Iterable[str], source: str = "<input>") -> Iterator[Trace | TraceError]:
    """Each non-blank line as a :class:`Trace`, or the :class:`TraceError` that line raised."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{source}:{number}"
        try:
            yield Trace.from_line(line, where)
        except CounterexampleDump as exc:
            yield exc
            return  # every line of it is a state: one error says it
        except TraceError as exc:
            yield exc


def loads_jsonl(text: str, source: str = "<input>") -> Loaded:
    good: list[Trace] = []
    bad: list[TraceError] = []
    for item in iter_jsonl(text.splitlines(), source):
        (bad if isinstance(item, TraceError) else good).append(item)  # type: ignore[arg-type]
    return Loaded(tuple(good), tuple(bad))


def load_jsonl(path: Path) -> Loaded:
    return loads_jsonl(path.read_text(encoding="utf-8"), str(path))


# --- ITF (Apalache ADR-015) -----------------------------------------------------------------------

def _plain(value: Any) -> JSON:
    """ITF-decoded values back to JSON's shapes: tuples and frozensets to lists, dict keys to text."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, frozenset):
        return sorted((_plain(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    return value


def to_itf(trace: Trace) -> dict[str, JSON]:
    """The ITF document of ``trace`` (see the module docstring)."""
    states: list[dict[str, JSON]] = [{"#meta": {"index": 0}, "action": itf.to_itf({}), "observation": itf.to_itf({}),
                                      "abstract": itf.to_itf({}), "mbt::actionTaken": "init",
                                      "mbt::actionLabel": "init"}]
    for i, step in enumerate(trace.steps, start=1):
        states.append({"#meta": {"index": i}, "action": itf.to_itf(action_to_json(step.action)),
                       "observation": itf.to_itf(step.observation),
                       "abstract": itf.to_itf(step.abstract if step.abstract is not None else {}),
                       "mbt::actionTaken": step.kind.value, "mbt::actionLabel": str(step.action)})
    return {"#meta": {"format": "ITF", "format-description": itf.ITF_DESCRIPTION, "source": "txnspec",
                      "description": f"conformance trace {trace.id}", "txnspec-format": FORMAT, "id": trace.id,
                      "scenario": trace.scenario, "variant": trace.variant, "seed": trace.seed,
                      "strategy": trace.strategy},
            "vars": ["action", "observation", "abstract", "mbt::actionTaken", "mbt::actionLabel"], "states": states}


def from_itf(document: JSON, where: str = "<itf>") -> Trace:
    """A trace from its ITF document (as written by :func:`to_itf`)."""
    if not isinstance(document, dict) or not isinstance(document.get("states"), list):
        raise TraceError(where, "an ITF document must be an object with a 'states' array")
    meta = document.get("#meta") or {}
    trace_id = meta.get("id") or where
    if "txnspec-format" not in meta and meta.get("format") == "ITF" and "description" in meta:
        raise CounterexampleDump(where, COUNTEREXAMPLE_DUMP)
    _check_format(meta.get("txnspec-format"), trace_id)
    states = document["states"]
    if not states or not isinstance(states[0], dict) or states[0].get("mbt::actionTaken") != "init":
        raise TraceError(trace_id, "state 0 must be the initial state (mbt::actionTaken = \"init\")")
    steps: list[Step] = []
    for i, state in enumerate(states[1:]):
        if not isinstance(state, dict):
            raise TraceError(trace_id, "an ITF state must be an object", i)
        missing = [k for k in ("action", "observation") if k not in state]
        if missing:
            raise TraceError(trace_id, f"missing ITF variable(s): {', '.join(missing)}", i)
        abstract = _plain(itf.from_itf(state.get("abstract", {"#map": []})))
        step_json = {"action": _plain(itf.from_itf(state["action"])),
                     "observation": _plain(itf.from_itf(state["observation"])), "abstract": abstract or None}
        steps.append(Step.from_json(step_json, trace_id, i))
    seed = meta.get("seed")
    return Trace(trace_id, str(meta.get("scenario", "")), str(meta.get("variant", "current")),
                 seed if isinstance(seed, int) else None, str(meta.get("strategy", "manual")), tuple(steps))


def write_itf(trace: Trace, path: Path) -> None:
    path.write_text(json.dumps(to_itf(trace), indent=1) + "\n", encoding="utf-8")


def read_itf(path: Path) -> Trace:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise TraceError(str(path), f"bad JSON: {exc}") from None
    return from_itf(document, str(path))


__all__ = ["FORMAT", "Loaded", "Step", "Trace", "TraceError", "dumps_jsonl", "from_itf", "iter_jsonl",
           "load_jsonl", "loads_jsonl", "read_itf", "to_itf", "write_itf", "write_jsonl"]
