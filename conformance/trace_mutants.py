"""Trace mutants: does a replay notice a trace that is wrong? The suite's own sensitivity, measured per adapter.

What it measures
    Each passing spec trace is changed in one place by an operator (:data:`OPERATORS`): a step dropped,
    duplicated, two adjacent steps swapped, a foreign step (of another trace) inserted, one field of a
    delivered message's body changed, the recorded observation edited (an error added, a sent message dropped or
    one of its body fields changed, a visible record or a committed offset invented), one field of the recorded
    abstract state changed. Each mutant is replayed on every adapter; it is *killed* there when the replay
    diverges. A mutant the spec's own generator reproduces exactly (:func:`txnspec.conformance.generate.realize`
    of its actions records the same observations and abstract states, say the swap of two commuting deliveries,
    or the drop of the last step) is *equivalent*: it is a correct trace, counted apart with that reason, and
    must pass everywhere. The score of an adapter is killed / (mutants - equivalent).

Assumes
    The traces replay on every adapter unmutated (they are the pool of :mod:`.mutation`). The spec's own
    bookkeeping in a trace (a transactional request's correlation, the ghost tag) is never edited: no system
    under test has it to compare (:mod:`txnspec.conformance.envelope_diff`).
"""

from __future__ import annotations

import enum
import json
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from txnspec.conformance.replay import replay
from txnspec.conformance.traces import Step, Trace, TraceError
from txnspec.spec.errors import Errors
from txnspec.spec.values import replace

OPERATORS = ("drop", "duplicate", "swap", "foreign", "body", "observation", "abstract")
__all__ = ["OPERATORS", "TraceMutant", "TraceMutantResult", "equivalence", "mutants_of", "trace_mutation_score"]


@dataclass(frozen=True)
class TraceMutant:
    operator: str
    trace_id: str
    where: str  # e.g. "step 3", "steps 3/4", "step 5 InitProducerId.producer_epoch"
    trace: Trace = field(repr=False)


def _changed(value: Any, rng: random.Random) -> Any:
    """A different value of the same kind."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, enum.Enum):
        others = [m for m in type(value) if m is not value]
        return rng.choice(others)
    if isinstance(value, int):
        return value + rng.choice((1, -1, 2))
    if isinstance(value, str):
        return value + "x"
    if value is None:
        return "x"
    if isinstance(value, frozenset):
        return value | {"zz"}
    if isinstance(value, tuple):
        if value and isinstance(value[0], tuple):  # offsets ((partition, offset), ...)
            (partition, offset), *rest = value
            return ((partition, offset + 1), *rest)
        return (*value, 0)
    raise TypeError(f"no change for {type(value).__name__}")


def _body_mutants(trace: Trace, i: int, rng: random.Random) -> Iterator[TraceMutant]:
    import dataclasses

    step = trace.steps[i]
    envelope = step.action.message
    assert envelope is not None  # a delivery's step
    for f in dataclasses.fields(envelope.body):
        body = replace(envelope.body, **{f.name: _changed(getattr(envelope.body, f.name), rng)})
        action = step.action._replace(message=replace(envelope, body=body))
        steps = list(trace.steps)
        steps[i] = Step(action, step.observation, step.abstract)
        yield TraceMutant("body", trace.id, f"step {i} {type(body).__name__}.{f.name}", trace.with_steps(steps))


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(value, list) and value:
        for k, v in enumerate(value):
            yield from _leaves(v, (*path, k))
    else:
        yield path, value


def _set(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    """A deep copy of ``value`` with the leaf at ``path`` replaced."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _set(value[head], rest, new)}
    copy = list(value)
    copy[head] = _set(copy[head], rest, new)
    return copy


def _json_changed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str):
        return value + "x"
    if value is None:
        return 0
    return [*value, 0] if isinstance(value, list) else value


