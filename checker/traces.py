"""Counterexamples as files: JSON Lines, ITF (Apalache ADR-015) and Mermaid sequence diagrams.

* JSON Lines: one object per step, ``{"step": i, "action": "...", "state": {...}}``; states are encoded
  by :func:`to_plain` (dataclasses as objects, tuples and sets as lists, enums by value).
* ITF: ``{"#meta": {...}, "vars": [...], "states": [...]}`` with integers as ``{"#bigint": "n"}``, tuples
  as ``{"#tup": [...]}``, sets as ``{"#set": [...]}``, mappings as ``{"#map": [[k, v], ...]}``,
  dataclasses as records, enums by value, ``None`` as the empty tuple; each state also carries
  ``mbt::actionTaken``, the action's kind, so that Quint/Apalache model-based-testing tools can read it.
  :func:`from_itf` decodes values back (records stay dicts).
* Mermaid: a ``sequenceDiagram``; an action with ``source`` and ``target`` attributes becomes an
  arrow between those lifelines, any other action a note.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from txnspec.checker.explicit import action_kind
from txnspec.checker.report import Counterexample


def to_plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [to_plain(v) for v in value]
    if isinstance(value, frozenset | set):
        return sorted((to_plain(v) for v in value), key=repr)
    return value


def to_itf(value: Any) -> Any:
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return {"#bigint": str(value)}
    if value is None:
        return {"#tup": []}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_itf(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, Mapping):
        return {"#map": [[to_itf(k), to_itf(v)] for k, v in value.items()]}
    if isinstance(value, tuple | list):
        return {"#tup": [to_itf(v) for v in value]}
    if isinstance(value, frozenset | set):
        return {"#set": sorted((to_itf(v) for v in value), key=repr)}
    return str(value)


def from_itf(value: Any) -> Any:
    """Decode an ITF value: ``#bigint`` to int, ``#tup`` to tuple, ``#set`` to frozenset, ``#map`` to dict."""
    if isinstance(value, dict):
        if set(value) == {"#bigint"}:
            return int(value["#bigint"])
        if set(value) == {"#tup"}:
            return tuple(from_itf(v) for v in value["#tup"])
        if set(value) == {"#set"}:
            return frozenset(_freeze(from_itf(v)) for v in value["#set"])
        if set(value) == {"#map"}:
            return {_freeze(from_itf(k)): from_itf(v) for k, v in value["#map"]}
        return {k: from_itf(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_itf(v) for v in value]
    return value


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _state_vars(state: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(state) and not isinstance(state, type):
        return {f.name: getattr(state, f.name) for f in dataclasses.fields(state)}
    return {"state": state}


def counterexample_to_itf(cex: Counterexample, model: Any = None) -> dict[str, Any]:
    names = list(_state_vars(cex.steps[0][1]))
    states = []
    for i, (action, state) in enumerate(cex.steps):
        encoded: dict[str, Any] = {"#meta": {"index": i}}
        encoded.update({k: to_itf(v) for k, v in _state_vars(state).items()})
        encoded["mbt::actionTaken"] = "init" if action is None else action_kind(action)
        encoded["mbt::action"] = "init" if action is None else str(action)
        states.append(encoded)
    meta: dict[str, Any] = {"format": "ITF", "format-description": "https://apalache-mc.org/docs/adr/015adr-trace.html",
                            "source": getattr(model, "name", "txnspec"), "description": f"violates {cex.property}"}
    if cex.loop_start is not None:
        meta["loop"] = cex.loop_start
    return {"#meta": meta, "vars": [*names, "mbt::actionTaken", "mbt::action"], "states": states}


def write_itf(cex: Counterexample, path: Path, model: Any = None) -> None:
    path.write_text(json.dumps(counterexample_to_itf(cex, model), indent=1) + "\n", encoding="utf-8")


def write_jsonl(cex: Counterexample, path: Path, model: Any = None) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for i, (action, state) in enumerate(cex.steps):
            handle.write(json.dumps({"step": i, "property": cex.property,
                                     "action": None if action is None else str(action),
                                     "kind": None if action is None else action_kind(action),
                                     "state": to_plain(state)}) + "\n")


def mermaid(cex: Counterexample, model: Any = None) -> str:
    lifelines: list[str] = list((getattr(model, "metadata", None) or {}).get("lifelines", ()))
    used: list[str] = []
    lines: list[str] = []
    for action, _ in cex.steps[1:]:
        source, target = getattr(action, "source", ""), getattr(action, "target", "")
        label = str(action).replace(";", ",").replace("#", "")
        for who in (source, target):
            if who and who not in used:
                used.append(who)
        if source and target and source != target:
            lines.append(f"    {_id(source)}->>{_id(target)}: {label}")
        elif source:
            lines.append(f"    Note over {_id(source)}: {label}")
        else:
            lines.append(f"    Note over {_id(used[0]) if used else 'system'}: {label}")
    order = [w for w in lifelines if w in used] + [w for w in used if w not in lifelines]
    header = ["sequenceDiagram", f"    %% counterexample to {cex.property}"]
    header += [f"    participant {_id(w)} as {w}" for w in order]
    if cex.loop_start is not None:
        lines.append(f"    Note over {_id(order[0]) if order else 'system'}: loops back to step {cex.loop_start}")
    return "\n".join(header + lines) + "\n"


def _id(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)


def write_mermaid(cex: Counterexample, path: Path, model: Any = None) -> None:
    path.write_text(mermaid(cex, model), encoding="utf-8")
