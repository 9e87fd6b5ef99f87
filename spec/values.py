"""Frozen values with a cached hash and a fast ``replace``: what the system model's states are made of.

Models
    The model checker hashes every successor state and builds each one by replacing a few fields of its
    parent. With plain frozen dataclasses both are paid in full at every step: ``hash`` walks the whole
    nested state (partitions, producers, the network, the ghost), and ``dataclasses.replace`` inspects the
    fields and runs ``__init__`` again. :func:`value` makes a frozen, slotted dataclass that

    * computes its hash once, on first use, and keeps it (an unchanged sub-state shared by a parent and its
      successor is never hashed again, so hashing a successor costs what changed); the hash covers the class
      name, so values of two classes with equal fields (an ``EndTxnResponse`` and an ``InitProducerIdResponse``
      with one error) differ in hash as they differ in equality: the hash can serve as a fingerprint;
    * compares by identity first, then by cached hash, then field by field;
    * gets ``__replace__`` (the protocol of Python 3.13's ``copy.replace``), generated for its fields: a new
      object with some fields changed, without ``__init__``.

    :func:`replace` is ``dataclasses.replace`` that takes the fast path when there is one; ``Cls._make(a, b, ...)``
    builds a value from all its fields in order, without ``__init__`` (the successor function's hot path). Both
    fill a private *builder* class of the same layout (plain attribute stores, not a frozen class's
    ``object.__setattr__`` call per field), then turn it into the value class by assigning ``__class__``.

    Two helpers let the successor function share work between states (:mod:`txnspec.spec.system`):

    * :func:`memoised` is ``functools.lru_cache`` with a bound, registered so that :func:`clear_caches` can
      empty every table (tests, and long processes that move on to another scenario). A memoised function is
      pure: a hit returns the object an equal call returned before.
    * :data:`intern` (hash-consing) maps a value to the one shared object equal to it, so that equal sub-states
      built on different paths become one object: stored states share them (memory), and equality between
      states that share them is settled by identity.

Assumes
    Field values are themselves immutable and hashable (as frozen states need anyway), and the class has no
    ``__post_init__`` (a replaced value skips ``__init__``: :func:`value` refuses such a class).

    Memoised functions and interning treat equal arguments as the same (as ``lru_cache`` does: ``1 == True``); the
    states' fields are typed, so equal fields have one type.

Leaves out
    Interning of every value at construction: only what the successor function's memoised steps produce, and
    what is unpickled, is interned (a value built by a test or a replay is compared field by field). The cached
    hash is not pickled: a value unpickled in another process (whose string hashes differ) computes its own.
"""

from __future__ import annotations

import dataclasses
import functools
import weakref
from collections.abc import Callable
from typing import Any, TypeVar, dataclass_transform

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

_HASH = "_hash"  # the slot holding the cached hash; 0 means not computed yet


@dataclass_transform(frozen_default=True)
def value(cls: type[T] | None = None, /, *, order: bool = False) -> Any:
    """``@dataclass(frozen=True, slots=True)`` with a cached hash, identity-first equality and a generated
    ``__replace__`` (see the module doc). Use as ``@value`` or ``@value(order=True)``."""

    def wrap(c: type[T]) -> type[T]:
        return _make_value(c, order)

    return wrap if cls is None else wrap(cls)


def _make_value(cls: type[T], order: bool) -> type[T]:
    if "__post_init__" in cls.__dict__:
        raise TypeError(f"{cls.__name__}: a value's replace skips __init__, so it cannot have __post_init__")
    fields_of: Any = dataclasses.dataclass(frozen=True, slots=True, order=order)(cls)
    names = [f.name for f in dataclasses.fields(fields_of)]
    compared = [f.name for f in dataclasses.fields(fields_of) if f.compare]
    # the cached hash lives in a slot of a subclass, so that it is no dataclass field (fields(), traces and
    # reports never see it); the subclass takes the class's name and is what the module binds
    made: Any = type(cls.__name__, (fields_of,), {"__slots__": (_HASH,), "__module__": cls.__module__,
                                                  "__qualname__": cls.__qualname__, "__doc__": cls.__doc__})
    # A frozen class stores each field through object.__setattr__, a C call per field. The builder has the same
    # layout and Python's own attribute stores (so they run at the speed of a plain slotted class): _make and
    # __replace__ fill a builder, then turn it into the value class (a __class__ assignment between classes
    # of one layout); nothing outside them ever sees a builder.
    builder = type(f"{cls.__name__}Builder", (fields_of,), {
        "__slots__": (_HASH,), "__module__": cls.__module__, "__setattr__": object.__setattr__,
        "__delattr__": object.__delattr__})  # both: they share one type slot
    namespace: dict[str, Any] = {"_new": object.__new__, "_set": object.__setattr__, "_cls": made,
                                 "_builder": builder, "_KEEP": _KEEP, "_hash": hash, "_tag": cls.__qualname__}
    own = ", ".join(f"self.{n}" for n in compared) + ("," if len(compared) == 1 else "")
    other = ", ".join(f"other.{n}" for n in compared) + ("," if len(compared) == 1 else "")
    params = ", ".join(f"{n}=_KEEP" for n in names)
    sets = "\n".join(f"    __new.{n} = self.{n} if {n} is _KEEP else {n}" for n in names)
    makes = "\n".join(f"    __new.{n} = {n}" for n in names)
    source = f"""
def __new__(cls, *args, **kwargs):
    new = _new(cls)
    _set(new, '_hash', 0)
    return new

def __hash__(self):
    h = self._hash
    if h:
        return h
    h = _hash((_tag, {own})) or 1
    _set(self, '_hash', h)
    return h

def __eq__(self, other):
    if self is other:
        return True
    if other.__class__ is not self.__class__:
        return NotImplemented
    if self._hash and other._hash and self._hash != other._hash:
        return False
    return ({own}) == ({other})

def _make({', '.join(names)}):
    __new = _new(_builder)
{makes}
    __new._hash = 0
    __new.__class__ = _cls
    return __new

def __replace__(self{', *, ' + params if names else ''}):
    __new = _new(_builder)
{sets}
    __new._hash = 0
    __new.__class__ = _cls
    return __new

def __reduce__(self):
    return _revive, (_cls, ({', '.join(f'self.{n}' for n in names)}{',' if len(names) == 1 else ''}))
"""
    namespace["_revive"] = _revive
    exec(source, namespace)  # generated from the class's own field names
    for name in ("__new__", "_make", "__hash__", "__eq__", "__replace__", "__reduce__"):
        function = namespace[name]
        function.__qualname__ = f"{made.__qualname__}.{name}"
        setattr(made, name, staticmethod(function) if name in ("__new__", "_make") else function)
    return made  # type: ignore[no-any-return]


