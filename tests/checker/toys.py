"""Toy models for the checker's tests: small enough to count by hand, each showing one feature.

What is modelled
    * :func:`counter`: one integer counting up to ``limit`` (a line of ``limit + 1`` states).
    * :func:`two_phase_commit`: Lamport's TwoPhase.tla (TM and ``rm_count`` resource managers, message
      set never shrinks); 288 distinct states for 3 RMs, as TLC reports. RM ids are interchangeable.
    * :func:`dining`: two philosophers taking two forks in opposite orders: a deadlock after 2 steps.
    * :func:`spinner`: a worker that may spin forever or finish; "finish" is weakly fair, so the
      leads-to property holds only with fairness.
    * :func:`traffic_light`: a car waits at a light that turns green and red forever; crossing is enabled
      only on green, so weak fairness does not make it cross (a liveness bug under fairness).
    * :func:`dropped_request`: a request may be dropped, leaving a state without successors where the
      reply never comes (a stuttering violation, and a deadlock).
    * :func:`client_choice`: the only way on from a request is an unfair client choice.
    * :func:`tokens`: ``n`` interchangeable processes each counting to 2; symmetry keeps multisets.
    * :func:`fan`: ``width`` branches of a line; one invariant fails late in level 1, the other first in
      level 2 (a search that stops once both failed stops early in level 2).
    * :func:`crowded`: ``fan(10, 3)`` with two invariants failing in level 2, at its 4th and 7th states, and a
      ``sometimes`` met at its 9th (a search that stops at its first violation knows nothing of the others).

Left out
    Anything about Kafka: these models exist to pin the engine's behaviour.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from txnspec.checker.model import Label, Model, Property


def counter(limit: int, *, bad_at: int | None = None, wish: int | None = None) -> Model[int]:
    """Counts 0, 1, ..., ``limit``; invariant ``below_bad`` fails at ``bad_at``; ``sometimes`` reaches ``wish``."""
    props: list[Property[Any]] = [Property.always("bounded", lambda n: 0 <= n <= limit)]
    if bad_at is not None:
        props.append(Property.always("below_bad", lambda n: n < bad_at))
    props.append(Property.sometimes("reaches_wish", lambda n: n == (limit if wish is None else wish)))
    return Model(
        name=f"counter[{limit}]",
        init_states=lambda: [0],
        next_steps=lambda n: [(Label("inc", (n,)), n + 1)] if n < limit else [],
        properties=props,
        is_final=lambda n: n == limit,
        describe_state=lambda n: f"n={n}",
        metadata={"action_kinds": ["inc", "dec"]},
    )


# --- TwoPhase.tla -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TwoPhaseStep:
    """An action of TwoPhase.tla; ``rm`` is ``None`` for the TM's own steps."""

    kind: str
    rm: int | None = None

    @property
    def source(self) -> str:
        if self.kind in ("TMCommit", "TMAbort"):
            return "tm"
        if self.kind == "TMRcvPrepared":
            return f"rm{self.rm}"
        if self.kind in ("RMRcvCommitMsg", "RMRcvAbortMsg"):
            return "tm"
        return f"rm{self.rm}"

    @property
    def target(self) -> str:
        if self.kind == "TMRcvPrepared":
            return "tm"
        if self.kind in ("RMRcvCommitMsg", "RMRcvAbortMsg"):
            return f"rm{self.rm}"
        return ""

    def __str__(self) -> str:
        return self.kind if self.rm is None else f"{self.kind}({self.rm})"


@dataclass(frozen=True, slots=True)
class TwoPhaseState:
    rm_state: tuple[str, ...]
    tm_state: str
    tm_prepared: tuple[int, ...]  # sorted
    msgs: tuple[tuple[Any, ...], ...]  # sorted: ("Abort",), ("Commit",), ("Prepared", rm)


def _with(t: tuple[Any, ...], item: Any) -> tuple[Any, ...]:
    return t if item in t else tuple(sorted((*t, item)))


def _two_phase_next(s: TwoPhaseState) -> Iterable[tuple[TwoPhaseStep, TwoPhaseState]]:
    n = len(s.rm_state)
    if s.tm_state == "init":
        for rm in range(n):
            if ("Prepared", rm) in s.msgs:
                yield TwoPhaseStep("TMRcvPrepared", rm), TwoPhaseState(s.rm_state, s.tm_state,
                                                                        _with(s.tm_prepared, rm), s.msgs)
        if len(s.tm_prepared) == n:
            yield TwoPhaseStep("TMCommit"), TwoPhaseState(s.rm_state, "committed", s.tm_prepared,
                                                          _with(s.msgs, ("Commit",)))
        yield TwoPhaseStep("TMAbort"), TwoPhaseState(s.rm_state, "aborted", s.tm_prepared, _with(s.msgs, ("Abort",)))
    for rm in range(n):
        def set_rm(value: str, rm: int = rm) -> tuple[str, ...]:
            return (*s.rm_state[:rm], value, *s.rm_state[rm + 1:])

        if s.rm_state[rm] == "working":
            yield TwoPhaseStep("RMPrepare", rm), TwoPhaseState(set_rm("prepared"), s.tm_state, s.tm_prepared,
                                                               _with(s.msgs, ("Prepared", rm)))
            yield TwoPhaseStep("RMChooseToAbort", rm), TwoPhaseState(set_rm("aborted"), s.tm_state, s.tm_prepared,
                                                                     s.msgs)
        if ("Commit",) in s.msgs:
            yield TwoPhaseStep("RMRcvCommitMsg", rm), TwoPhaseState(set_rm("committed"), s.tm_state,
                                                                    s.tm_prepared, s.msgs)
        if ("Abort",) in s.msgs:
            yield TwoPhaseStep("RMRcvAbortMsg", rm), TwoPhaseState(set_rm("aborted"), s.tm_state, s.tm_prepared,
                                                                   s.msgs)


