"""Messages compared field by field: what a lock-step replay says when a delivered or sent message differs.

What it compares
    Two :class:`txnspec.spec.network.Envelope` values are the same message when source, target and body are
    equal, and, for a produce, a marker and their answers, the ``context`` too: the batch
    ``(partition, producer id, epoch, base sequence)`` an answer belongs to, the ``(transactional id, coordinator
    epoch, partition)`` of a marker (what Kafka's correlation id pairs). A transactional request's correlation
    (its ``context``) and the ghost ``tag`` are the spec's own bookkeeping and never compared.
    :func:`differences` names each differing field (``source``, ``target``, ``type`` or a body field as
    ``InitProducerId.transactional_id``); :func:`describe_mismatch` says why no message in flight is the one a
    step delivers; :func:`sent_difference` compares the messages a step put in flight, as multisets.

Assumes
    Bodies are the frozen dataclasses of :mod:`txnspec.spec.messages`; the JSON form is
    :mod:`txnspec.conformance.action_codec`'s.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from txnspec.conformance.action_codec import ActionFormatError, envelope_from_json, envelope_to_json
from txnspec.spec.network import Envelope

JSON = Any


def shown(value: Any) -> Any:
    """A field's value as a report shows it (sets sorted, enums by value)."""
    if isinstance(value, frozenset | set):
        return sorted(value)
    if hasattr(value, "value") and not isinstance(value, int | str):
        return value.value
    return value


# the messages whose context is data both sides have: the batch a produce answer is for, a marker's identity
CONTEXT_COMPARED = frozenset({"Produce", "ProduceResponse", "WriteTxnMarkers", "WriteTxnMarkersResponse"})


def _compared(envelope: Envelope) -> tuple[str, ...]:
    context = type(envelope.body).__name__ in CONTEXT_COMPARED
    return ("source", "target", "context") if context else ("source", "target")


def differences(expected: Envelope, actual: Envelope) -> list[tuple[str, Any, Any]]:
    """The fields in which two envelopes differ, as ``(name, expected, actual)``."""
    out: list[tuple[str, Any, Any]] = []
    for name in _compared(expected):
        if getattr(expected, name) != getattr(actual, name):
            out.append((name, shown(getattr(expected, name)), shown(getattr(actual, name))))
    a, b = expected.body, actual.body
    if type(a) is not type(b):
        return [*out, ("type", type(a).__name__, type(b).__name__)]
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if x != y:
            out.append((f"{type(a).__name__}.{f.name}", shown(x), shown(y)))
    return out


def same(expected: Envelope, actual: Envelope) -> bool:
    return expected.body == actual.body and all(getattr(expected, n) == getattr(actual, n)
                                                for n in _compared(expected))


def describe_mismatch(expected: Envelope, candidates: Sequence[Envelope], *, what: str = "in flight") -> str:
    """Why none of ``candidates`` is ``expected``: the differing fields of the nearest candidate of the same type
    (between the same endpoints if there is one), or, with none of that type, the message's first field and 'impl
    has none in flight'."""
    body = expected.body
    of_type = [c for c in candidates if type(c.body) is type(body)]
    if not of_type:
        key = dataclasses.fields(body)[0].name
        return (f"{type(body).__name__}.{key}: trace {shown(getattr(body, key))!r}, impl has none {what} "
                f"({expected.source}->{expected.target})")
    # the nearest: between the same endpoints first, then the fewest differing fields
    best = min(of_type, key=lambda c: ((c.source, c.target) != (expected.source, expected.target),
                                       len(differences(expected, c))))
    return "; ".join(f"{name}: trace {x!r}, impl {y!r}" for name, x, y in differences(expected, best))


def key(envelope: Envelope) -> str:
    """A canonical text of source, target and body (for multisets and sorting)."""
    return json.dumps(plain(envelope), sort_keys=True)


def plain(envelope: Envelope) -> dict[str, JSON]:
    """The compared part of an envelope's JSON: source, target, body (and the context where compared)."""
    return compared_json(envelope_to_json(envelope))


def compared_json(message: dict[str, JSON]) -> dict[str, JSON]:
    """The compared part of a message's JSON (:func:`txnspec.conformance.action_codec.envelope_to_json`)."""
    names = ["source", "target", "body"]
    if isinstance(message.get("body"), dict) and message["body"].get("type") in CONTEXT_COMPARED:
        names.append("context")
    return {k: message.get(k) for k in names}


def decode_sent(sent: Sequence[JSON]) -> list[Envelope]:
    out = []
    for item in sent:
        try:
            out.append(envelope_from_json(item))
        except ActionFormatError as exc:
            raise ValueError(f"a recorded sent message is not one: {exc}") from None
    return out


def sent_difference(expected: Sequence[JSON], actual: Sequence[JSON]) -> str | None:
    """None when the two lists of sent messages (JSON) are the same multiset (source, target, body); else the
    first difference, field by field where a message of the same type was sent with other fields."""
    try:
        want, got = decode_sent(expected), decode_sent(actual)
    except ValueError as exc:
        return str(exc)
    missing = Counter(key(e) for e in want)
    missing.subtract(Counter(key(e) for e in got))
    if all(n == 0 for n in missing.values()):
        return None
    unsent = [e for e in want if missing[key(e)] > 0]
    extra = [e for e in got if missing[key(e)] < 0]
    if unsent:
        first = unsent[0]
        return f"sent {first}: " + describe_mismatch(first, extra, what="sent in this step")
    first = extra[0]
    return f"sent {first}: the trace has no such message in this step (impl sent it)"