class _Keep:
    """The default of ``__replace__``'s parameters: keep the field as it is."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "KEEP"


_KEEP = _Keep()


def replace(obj: T, /, **changes: Any) -> T:
    """``dataclasses.replace``, through the value's generated ``__replace__`` when it has one."""
    fast: Callable[..., T] | None = getattr(type(obj), "__replace__", None)
    if fast is not None:
        return fast(obj, **changes)
    return dataclasses.replace(obj, **changes)  # type: ignore[type-var]


def _revive(cls: Any, fields: tuple[Any, ...]) -> Any:
    """A value unpickled (or copied), its parts (values and tuples) replaced by the shared objects equal to them,
    so that states read back from disk (the checker's fingerprint store) meet the successor function's tables
    as the states it built do. The value itself is not interned (a state read back is kept only as long as its
    reader keeps it). Its hash is computed afresh (string hashes differ from process to process)."""
    return cls._make(*(intern(f) if type(f) is tuple or hasattr(f, _HASH) else f for f in fields))


# --- sharing work between states ----------------------------------------------------------------------------

_CACHES: weakref.WeakSet[Any] = weakref.WeakSet()  # every memoised function (per-system tables die with it)


TABLE_SIZE = 1 << 10
"""A memo table's bound. Breadth-first, the states met one after another share their parts, so a table of the
most recent thousand calls answers nearly as often as an unbounded one (5% more time on the ``default`` scenario
than tables of 65,536), and every process that expands states holds its own tables: the fingerprint search's
bytes a state count them (issue 16: tables of 65,536 cost about 110 bytes a state on ``default``)."""

SMALL_TABLE_SIZE = 1 << 7
"""The bound of a table whose function is cheap to run again (a scan of the network): most of a table's memory is
the parts of states that its keys hold on to, so such a table is kept small (no time lost on ``default``)."""


def memoised(maxsize: int = TABLE_SIZE) -> Callable[[F], F]:
    """``functools.lru_cache(maxsize)`` for a pure function of values, registered for :func:`clear_caches`.
    The bound keeps a process's memory in check; a table that overflows forgets its least recent entries."""

    def wrap(function: F) -> F:
        cached = functools.lru_cache(maxsize=maxsize)(function)
        _CACHES.add(cached)
        return cached  # type: ignore[return-value]

    return wrap


class Interner:
    """Hash-consing: ``intern(x)`` is the one stored object equal to ``x`` (``x`` itself the first time).

    The table holds at most ``limit`` objects and starts afresh when full: interning only shares memory and
    speeds up equality, so forgetting is always safe."""

    __slots__ = ("limit", "table")

    def __init__(self, limit: int = 1 << 18) -> None:
        self.limit = limit
        self.table: dict[Any, Any] = {}

    def __call__(self, obj: T) -> T:
        table = self.table
        shared = table.get(obj)
        if shared is None:
            if len(table) >= self.limit:
                table.clear()
            table[obj] = shared = obj
        elif shared.__class__ is not obj.__class__:  # a tuple equal to a NamedTuple: keep each its own type
            return obj
        return shared

    def __len__(self) -> int:
        return len(self.table)


intern = Interner()


def clear_caches() -> None:
    """Empty every memoised function's table and the interning table."""
    for cached in list(_CACHES):
        cached.cache_clear()
    intern.table.clear()


def cache_stats() -> dict[str, tuple[int, int, int]]:
    """``{function name: (hits, misses, entries)}`` over the memoised functions alive (several tables of one
    name, e.g. per system, are summed): what a profile of the successor function reads."""
    stats: dict[str, tuple[int, int, int]] = {}
    for cached in list(_CACHES):
        info = cached.cache_info()
        name = getattr(cached, "__qualname__", repr(cached))
        hits, misses, size = stats.get(name, (0, 0, 0))
        stats[name] = (hits + info.hits, misses + info.misses, size + info.currsize)
    return stats