def _two_phase_canonical(s: TwoPhaseState) -> TwoPhaseState:
    """The least of the states obtained by renaming the RMs (their ids are interchangeable)."""
    n = len(s.rm_state)
    best: tuple[Any, ...] | None = None
    for perm in itertools.permutations(range(n)):  # perm[old] = new
        rm_state = [""] * n
        for old, new in enumerate(perm):
            rm_state[new] = s.rm_state[old]
        msgs = tuple(sorted(("Prepared", perm[m[1]]) if m[0] == "Prepared" else m for m in s.msgs))
        candidate = (tuple(rm_state), s.tm_state, tuple(sorted(perm[r] for r in s.tm_prepared)), msgs)
        if best is None or candidate < best:
            best = candidate
    assert best is not None
    return TwoPhaseState(*best)


def two_phase_commit(rm_count: int = 3, *, broken: bool = False) -> Model[TwoPhaseState]:
    """TwoPhase.tla; ``broken`` lets the TM commit once any RM prepared (TCConsistent then fails)."""

    def next_steps(s: TwoPhaseState) -> Iterable[tuple[Hashable, TwoPhaseState]]:
        yield from _two_phase_next(s)
        if broken and s.tm_state == "init" and s.tm_prepared and len(s.tm_prepared) < rm_count:
            yield TwoPhaseStep("TMCommit"), TwoPhaseState(s.rm_state, "committed", s.tm_prepared,
                                                          _with(s.msgs, ("Commit",)))

    def consistent(s: TwoPhaseState) -> bool:
        return not ("committed" in s.rm_state and "aborted" in s.rm_state)

    return Model(
        name=f"two-phase-commit[{rm_count}{', broken' if broken else ''}]",
        init_states=lambda: [TwoPhaseState(("working",) * rm_count, "init", (), ())],
        next_steps=next_steps,
        properties=[
            Property.always("consistent", consistent, partner="some_commit"),
            Property.sometimes("some_commit", lambda s: "committed" in s.rm_state),
            Property.sometimes("all_abort", lambda s: all(r == "aborted" for r in s.rm_state)),
            Property.leads_to("prepared_decides", lambda s: "prepared" in s.rm_state,
                              lambda s: "prepared" not in s.rm_state),
        ],
        symmetry=_two_phase_canonical,
        # every step but an RM's own choice is the protocol's and weakly fair
        fairness=lambda a: None if a.kind == "RMChooseToAbort" else str(a),
        describe_state=lambda s: "\n".join([f"tm: {s.tm_state} prepared={list(s.tm_prepared)}",
                                            *(f"rm{i}: {r}" for i, r in enumerate(s.rm_state)),
                                            f"msgs: {list(s.msgs)}"]),
        metadata={"action_kinds": ["TMRcvPrepared", "TMCommit", "TMAbort", "RMPrepare", "RMChooseToAbort",
                                   "RMRcvCommitMsg", "RMRcvAbortMsg", "RMCrash"],
                  "lifelines": ["tm", *(f"rm{i}" for i in range(rm_count))]},
    )


# --- deadlock -----------------------------------------------------------------------------------


def dining() -> Model[tuple[str, str]]:
    """Philosopher A takes fork 1 then 2, B takes 2 then 1; each eats, then puts both back."""
    forks_needed = {"A": ("f1", "f2"), "B": ("f2", "f1")}

    def holds(state: tuple[str, str], who: str) -> tuple[str, ...]:
        return tuple(f for f, owner in zip(("f1", "f2"), state, strict=True) if owner == who)

    def next_steps(state: tuple[str, str]) -> list[tuple[str, tuple[str, str]]]:
        steps = []
        for who, order in forks_needed.items():
            mine = holds(state, who)
            if len(mine) == 2:
                steps.append((f"{who}.eat_and_release", ("", "")))
                continue
            wanted = order[len(mine)]
            index = 0 if wanted == "f1" else 1
            if state[index] == "":
                new = list(state)
                new[index] = who
                steps.append((f"{who}.take({wanted})", (new[0], new[1])))
        return steps

    return Model("dining", lambda: [("", "")], next_steps,
                 properties=[Property.always("one_owner_per_fork", lambda s: len(s) == 2)])


