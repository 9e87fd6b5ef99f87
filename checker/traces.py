"""Counterexamples as files: JSON Lines, ITF (Apalache ADR-015) and Mermaid sequence diagrams.

What is modelled
    * **JSON Lines**: one object per step, ``{"step": i, "action": "...", "kind": "...", "state": ...}``
      (``action`` and ``kind`` are ``null`` for the initial state); states are encoded by
      :func:`to_plain`: dataclasses as objects of field to value, tuples and lists as arrays,
      (frozen)sets as arrays sorted by their JSON text, mappings as objects (keys as text), enums by
      name, ``None`` as ``null``.
    * **ITF** (the Informal Trace Format of Apalache ADR-015, read by Quint and Apalache tooling):
      ``{"#meta": {...}, "vars": [...], "states": [{"#meta": {"index": i}, var: value, ...}]}``. Values
      (:func:`to_itf`): every integer as ``{"#bigint": "123"}`` (as Apalache writes them), tuples as
      ``{"#tup": [...]}``, (frozen)sets as ``{"#set": [...]}``, mappings as ``{"#map": [[k, v], ...]}``,
      dataclasses as records (plain objects of field to value), enums by name, ``None`` as the variant
      ``{"tag": "None", "value": {"#tup": []}}`` (Quint's ``Option``), anything else as
      ``{"#unserializable": repr}``. A dataclass state contributes one variable per field, any other
      state one variable ``state``. Each state also holds ``mbt::actionTaken`` (the action's kind,
      ``"init"`` first, as Quint's model-based testing expects) and ``mbt::actionLabel`` (its full text).
      A looping liveness counterexample sets ``#meta.loop`` to the index the last state returns to.
      :func:`from_itf` decodes values back to Python (records and maps become dicts).
    * **Mermaid** ``sequenceDiagram``: an action with ``source`` and ``target`` attributes (lifeline
      names such as ``"producer-0"``, ``"coordinator"``, ``"p0"``) is an arrow between them, any other
      action a note; lifelines come from ``model.metadata["lifelines"]`` in that order, then any others
      in order of appearance; a liveness loop is drawn as a ``loop`` block.

Left out
    Decoding into the model's own classes (the decoder returns plain values) and ITF ``params``.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from txnspec.checker.report import Counterexample, action_kind

ITF_DESCRIPTION = "https://apalache-mc.org/docs/adr/015adr-trace.html"


def to_plain(value: Any) -> Any:
    """A JSON-ready rendering of a state or value (see the module docstring).

    Examples
    --------
    >>> to_plain((1, frozenset({"b", "a"}), None))
    [1, ['a', 'b'], None]
    """
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, enum.Enum):
        return value.name
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {k if isinstance(k, str) else json.dumps(to_plain(k)): to_plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [to_plain(v) for v in value]
    if isinstance(value, frozenset | set):
        return sorted((to_plain(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    return repr(value)


def to_itf(value: Any) -> Any:
    """An ITF value (ADR-015) for a Python value.

    Examples
    --------
    >>> to_itf((1, "a"))
    {'#tup': [{'#bigint': '1'}, 'a']}
    >>> from_itf(to_itf({"x": frozenset({1, 2}), "y": None})) == {"x": frozenset({1, 2}), "y": None}
    True
    """
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return {"#bigint": str(value)}
    if value is None:
        return {"tag": "None", "value": {"#tup": []}}
    if isinstance(value, enum.Enum):
        return value.name
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_itf(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {"#map": [[to_itf(k), to_itf(v)] for k, v in value.items()]}
    if isinstance(value, tuple | list):
        return {"#tup": [to_itf(v) for v in value]}
    if isinstance(value, frozenset | set):
        return {"#set": sorted((to_itf(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))}
    return {"#unserializable": repr(value)}


def from_itf(value: Any) -> Any:
    """Decode an ITF value: ``#bigint`` to int, ``#tup`` to tuple, ``#set`` to frozenset, ``#map`` and
    records to dict, the ``None`` variant to ``None``; JSON numbers are accepted as integers too."""
    if isinstance(value, dict):
        keys = set(value)
        if keys == {"#bigint"}:
            return int(value["#bigint"])
        if keys == {"#tup"}:
            return tuple(from_itf(v) for v in value["#tup"])
        if keys == {"#set"}:
            return frozenset(_hashable(from_itf(v)) for v in value["#set"])
        if keys == {"#map"}:
            return {_hashable(from_itf(k)): from_itf(v) for k, v in value["#map"]}
        if keys == {"#unserializable"}:
            return value["#unserializable"]
        if keys == {"tag", "value"} and value["tag"] == "None" and value["value"] == {"#tup": []}:
            return None
        return {k: from_itf(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_itf(v) for v in value]
    return value


def _hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted(((k, _hashable(v)) for k, v in value.items()), key=repr))
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value


def _state_vars(state: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(state) and not isinstance(state, type):
        return {f.name: getattr(state, f.name) for f in dataclasses.fields(state)}
    return {"state": state}


def counterexample_to_itf(cex: Counterexample, model: Any = None) -> dict[str, Any]:
    """The ITF document of a counterexample (see the module docstring)."""
    names = list(_state_vars(cex.steps[0][1]))
    states = []
    for i, (action, state) in enumerate(cex.steps):
        encoded: dict[str, Any] = {"#meta": {"index": i}}
        encoded.update({k: to_itf(v) for k, v in _state_vars(state).items()})
        encoded["mbt::actionTaken"] = "init" if action is None else action_kind(action)
        encoded["mbt::actionLabel"] = "init" if action is None else str(action)
        states.append(encoded)
    kind = "witness of" if cex.witness else "counterexample to"
    meta: dict[str, Any] = {"format": "ITF", "format-description": ITF_DESCRIPTION,
                            "source": getattr(model, "name", "txnspec"), "description": f"{kind} {cex.property}"}
    if cex.loop_start is not None:
        meta["loop"] = cex.loop_start
    return {"#meta": meta, "vars": [*names, "mbt::actionTaken", "mbt::actionLabel"], "states": states}


def write_itf(cex: Counterexample, path: Path, model: Any = None) -> None:
    """Write :func:`counterexample_to_itf` to ``path``."""
    path.write_text(json.dumps(counterexample_to_itf(cex, model), indent=1) + "\n", encoding="utf-8")


def read_itf(path: Path) -> list[dict[str, Any]]:
    """The states of an ITF file, decoded with :func:`from_itf` (``#meta`` dropped)."""
    document = json.loads(path.read_text(encoding="utf-8"))
    return [{k: from_itf(v) for k, v in state.items() if k != "#meta"} for state in document["states"]]


def jsonl_lines(cex: Counterexample) -> list[str]:
    """One JSON object per step (see the module docstring)."""
    return [json.dumps({"step": i, "action": None if action is None else str(action),
                        "kind": None if action is None else action_kind(action), "state": to_plain(state)},
                       sort_keys=False)
            for i, (action, state) in enumerate(cex.steps)]


def write_jsonl(cex: Counterexample, path: Path, model: Any = None) -> None:
    """Write :func:`jsonl_lines` to ``path`` (``model`` is accepted for symmetry with the other writers)."""
    path.write_text("".join(line + "\n" for line in jsonl_lines(cex)), encoding="utf-8")


def mermaid(cex: Counterexample, model: Any = None) -> str:
    """A Mermaid ``sequenceDiagram`` of ``cex`` (see the module docstring)."""
    declared: list[str] = list((getattr(model, "metadata", None) or {}).get("lifelines", ()))
    used: list[str] = []
    body: list[str] = []
    for i, (action, _state) in enumerate(cex.steps[1:], start=1):
        if cex.loop_start is not None and i == cex.loop_start + 1:
            body.append("    loop forever (a weakly fair behaviour)")
        indent = "        " if cex.loop_start is not None and i > cex.loop_start else "    "
        source, target = str(getattr(action, "source", "") or ""), str(getattr(action, "target", "") or "")
        for who in (source, target):
            if who and who not in used:
                used.append(who)
        label = f"{i}. {_text(str(action))}"
        if source and target and source != target:
            body.append(f"{indent}{_id(source)}->>{_id(target)}: {label}")
        else:
            who = source or target or (declared[0] if declared else "system")
            if who not in used:
                used.append(who)
            body.append(f"{indent}Note over {_id(who)}: {label}")
    if cex.loop_start is not None and len(cex.steps) > cex.loop_start + 1:
        body.append("    end")
    lifelines = declared + [w for w in used if w not in declared]
    first = lifelines[0] if lifelines else "system"
    if cex.stutter:
        body.append(f"    Note over {_id(first)}: then nothing more happens (no weakly fair action is enabled)")
    header = ["sequenceDiagram", f"    %% {'witness of' if cex.witness else 'counterexample to'} {cex.property}"]
    header += [f"    participant {_id(w)} as {_text(w)}" for w in lifelines]
    if not lifelines:
        header.append("    participant system")
    return "\n".join(header + body) + "\n"


def _id(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)


def _text(label: str) -> str:
    """Mermaid message text: ``#`` and ``;`` as entity codes, no line breaks."""
    return label.replace("#", "#35;").replace(";", "#59;").replace("\n", " ")


def write_mermaid(cex: Counterexample, path: Path, model: Any = None) -> None:
    """Write :func:`mermaid` to ``path``."""
    path.write_text(mermaid(cex, model), encoding="utf-8")