def _observation_edits(obs: Mapping[str, Any], rng: random.Random) -> Iterator[tuple[str, dict[str, Any]]]:
    yield "errors", {**obs, "errors": sorted([*obs.get("errors", []), "UNKNOWN_SERVER_ERROR"])}
    sent = list(obs.get("sent", []))
    if sent:
        k = rng.randrange(len(sent))
        yield f"sent[{k}] dropped", {**obs, "sent": sent[:k] + sent[k + 1:]}
        body = sent[k]["body"]
        fields = [name for name, v in body.items() if name != "type" and isinstance(v, int | str | bool)]
        if fields:
            name = rng.choice(fields)
            value = body[name]
            new = (Errors.UNKNOWN_SERVER_ERROR.value if value != Errors.UNKNOWN_SERVER_ERROR.value
                   else Errors.NONE.value) if name == "error" else _json_changed(value)
            changed = {**sent[k], "body": {**body, name: new}}
            yield f"sent[{k}].body.{name}", {**obs, "sent": [*sent[:k], changed, *sent[k + 1:]]}
    visible = obs.get("visible", {})
    if visible:
        partition = rng.choice(sorted(visible))
        level = rng.choice(("read_committed", "read_uncommitted"))
        view = visible[partition]
        edited = {**visible, partition: {**view, level: [*view.get(level, []), 999]}}
        yield f"visible[{partition}].{level}", {**obs, "visible": edited}
    offsets = dict(obs.get("offsets", {}))
    key = rng.choice(sorted(offsets)) if offsets else "g/input-0"
    offsets[key] = offsets.get(key, 0) + 1
    yield f"offsets[{key}]", {**obs, "offsets": offsets}


def mutants_of(trace: Trace, rng: random.Random, *, foreign: Trace | None = None,
               per_operator: int = 3) -> Iterator[TraceMutant]:
    """Up to ``per_operator`` mutants of each operator (each body field of a sampled delivery is one; each edit
    of a sampled observation is one), positions drawn with ``rng``."""
    steps, n = list(trace.steps), len(trace.steps)
    if n == 0:
        return

    def positions(count: int, candidates: Sequence[int]) -> list[int]:
        return sorted(rng.sample(list(candidates), min(count, len(candidates))))

    for i in positions(per_operator, range(n)):
        yield TraceMutant("drop", trace.id, f"step {i}", trace.with_steps(steps[:i] + steps[i + 1:]))
    for i in positions(per_operator, range(n)):
        yield TraceMutant("duplicate", trace.id, f"step {i}", trace.with_steps([*steps[:i + 1], *steps[i:]]))
    for i in positions(per_operator, range(n - 1)):
        swapped = [*steps[:i], steps[i + 1], steps[i], *steps[i + 2:]]
        yield TraceMutant("swap", trace.id, f"steps {i}/{i + 1}", trace.with_steps(swapped))
    if foreign is not None and foreign.steps:
        for i in positions(per_operator, range(n)):
            other = foreign.steps[rng.randrange(len(foreign.steps))]
            yield TraceMutant("foreign", trace.id, f"step {i} from {foreign.id}",
                              trace.with_steps([*steps[:i], other, *steps[i:]]))
    deliveries = [i for i, s in enumerate(steps) if s.action.message is not None]
    for i in positions(per_operator, deliveries):
        yield from _body_mutants(trace, i, rng)
    for i in positions(per_operator, range(n)):
        for what, obs in _observation_edits(steps[i].observation, rng):
            edited = [*steps[:i], Step(steps[i].action, obs, steps[i].abstract), *steps[i + 1:]]
            yield TraceMutant("observation", trace.id, f"step {i} {what}", trace.with_steps(edited))
    with_abstract = [i for i, s in enumerate(steps) if s.abstract]
    for i in positions(per_operator, with_abstract):
        leaves = [(p, v) for p, v in _leaves(steps[i].abstract) if not isinstance(v, dict | list)]
        if not leaves:
            continue
        path, value = rng.choice(leaves)
        abstract = _set(steps[i].abstract, path, _json_changed(value))
        edited = [*steps[:i], Step(steps[i].action, steps[i].observation, abstract), *steps[i + 1:]]
        yield TraceMutant("abstract", trace.id, f"step {i} abstract.{'.'.join(map(str, path))}",
                          trace.with_steps(edited))


