"""Reading typed values out of a case's JSON, with errors that name the field and the case, and the base of
every target's observation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from txnspec.conformance.cases.format import CaseInputError
from txnspec.spec.errors import Errors
from txnspec.spec.txn_state import TxnState

_MISSING = object()


def get_int(obj: Mapping[str, Any], key: str, default: Any = _MISSING, *, minimum: int | None = None) -> int:
    value = obj.get(key, default)
    if value is _MISSING:
        raise CaseInputError(f"missing field {key!r}")
    if isinstance(value, bool) or not isinstance(value, int):
        raise CaseInputError(f"field {key!r} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise CaseInputError(f"field {key!r} must be >= {minimum}, got {value}")
    return value


def get_str(obj: Mapping[str, Any], key: str, default: Any = _MISSING, *, nullable: bool = False) -> Any:
    value = obj.get(key, default)
    if value is _MISSING:
        raise CaseInputError(f"missing field {key!r}")
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        raise CaseInputError(f"field {key!r} must be a string, got {value!r}")
    return value


def get_bool(obj: Mapping[str, Any], key: str, default: Any = _MISSING) -> bool:
    value = obj.get(key, default)
    if value is _MISSING:
        raise CaseInputError(f"missing field {key!r}")
    if not isinstance(value, bool):
        raise CaseInputError(f"field {key!r} must be true or false, got {value!r}")
    return value


def get_str_list(obj: Mapping[str, Any], key: str, default: Any = _MISSING) -> list[str]:
    value = obj.get(key, default)
    if value is _MISSING:
        raise CaseInputError(f"missing field {key!r}")
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise CaseInputError(f"field {key!r} must be a list of strings, got {value!r}")
    return value


def get_choice(obj: Mapping[str, Any], key: str, choices: tuple[str, ...], default: Any = _MISSING) -> str:
    value = get_str(obj, key, default)
    if value not in choices:
        raise CaseInputError(f"field {key!r} must be one of {', '.join(choices)}; got {value!r}")
    return str(value)


RESULTS = ("COMMIT", "ABORT")
ISOLATIONS = ("READ_COMMITTED", "READ_UNCOMMITTED")


def error_name(when: Mapping[str, Any]) -> str:
    try:
        return Errors.named(get_str(when, "error")).value
    except ValueError as exc:
        raise CaseInputError(str(exc)) from None


def state_name(value: str) -> str:
    try:
        return TxnState.named(value).value
    except ValueError as exc:
        raise CaseInputError(str(exc)) from None


def named_choice(when: Mapping[str, Any], key: str, known: tuple[str, ...], what: str) -> str:
    value = when.get(key)
    if value not in known:
        raise CaseInputError(f"unknown {what} {value!r} (known: {', '.join(known)})")
    return str(value)


class Observation:
    """What a target reports: ``as_json`` leaves out a field it does not report (None)."""

    def as_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)  # type: ignore[arg-type]
                if getattr(self, f.name) is not None}
