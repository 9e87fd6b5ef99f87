"""Symmetry reduction for the Kafka system model: the scenario's interchangeable names, and a canonicaliser.

Models
    A scenario often names actors the protocol treats alike: the application may send each record to any of
    the scenario's data partitions (:func:`txnspec.spec.system._calls` iterates ``ClientConfig.partitions``), the
    producer instances of one transactional id run the same program (a zombie pair), and transactional ids with
    as many instances each are alike. Renaming them is an automorphism of the transition system: it maps the
    initial state to itself, successors to successors, and keeps every property's verdict. :func:`group_of`
    derives the group of such renamings from the scenario (never from its name); :func:`canonicaliser` maps a
    state to the representative of its orbit, the least of its images under a total order that is the same in
    every process (:func:`order_key`), for ``Model.symmetry``. This is TLC's ``SYMMETRY`` (permutations of model
    values) and stateright's ``Representative``: the checker keeps one state per orbit.

    A renaming (:class:`Renaming`) changes partition names, transactional ids, producer indexes and what is
    derived from them: producer addresses (:class:`~txnspec.spec.network.ProducerAddress`), consumer member
    ids (``member-k``), ghost tags
    ``(index, incarnation, transaction)`` and owners ``(index, incarnation)``, markers' and batches' contexts,
    the coordinator's illegal-transition records (their transactional id). It walks every ``@value`` field generically
    (strings through the name table), with the fields that hold producer indexes as integers handled by name,
    then restores what the model keeps sorted or positional: ``SystemState.partitions`` in the scenario's
    order, ``producers`` by index, the network as the bag :func:`txnspec.spec.network.bag` sorts, the
    coordinator's maps (``cache``, ``txn_log``, ``completions``) by transactional id, a producer's ``sequences``
    and the ghost's ``open_txn`` and ``owner`` by ``repr`` of their key, the ghost's histories (``batches``,
    ``decisions``, ``told``) in their canonical order, a group's members sorted. Positional histories (the
    log, ``txn_log``'s values, ``unsent``) keep their order. Producer ids, epochs, offsets and correlation ids
    are data the protocol hands out in the order things happen: a renamed run hands them out alike, so they are
    not renamed.

Assumes
    The protocol's handlers (and a variant's) treat names uniformly: nothing compares a partition name or a
    producer index with a constant or orders decisions by them. What singles out an actor breaks the symmetry
    and :func:`group_of` keeps it fixed: the fault ``rebalance`` evicts the first producer's member
    (:func:`txnspec.spec.faults._rebalance`), so producer 0 and its transactional id stay put when it is
    budgeted. The renamed names are disjoint from every other string of the state (the offsets partition,
    ``coordinator``, ``group``, the group id, the input partition ``input-0``); otherwise no symmetry is used.
    Fairness classes are action kinds (:func:`txnspec.spec.model.fairness`), which name no actor, so ``leads_to``
    is judged soundly on the quotient graph (:mod:`txnspec.checker.liveness`).

Leaves out
    Symmetries that are not renamings (e.g. of data values such as producer ids), and groups larger than
    :data:`MAX_GROUP` elements (the canonicaliser tries every element). ``tests/spec/test_symmetry.py`` checks
    on small scenarios that every generator maps the reachable set onto itself and commutes with successors,
    that the reduced count is the number of orbits, and that verdicts and counterexample lengths agree.

Long because a renaming must walk every component of the state (one function a component, :func:`_state` down
to :func:`_classic_group`) and restore each one's order; a component added to the state is renamed here or the
reduction is unsound, so the walk, the group it generates and the canonicaliser are read together.
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import math
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from txnspec.spec import coordinator_state as coord_state
from txnspec.spec import group as group_mod
from txnspec.spec.constants import group_offsets_partition
from txnspec.spec.ghost import AppendedBatch, Ghost, batch_order, decision_order
from txnspec.spec.network import COORDINATOR, GROUP, NETWORK, Envelope, ProducerAddress, bag, producer_address
from txnspec.spec.producer_state import Producer
from txnspec.spec.scenarios import Scenario
from txnspec.spec.system_state import SystemState
from txnspec.spec.values import intern

T = TypeVar("T")
MAX_GROUP = 720  # the canonicaliser builds every image: beyond this, a search is better off without symmetry
_MEMO_LIMIT = 1 << 18  # entries per renaming's table before it starts afresh (forgetting is always safe)


def member_id(index: int) -> str:
    """:attr:`txnspec.spec.producer.Producer.member_id` of producer ``index`` inside a group."""
    return f"member-{index}"


class Renaming:
    """One element of the group: a map of names (partitions, transactional ids and member ids) and of producer
    indexes (which rename producer addresses too). Hashed by identity: each is made once per model, and
    memoises its own work."""

    __slots__ = ("indexes", "memo", "names", "order", "tables")

    def __init__(self, names: dict[str, str], indexes: tuple[int, ...], order: dict[str, int]) -> None:
        self.names = names  # every renamed string, to its image
        self.indexes = indexes  # producer index i -> indexes[i]
        self.order = order  # partition name -> its position in SystemState.partitions
        self.memo: dict[Any, Any] = {}  # value -> its image
        # part of the state that is a plain tuple -> its images
        self.tables: dict[str, dict[Any, Any]] = {"partitions": {}, "producers": {}, "network": {}}

    def __repr__(self) -> str:
        moved = {k: v for k, v in self.names.items() if k != v}
        return f"Renaming({moved})"

    def tag(self, tag: tuple[int, int, int] | None) -> Any:
        return None if tag is None else (self.indexes[tag[0]], *tag[1:])

    def __call__(self, v: Any) -> Any:
        """``v`` renamed, and re-normalised where the model keeps it sorted (memoised per value)."""
        t = type(v)
        if t is str:
            return self.names.get(v, v)
        if t is tuple:
            renamed = tuple(self(x) for x in v)
            return v if all(a is b for a, b in zip(renamed, v, strict=True)) else renamed
        if t is frozenset:
            return frozenset(self(x) for x in v)
        if not _is_value(t):
            return v  # ints, bools, None, enums, the request types of Producer.awaiting
        memo = self.memo
        got = memo.get(v)
        if got is None:
            if len(memo) >= _MEMO_LIMIT:
                memo.clear()
            got = memo[v] = intern(_HANDLERS.get(t, _fields)(self, v))
        return got

    def part(self, kind: str, v: Any, rename: Callable[[Renaming, Any], Any]) -> Any:
        """``rename(self, v)`` memoised in the table of ``kind``, a part of the state that is a plain tuple (whose
        hash is not cached): keyed by identity (the model interns them), the entry keeping ``v`` alive."""
        table = self.tables[kind]
        got = table.get(id(v))
        if got is None or got[0] is not v:
            if len(table) >= _MEMO_LIMIT:
                table.clear()
            got = table[id(v)] = (v, rename(self, v))
        return got[1]


_VALUE_TYPES: dict[type, bool] = {}


def _is_value(t: type) -> bool:
    """Instances of ``t`` are dataclass values (walked field by field)."""
    got = _VALUE_TYPES.get(t)
    if got is None:
        got = _VALUE_TYPES[t] = dataclasses.is_dataclass(t)
    return got


def _fields(r: Renaming, v: T, **special: Any) -> T:
    """``v`` with every field renamed (``special``: fields already computed), ``v`` itself if nothing moved."""
    changed = dict(special)
    for f in _field_names(type(v)):
        if f not in changed:
            x = getattr(v, f)
            y = r(x)
            if y is not x:
                changed[f] = y
    if all(getattr(v, k) == x for k, x in changed.items()):
        return v
    return type(v).__replace__(v, **changed)  # type: ignore[attr-defined,no-any-return]


_FIELDS: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def _by_repr_of_key(pairs: Any) -> tuple[Any, ...]:
    """A map kept sorted by ``repr`` of its key (``producer._set``, ``ghost.set_pair``)."""
    return tuple(sorted(pairs, key=lambda kv: repr(kv[0])))


def _state(r: Renaming, s: SystemState) -> SystemState:
    # the hot path (once per successor and renaming): the value memo looked up inline, misses go through r
    memo = r.memo
    cs, group, ghost = memo.get(s.coordinator), memo.get(s.group), memo.get(s.ghost)
    return SystemState._make(
        r(s.coordinator) if cs is None else cs,
        r.part("partitions", s.partitions, _partitions),
        r(s.group) if group is None else group,
        r.part("producers", s.producers, _producers),
        r.part("network", s.network, _network),
        s.budget,
        r(s.ghost) if ghost is None else ghost)


def _partitions(r: Renaming, partitions: tuple[tuple[str, Any], ...]) -> tuple[tuple[str, Any], ...]:
    """Renamed, back in the order of ``SystemState.partitions`` (the scenario's, as ``initial_state`` made it)."""
    renamed = sorted(((r(name), r(p)) for name, p in partitions), key=lambda np: r.order[np[0]])
    return intern(tuple(intern(np) for np in renamed))


def _producers(r: Renaming, producers: tuple[Producer, ...]) -> tuple[Producer, ...]:
    """Renamed, back in the order of their indexes (``system_state.with_producer`` keeps them positional)."""
    return intern(tuple(sorted((r(p) for p in producers), key=lambda p: p.index)))


def _network(r: Renaming, network: tuple[Envelope, ...]) -> tuple[Envelope, ...]:
    """Renamed, sorted again as the model keeps its bag."""
    return bag(tuple(r(e) for e in network))


def _producer(r: Renaming, p: Producer) -> Producer:
    return _fields(r, p, index=r.indexes[p.index],
                   sequences=_by_repr_of_key((r(k), n) for k, n in p.sequences))


def _envelope(r: Renaming, e: Envelope) -> Envelope:
    return _fields(r, e, tag=r.tag(e.tag))


def _appended(r: Renaming, b: AppendedBatch) -> AppendedBatch:
    return _fields(r, b, tag=r.tag(b.tag))


def _ghost(r: Renaming, g: Ghost) -> Ghost:
    return _fields(r, g,
                   batches=tuple(sorted((r(b) for b in g.batches), key=batch_order)),
                   open_txn=_by_repr_of_key((r(t), r.tag(tag)) for t, tag in g.open_txn),
                   decisions=tuple(sorted(((r(t), r.tag(opened), result, r.tag(by))
                                           for t, opened, result, by in g.decisions), key=decision_order)),
                   told=tuple(sorted((r.tag(tag), outcome) for tag, outcome in g.told)),
                   owner=_by_repr_of_key((r(t), (r.indexes[i], incarnation)) for t, (i, incarnation) in g.owner))


def _coordinator(r: Renaming, cs: coord_state.CoordinatorState) -> coord_state.CoordinatorState:
    def by_id(pairs: Any) -> tuple[Any, ...]:  # coordinator._put keeps its maps sorted by transactional id
        return tuple(sorted(((r(t), r(x)) for t, x in pairs), key=lambda kv: kv[0]))

    # the illegal transitions (IllegalTransition: a transactional id and a reason) are renamed field by field
    return _fields(r, cs, cache=by_id(cs.cache), txn_log=by_id(cs.txn_log), completions=by_id(cs.completions))


def _classic_group(r: Renaming, g: group_mod.ClassicGroup) -> group_mod.ClassicGroup:
    return _fields(r, g, members=tuple(sorted(r(m) for m in g.members)))


_HANDLERS: dict[type, Callable[[Renaming, Any], Any]] = {
    SystemState: _state, Producer: _producer, Envelope: _envelope, AppendedBatch: _appended, Ghost: _ghost,
    coord_state.CoordinatorState: _coordinator, group_mod.ClassicGroup: _classic_group,
    ProducerAddress: lambda r, a: producer_address(r.indexes[a.index]),
}


# --- the group of a scenario ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Group:
    """The interchangeable names of a scenario: ``partitions`` (the data partitions, all alike), ``ids`` (classes
    of transactional ids that may be swapped), ``instances`` (the producer indexes of each transactional id);
    ``fixed``: producer indexes no renaming may move."""

    partitions: tuple[str, ...]
    ids: tuple[tuple[str, ...], ...]
    instances: tuple[tuple[str, tuple[int, ...]], ...]
    fixed: frozenset[int]
    all_partitions: tuple[str, ...]  # SystemState.partitions' names, in order

    def size(self) -> int:
        return sum(1 for _ in self._maps())

    def _maps(self) -> Iterator[tuple[dict[str, str], tuple[int, ...]]]:
        """Every element as (partition and id map, producer index map)."""
        blocks = dict(self.instances)
        n = sum(len(b) for b in blocks.values())
        per_class = [[dict(zip(c, perm, strict=True)) for perm in itertools.permutations(c)] for c in self.ids]
        for part_perm in itertools.permutations(self.partitions):
            for choice in itertools.product(*per_class):
                ids = {t: u for m in choice for t, u in m.items()}
                # an id moves its block of instances onto the image id's block, each instance to any of them
                targets = [itertools.permutations(blocks[ids.get(t, t)]) for t, _ in self.instances]
                for images in itertools.product(*targets):
                    indexes = [0] * n
                    for (_, block), image in zip(self.instances, images, strict=True):
                        for i, j in zip(block, image, strict=True):
                            indexes[i] = j
                    if any(indexes[i] != i for i in self.fixed):
                        continue
                    names = dict(zip(self.partitions, part_perm, strict=True)) | ids
                    yield names, tuple(indexes)

    def renamings(self) -> tuple[Renaming, ...]:
        """Every element but the identity."""
        order = {name: i for i, name in enumerate(self.all_partitions)}
        out = []
        for names, indexes in self._maps():
            table = dict(names)
            for i, j in enumerate(indexes):
                table[member_id(i)] = member_id(j)
            if all(k == v for k, v in table.items()):
                continue
            out.append(Renaming(table, indexes, order))
        return tuple(out)


def group_of(scenario: Scenario) -> Group | None:
    """The renamings that are automorphisms of ``scenario``'s model, or None when there is none but the
    identity (or the names collide with other strings of the state, or the group is too large)."""
    s = scenario
    tids = s.producer_transactional_ids
    blocks = tuple((t, tuple(i for i, u in enumerate(tids) if u == t)) for t in s.transactional_ids)
    fixed = frozenset({0}) if s.budget("rebalance") else frozenset()  # faults._rebalance evicts producer 0
    pinned = {tids[i] for i in fixed}
    by_count: dict[int, list[str]] = {}
    for t, block in blocks:
        if t not in pinned:
            by_count.setdefault(len(block), []).append(t)
    # ids in different transaction-log partitions are not alike (a partition loads apart from the others)
    ids = tuple(tuple(c) for c in by_count.values() if len(c) > 1) if s.txn_log_partitions == 1 else ()
    offsets = group_offsets_partition(s.group_id)
    names = [*s.partitions, *s.transactional_ids, *(member_id(i) for i in range(len(tids)))]
    others = {offsets, COORDINATOR, GROUP, NETWORK, s.group_id, "input-0"}  # "input-0": producer.dispatch
    if len(set(names)) < len(names) or others & set(names):
        return None
    g = Group(s.partitions, ids, blocks, fixed, (*s.partitions, *((offsets,) if s.commit_offsets else ())))
    size = math.factorial(len(s.partitions)) * math.prod(math.factorial(len(c)) for c in ids) \
        * math.prod(math.factorial(len(b)) for _, b in blocks)  # an upper bound of the size
    if size > MAX_GROUP or g.size() < 2:
        return None
    return g


# --- a total order the same in every process -----------------------------------------------------------

_KEYS: dict[Any, Any] = {}


def order_key(v: Any) -> Any:
    """A key of ``v`` under which equal keys mean equal values, and which compares alike in every process
    (never a ``hash`` of a string: Spark's executors salt them differently; frozensets by their sorted keys)."""
    t = type(v)
    if t is str:
        return (3, v)
    if t is ProducerAddress:  # as its text, as when addresses were strings: the representatives stay the same
        return (3, v.text)
    if t is int:
        return (2, v)
    if t is bool:
        return (1, int(v))
    if v is None:
        return (0,)
    if t is tuple:
        return (6, tuple(order_key(x) for x in v))
    if t is frozenset:
        return (7, tuple(sorted(order_key(x) for x in v)))
    if isinstance(v, enum.Enum):
        return (4, t.__module__, t.__qualname__, v.name)
    if isinstance(v, type):
        return (5, v.__module__, v.__qualname__)
    if _is_value(t):
        got = _KEYS.get(v)
        if got is None:
            if len(_KEYS) >= _MEMO_LIMIT:
                _KEYS.clear()
            got = _KEYS[v] = (8, t.__module__, t.__qualname__,
                              tuple(order_key(getattr(v, f)) for f in _field_names(t)))
        return got
    raise TypeError(f"no order key for {t.__name__}")


_COMPONENTS = _field_names(SystemState)
_COMPONENT_KEYS: dict[str, dict[Any, Any]] = {name: {} for name in _COMPONENTS}


def _component_key(name: str, v: Any) -> Any:
    """:func:`order_key` of a part of the state, memoised per part (by identity, as :meth:`Renaming.part`); the
    network's as a multiset: its key does not depend on the order ``repr`` gave its bag in this process."""
    table = _COMPONENT_KEYS[name]
    got = table.get(id(v))
    if got is None or got[0] is not v:
        if len(table) >= _MEMO_LIMIT:
            table.clear()
        key = (9, tuple(sorted(order_key(e) for e in v))) if name == "network" else order_key(v)
        got = table[id(v)] = (v, key)
    return got[1]


# the parts of a state in the order the representative compares them (any fixed order makes a total order): those
# a renaming of partitions or of producers changes, cheap to rename and to tell apart, first
_ORDER = ("producers", "partitions", "coordinator", "network", "ghost", "group", "budget")
_PARTS: dict[str, Callable[[Renaming, Any], Any]] = {
    "producers": lambda r, v: r.part("producers", v, _producers),
    "partitions": lambda r, v: r.part("partitions", v, _partitions),
    "network": lambda r, v: r.part("network", v, _network),
    "coordinator": Renaming.__call__, "ghost": Renaming.__call__, "group": Renaming.__call__,
    "budget": lambda r, v: v,
}


def _image_if_less(r: Renaming, state: SystemState, best: SystemState) -> SystemState | None:
    """``r``'s image of ``state`` if it comes before ``best`` (the first part that differs decides, by its
    :func:`order_key`), else None; an image that loses is not built further than the part that decides."""
    parts: dict[str, Any] = {}
    for name in _ORDER:
        x, y = _PARTS[name](r, getattr(state, name)), getattr(best, name)
        parts[name] = x
        if x is y or x == y:
            continue
        if _component_key(name, x) < _component_key(name, y):
            for rest in _ORDER:
                if rest not in parts:
                    parts[rest] = _PARTS[rest](r, getattr(state, rest))
            return SystemState._make(*(parts[n] for n in _COMPONENTS))
        return None
    return None  # equal to best


def canonicaliser(group: Group) -> Callable[[SystemState], SystemState]:
    """``Model.symmetry`` for ``group``: the least image of a state (a state equal to it is its own)."""
    renamings = group.renamings()

    def representative(state: SystemState) -> SystemState:
        best = state
        for r in renamings:
            image = _image_if_less(r, state, best)
            if image is not None:
                best = image
        return best

    return representative
