"""Actions of the Kafka system model (:class:`txnspec.spec.actions.Action`) as JSON, and back.

Format
    An action is a JSON object with its ``kind`` (the :class:`~txnspec.spec.actions.ActionKind` value, say
    ``"deliver Produce"``) and ``actor``, and, where the action has them, ``message``, ``partition``,
    ``transactional_id``, ``request`` (a message type's name), ``awaited`` and ``batch``. A message is its ``source``,
    ``target``, ``body`` (the message type's name under ``"type"`` and its fields under their names: enums
    by value, sets as sorted arrays, tuples as arrays), ``context`` and ``tag``::

        {"kind": "deliver Produce", "actor": "p0", "awaited": true,
         "message": {"source": "producer-0", "target": "p0", "context": ["p0", 0, 0, 0], "tag": [0, 0, 1],
                     "body": {"type": "Produce", "partition": "p0", "producer_id": 0, "producer_epoch": 0,
                              "base_sequence": 0, "record_count": 1, "transactional": true,
                              "transactional_id": "t1"}}}

    Decoding gives back an action equal to the spec's own (so a trace's step is found among the enabled
    actions by equality). Anything else is a :class:`ActionFormatError` naming the field.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from txnspec.spec.actions import DELIVER_KIND, Action, ActionKind
from txnspec.spec.errors import Errors
from txnspec.spec.messages import TransactionResult
from txnspec.spec.network import Envelope, parse_address

JSON = Any
MESSAGE_TYPES: dict[str, type] = {t.__name__: t for t in DELIVER_KIND}
# message fields whose JSON form is not already their Python value
_FIELD_DECODERS: dict[str, Any] = {
    "error": Errors,
    "result": TransactionResult,
    "partitions": frozenset,
    "offsets": lambda pairs: tuple(tuple(pair) for pair in pairs),
}


class ActionFormatError(ValueError):
    """An action's JSON is not one of the system model's actions."""


def _value(value: Any) -> JSON:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, frozenset | set):
        return sorted(_value(v) for v in value)
    if isinstance(value, tuple | list):
        return [_value(v) for v in value]
    return value


def _tuples(value: JSON) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def body_to_json(body: Any) -> dict[str, JSON]:
    out: dict[str, JSON] = {"type": type(body).__name__}
    for f in dataclasses.fields(body):
        out[f.name] = _value(getattr(body, f.name))
    return out


def body_from_json(data: JSON) -> Any:
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        raise ActionFormatError("a message body must be an object with a 'type'")
    cls = MESSAGE_TYPES.get(data["type"])
    if cls is None:
        raise ActionFormatError(f"unknown message type {data['type']!r} (known: {', '.join(MESSAGE_TYPES)})")
    fields = {k: v for k, v in data.items() if k != "type"}
    try:
        decoded = {k: _FIELD_DECODERS[k](v) if k in _FIELD_DECODERS and v is not None else v
                   for k, v in fields.items()}
        return cls(**decoded)
    except (TypeError, ValueError) as exc:
        raise ActionFormatError(f"bad {data['type']} message: {exc}") from None


def envelope_to_json(envelope: Envelope) -> dict[str, JSON]:
    out: dict[str, JSON] = {"source": str(envelope.source), "target": str(envelope.target),
                            "body": body_to_json(envelope.body)}
    if envelope.context is not None:
        out["context"] = _value(envelope.context)
    if envelope.tag is not None:
        out["tag"] = list(envelope.tag)
    return out


def envelope_from_json(data: JSON) -> Envelope:
    if not isinstance(data, dict):
        raise ActionFormatError("'message' must be an object")
    missing = [k for k in ("source", "target", "body") if k not in data]
    if missing:
        raise ActionFormatError(f"message without {', '.join(missing)}")
    tag = data.get("tag")
    return Envelope(parse_address(str(data["source"])), parse_address(str(data["target"])),
                    body_from_json(data["body"]),
                    _tuples(data.get("context")), _tuples(tag) if tag is not None else None)


def action_to_json(action: Action) -> dict[str, JSON]:
    out: dict[str, JSON] = {"kind": action.kind.value, "actor": str(action.actor)}
    if action.message is not None:
        out["message"] = envelope_to_json(action.message)
    if action.partition is not None:
        out["partition"] = action.partition
    if action.transactional_id is not None:
        out["transactional_id"] = action.transactional_id
    if action.request is not None:
        out["request"] = action.request.__name__
    if action.awaited is not None:
        out["awaited"] = action.awaited
    if action.batch is not None:
        out["batch"] = list(action.batch)
    return out


def action_from_json(data: JSON) -> Action:
    if not isinstance(data, dict):
        raise ActionFormatError(f"an action must be a JSON object, not {type(data).__name__}")
    try:
        kind = ActionKind(str(data.get("kind")))
    except ValueError:
        raise ActionFormatError(f"unknown action kind {data.get('kind')!r}") from None
    actor = data.get("actor")
    if not isinstance(actor, str) or not actor:
        raise ActionFormatError("'actor' must be a non-empty string")
    message = envelope_from_json(data["message"]) if data.get("message") is not None else None
    request = None
    if data.get("request") is not None:
        request = MESSAGE_TYPES.get(data["request"])
        if request is None:
            raise ActionFormatError(f"unknown request type {data['request']!r}")
    awaited = data.get("awaited")
    if awaited is not None and not isinstance(awaited, bool):
        raise ActionFormatError("'awaited' must be true, false or absent")
    for name in ("partition", "transactional_id"):
        if data.get(name) is not None and not isinstance(data[name], str):
            raise ActionFormatError(f"'{name}' must be a string")
    batch = data.get("batch")
    if batch is not None and (not isinstance(batch, list) or len(batch) != 4 or not isinstance(batch[0], str)
                              or not all(isinstance(x, int) and not isinstance(x, bool) for x in batch[1:])):
        raise ActionFormatError("'batch' must be [partition, producer id, epoch, base sequence]")
    return Action(kind, parse_address(actor), message,
                  data.get("partition"), data.get("transactional_id"), request, awaited,
                  None if batch is None else (batch[0], batch[1], batch[2], batch[3]))