# --- liveness -----------------------------------------------------------------------------------


def spinner(*, fair: bool = True) -> Model[tuple[bool, int]]:
    """(done, phase): spin flips the phase, finish sets done. Holds iff "finish" is weakly fair."""

    def next_steps(s: tuple[bool, int]) -> list[tuple[str, tuple[bool, int]]]:
        done, phase = s
        if done:
            return []
        return [("spin", (False, 1 - phase)), ("finish", (True, phase))]

    return Model(
        "spinner", lambda: [(False, 0)], next_steps,
        properties=[Property.leads_to("eventually_done", lambda s: not s[0], lambda s: s[0])],
        is_final=lambda s: s[0],
        fairness=(lambda a: a) if fair else None,
    )


def traffic_light() -> Model[tuple[str, str]]:
    """(light, car): the light toggles forever; the waiting car may cross only on green."""

    def next_steps(s: tuple[str, str]) -> list[tuple[str, tuple[str, str]]]:
        light, car = s
        steps = [("toggle", ("green" if light == "red" else "red", car))]
        if car == "away":
            steps.append(("arrive", (light, "waiting")))
        if car == "waiting" and light == "green":
            steps.append(("cross", (light, "away")))
        return steps

    return Model(
        "traffic-light", lambda: [("red", "away")], next_steps,
        properties=[Property.leads_to("waiting_car_crosses", lambda s: s[1] == "waiting", lambda s: s[1] == "away")],
        fairness=lambda a: a if a in ("toggle", "cross") else None,
    )


def dropped_request() -> Model[str]:
    """idle -> requested -> replied -> idle, but a request may also be dropped (then nothing happens)."""
    moves = {"idle": [("request", "requested")],
             "requested": [("reply", "replied"), ("drop", "dropped")],
             "replied": [("reset", "idle")],
             "dropped": []}
    return Model(
        "dropped-request", lambda: ["idle"], lambda s: moves[s],
        properties=[Property.leads_to("request_answered", lambda s: s == "requested", lambda s: s == "replied")],
        fairness=lambda a: None if a == "drop" else a,
    )


def client_choice() -> Model[str]:
    """From "open", only the client's (unfair) choice "close" leads on, to the final state "closed"."""
    moves = {"start": [("open", "open")], "open": [("close", "closed")], "closed": []}
    return Model(
        "client-choice", lambda: ["start"], lambda s: moves[s],
        properties=[Property.leads_to("open_gets_closed", lambda s: s == "open", lambda s: s == "closed")],
        is_final=lambda s: s == "closed",
        fairness=lambda a: None if a == "close" else a,
    )


# --- symmetry -----------------------------------------------------------------------------------


def tokens(processes: int = 3) -> Model[tuple[int, ...]]:
    """``processes`` interchangeable counters 0..2; symmetry sorts them."""

    def next_steps(s: tuple[int, ...]) -> list[tuple[str, tuple[int, ...]]]:
        return [(f"step({i})", (*s[:i], v + 1, *s[i + 1:])) for i, v in enumerate(s) if v < 2]

    return Model(
        f"tokens[{processes}]", lambda: [(0,) * processes], next_steps,
        properties=[
            Property.always("total_bounded", lambda s: sum(s) <= 2 * processes),
            Property.always("not_two_done", lambda s: s.count(2) < 2),
            Property.sometimes("one_done", lambda s: 2 in s),
        ],
        symmetry=lambda s: tuple(sorted(s)),
        is_final=lambda s: all(v == 2 for v in s),
    )


# --- an early stop in a later level ---------------------------------------------------------------------------


def fan(width: int = 10, length: int = 3) -> Model[tuple[int, int]]:
    """From ``(0, 0)``, ``width`` branches ``(1, i)``, each a line ``(d, i)`` to depth ``length``; ``last_branch``
    fails at ``(1, width - 1)`` (the end of level 1), ``first_line`` at ``(2, 0)`` (the start of level 2)."""

    def next_steps(s: tuple[int, int]) -> list[tuple[str, tuple[int, int]]]:
        if s == (0, 0):
            return [(f"branch({i})", (1, i)) for i in range(width)]
        return [(f"step({s[1]})", (s[0] + 1, s[1]))] if s[0] < length else []

    return Model(
        f"fan[{width}, {length}]", lambda: [(0, 0)], next_steps,
        properties=[Property.always("last_branch", lambda s: s != (1, width - 1)),
                    Property.always("first_line", lambda s: s != (2, 0))],
        is_final=lambda s: s[0] == length,
    )


def crowded() -> Model[tuple[int, int]]:
    """fan(10, 3) whose invariants ``fourth`` and ``seventh`` fail at (2, 3) and (2, 6); ``ninth`` meets (2, 8)."""
    base = fan(10, 3)
    return Model("crowded", base.init_states, base.next_steps,
                 properties=[Property.always("fourth", lambda s: s != (2, 3)),
                             Property.always("seventh", lambda s: s != (2, 6)),
                             Property.sometimes("ninth", lambda s: s == (2, 8))], is_final=base.is_final)
