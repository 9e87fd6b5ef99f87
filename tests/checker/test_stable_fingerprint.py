"""Stable fingerprints (checker/stable_fingerprint.py): equal in processes with different string-hash seeds,
apart for values of different classes with equal fields, blind to a frozenset's iteration order."""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import subprocess
import sys
import textwrap

import pytest

from txnspec.checker.stable_fingerprint import Fingerprinter, fingerprint

# Values from a module any process can import (the fixtures below are rebuilt in the subprocess from this text)
FIXTURES = textwrap.dedent("""
    import dataclasses, enum
    from txnspec.spec.model import build_model

    class Colour(enum.Enum):
        RED = 1
        BLUE = 2

    @dataclasses.dataclass(frozen=True)
    class Point:
        x: int
        label: str | None
        tags: frozenset[str]
        kind: type | None = None

    def values():
        model = build_model("default")
        state = next(iter(model.init_states()))
        states = [state]
        for parent in range(60):  # the default scenario's first states, every successor (duplicates too)
            states += [s for _, s in model.next_steps(states[parent])]
        return [None, True, False, 0, -1, 2**70, "", "producer-0", "é", b"raw", 1.5, (), (None,),
                frozenset({"a", "b", "c", "d", "e"}), Colour.RED, Point(1, None, frozenset({"x", "y"}), Point),
                ("nested", (1, (2, (3, None))), frozenset({(1, "a"), (2, "b")})), *states]
""")


def _fingerprints_in_subprocess(seed: str) -> list[int]:
    script = FIXTURES + textwrap.dedent("""
        import json, sys
        from txnspec.checker.stable_fingerprint import fingerprint
        print(json.dumps({"fingerprints": [fingerprint(v) for v in values()], "hash": hash("producer-0")}))
    """)
    env = dict(os.environ, PYTHONHASHSEED=seed)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True,
                         timeout=120)
    answer = json.loads(out.stdout)
    return [*answer["fingerprints"], answer["hash"]]


def test_equal_across_processes_with_different_hash_seeds() -> None:
    first = _fingerprints_in_subprocess("1")
    second = _fingerprints_in_subprocess("2")
    # the seeds really differ: the salted hash of a string is not the same in the two processes
    assert first[-1] != second[-1]
    assert first[:-1] == second[:-1]
    namespace: dict[str, object] = {"__name__": "__main__"}  # the classes' module, as under ``python -c``
    exec(FIXTURES, namespace)  # and in this process (a third seed), with fresh objects
    values = namespace["values"]()  # type: ignore[operator]
    assert [fingerprint(v) for v in values] == first[:-1]
    states = values[17:]  # the spec's states: equal states, and only they, share a fingerprint
    assert len(states) > 20 and len({fingerprint(s) for s in states}) == len(set(states))


class Colour(enum.Enum):
    RED = 1


class Shade(enum.Enum):
    RED = 1


@dataclasses.dataclass(frozen=True)
class EndTxnResponse:
    error: str | None


@dataclasses.dataclass(frozen=True)
class InitProducerIdResponse:
    error: str | None


@dataclasses.dataclass(frozen=True)
class WithNote:
    value: int
    note: str = dataclasses.field(default="", compare=False)


def test_values_of_different_classes_with_equal_fields_differ() -> None:
    assert fingerprint(EndTxnResponse(None)) != fingerprint(InitProducerIdResponse(None))
    assert fingerprint(EndTxnResponse("X")) != fingerprint(InitProducerIdResponse("X"))
    assert fingerprint(Colour.RED) != fingerprint(Shade.RED)
    assert fingerprint((1, 2)) != fingerprint(frozenset({1, 2}))
    assert fingerprint(1) != fingerprint(True) != fingerprint("1")
    assert fingerprint(None) != fingerprint(()) != fingerprint("")
    assert fingerprint(EndTxnResponse) != fingerprint(InitProducerIdResponse)
    # nesting is not concatenation
    assert fingerprint(((1,), 2)) != fingerprint((1, (2,))) != fingerprint((1, 2))
    assert fingerprint(("ab", "c")) != fingerprint(("a", "bc"))


def test_equal_values_have_one_fingerprint() -> None:
    forward = frozenset(f"p{i}" for i in range(50))
    backward = frozenset(f"p{i}" for i in reversed(range(50)))
    assert fingerprint(forward) == fingerprint(backward)
    assert fingerprint(WithNote(3, "a")) == fingerprint(WithNote(3, "b"))  # compare=False fields are left out
    assert fingerprint(WithNote(3)) != fingerprint(WithNote(4))


def test_the_memory_changes_nothing() -> None:
    values = [(i, f"s{i % 7}", frozenset({i % 3, None}), EndTxnResponse(str(i % 2))) for i in range(500)]
    remembering, forgetting, small = Fingerprinter(), Fingerprinter(limit=0), Fingerprinter(limit=10)
    expected = [forgetting.fingerprint(v) for v in values]
    assert [remembering.fingerprint(v) for v in values] == expected
    assert [small.fingerprint(v) for v in values] == expected
    assert [Fingerprinter(by_identity=True).fingerprint(v) for v in values] == expected
    assert [remembering.fingerprint(v) for v in values] == expected  # the second time, from the memory


def test_pinned_fingerprints() -> None:
    # the encoding is part of the format: a change would make fingerprints from two versions disagree
    assert fingerprint((1, "a", None)) == 1961014149280154972
    assert fingerprint(None) == 5684666394782960368
    assert -(2**63) <= fingerprint(EndTxnResponse(None)) < 2**63


@pytest.mark.parametrize("value", [[1], {"a": 1}, {1}, object()])
def test_other_types_are_refused(value: object) -> None:
    with pytest.raises(TypeError, match="cannot fingerprint"):
        fingerprint((1, value))


def test_seeded_parts_give_the_same_fingerprints_to_unpickled_values() -> None:
    import pickle

    shared = (EndTxnResponse("X"), frozenset({"a", "b"}), ("deep", (1, 2)))
    parent = WithNote(1), shared, "leaf"
    child = WithNote(2), shared, "leaf"
    sender = Fingerprinter(by_identity=True)
    expected = sender.fingerprint(child)
    parts = sender.parts(child)
    assert parts is not None and parts[1] is not None and parts[2] is None  # leaves have no digest
    receiver = Fingerprinter(by_identity=True)
    arrived = pickle.loads(pickle.dumps(child))
    receiver.seed(arrived, parts)
    assert receiver.fingerprint(arrived) == expected == Fingerprinter().fingerprint(child)
    assert receiver.fingerprint(pickle.loads(pickle.dumps(parent))) == Fingerprinter().fingerprint(parent)
    assert sender.parts(frozenset({1})) is None and sender.parts(3) is None  # no ordered components