def equivalence(mutant: TraceMutant) -> str | None:
    """Why the mutant is a correct trace (the spec's generator records exactly it), or None when it is not."""
    from txnspec.conformance.generate import realize

    trace = mutant.trace
    try:
        again = realize(trace.scenario, trace.variant, [s.action for s in trace.steps], trace_id=trace.id)
    except TraceError:
        return None
    same = all(a.observation == b.observation and a.abstract == b.abstract
               for a, b in zip(again.steps, trace.steps, strict=True))
    if not same:
        return None
    reasons = {"drop": "the rest is itself a trace of the spec (a prefix, or a step nothing after it depends on)",
               "swap": "the two steps commute: the spec's trace of the swapped order records exactly these "
                       "observations and states",
               "duplicate": "the repeated step is enabled again and changes nothing",
               "foreign": "the inserted step is enabled there and records exactly these observations"}
    return reasons.get(mutant.operator, "the spec's generator records exactly this trace")


@dataclass(frozen=True)
class TraceMutantResult:
    operator: str
    trace_id: str
    where: str
    killed: dict[str, bool]  # adapter -> the replay diverged
    detail: dict[str, str]  # adapter -> the divergence
    equivalent: str | None = None  # why it is a correct trace


def trace_mutation_score(traces: Sequence[Trace], adapters: Mapping[str, Callable[[], Any]], *, seed: int = 0,
                         per_operator: int = 3,
                         on_result: Callable[[TraceMutantResult], None] | None = None) -> dict[str, Any]:
    """Every mutant of every trace replayed on every adapter; the summary per adapter and operator."""
    rng = random.Random(seed)
    results: list[TraceMutantResult] = []
    for k, trace in enumerate(traces):
        foreign = traces[(k + 1) % len(traces)] if len(traces) > 1 else None
        for mutant in mutants_of(trace, rng, foreign=foreign, per_operator=per_operator):
            killed, detail = {}, {}
            for name, make in adapters.items():
                try:
                    verdict = replay(mutant.trace, make())
                except Exception as exc:
                    killed[name], detail[name] = True, f"the adapter raised {type(exc).__name__}: {exc}"
                    continue
                killed[name], detail[name] = not verdict.ok, verdict.detail
            equivalent = None if all(killed.values()) else equivalence(mutant)
            result = TraceMutantResult(mutant.operator, mutant.trace_id, mutant.where, killed, detail, equivalent)
            results.append(result)
            if on_result:
                on_result(result)
    return summarise(results, list(adapters))


def summarise(results: Sequence[TraceMutantResult], adapters: Sequence[str]) -> dict[str, Any]:
    equivalent = [r for r in results if r.equivalent is not None]
    scored = [r for r in results if r.equivalent is None]
    per_adapter = {}
    for name in adapters:
        killed = sum(r.killed[name] for r in scored)
        per_operator = {op: f"{sum(r.killed[name] for r in scored if r.operator == op)}/"
                            f"{sum(1 for r in scored if r.operator == op)}" for op in OPERATORS}
        per_adapter[name] = {"killed": killed, "mutants": len(scored), "score": f"{killed}/{len(scored)}",
                             "per_operator": per_operator,
                             "survivors": [f"{r.trace_id} {r.operator} {r.where}" for r in scored
                                           if not r.killed[name]]}
    # an equivalent mutant that an adapter rejects is a false alarm of that adapter
    false_alarms = {name: [f"{r.trace_id} {r.operator} {r.where}: {r.detail[name]}" for r in equivalent
                           if r.killed[name]] for name in adapters}
    return {"mutants": len(results), "equivalent": len(equivalent),
            "equivalent_reasons": sorted({f"{r.operator}: {r.equivalent}" for r in equivalent}),
            "adapters": per_adapter, "false_alarms": false_alarms,
            "results": [json.loads(json.dumps(r.__dict__)) for r in results]}
