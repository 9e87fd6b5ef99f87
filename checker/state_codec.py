"""Compact bytes for a batch of states: a table of distinct values per field, and rows of indices into them.

What is modelled
    How a search that moves states between processes (the partitioned search's workers, forked or Spark tasks,
    evening out a level: :mod:`txnspec.checker.exchange`) writes a batch of them. A state is split into its fields
    (a dataclass's fields in declaration order, or a tuple's items); each field position has a table of the distinct
    values met at that position in the batch (distinct by identity: a model's successors share the sub-states they
    did not change with their parent, so siblings have a handful of distinct values per field), and a state is a row
    of indices, one per field (``array`` items of 1, 2 or 4 bytes, the least that holds every table's size). The
    tables are pickled together once (protocol 5: a sub-value shared by two tables is written once). Two things
    follow:

    * size: on the Kafka spec's ``default`` scenario (the successors of level 12) 28 bytes of tables and 14 of
      rows a state, where one pickle of the same states in one chunk takes 56 and each state pickled alone
      1,650;
    * selection: :meth:`Batch.select` keeps some rows and the same tables (as bytes) without decoding, and
      :meth:`Batch.decode` of some positions builds only those states.

    A table's value is written as the field of a *representative*, the first state of the batch that holds
    it, and the representatives are what is pickled: a model's own unpickling then treats each value as a
    state's field (the spec's values intern their fields when unpickled, so a decoded state's fields are the
    very objects its successor function's memo tables hold: expanding decoded states of ``default`` took 1.7
    times as long as expanding the states the search built, and about 1.05 times with the fields interned).
    Decoding builds each state from its row: ``cls(*fields)`` for a dataclass, a tuple for a tuple. Decoding a
    batch costs about a quarter of unpickling the same states chunked (the tables hold each distinct field
    value once, where a state unpickled whole revives every field of every state).

Assumes
    A dataclass state's fields are all ``init`` fields, so ``cls(*fields)`` rebuilds an equal state (the
    frozen dataclasses of the spec; a class that does not fit is written whole, below). The values are
    picklable.

Leaves out
    Batches whose states are not all of one class (or tuples of one length), and states of other types (ints,
    strings, a class with ``init=False`` fields): they are written whole, one table of the states themselves,
    still shared by identity.
"""

from __future__ import annotations

import dataclasses
import pickle
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

_WHOLE, _TUPLE, _DATACLASS = 0, 1, 2  # how a batch's states are split into fields


@dataclass(frozen=True)
class Batch:
    """Encoded states: ``tables`` (the pickled shape and tables), ``rows`` (``width`` indices a state, of
    ``array`` type ``code``)."""

    tables: bytes
    code: str
    width: int
    rows: bytes

    def __len__(self) -> int:
        return len(self.rows) // (self.width * array(self.code).itemsize)

    @property
    def size(self) -> int:
        """Bytes of the encoding (what a process holds or ships)."""
        return len(self.tables) + len(self.rows)

    def select(self, positions: Iterable[int]) -> Batch:
        """The states at ``positions`` (in that order), without decoding any: the same tables, fewer rows."""
        rows, width, kept = array(self.code, self.rows), self.width, array(self.code)
        for p in positions:
            kept.extend(rows[p * width:(p + 1) * width])
        return Batch(self.tables, self.code, width, kept.tobytes())

    def decode(self, positions: Iterable[int] | None = None) -> list[Any]:
        """The states (all, or those at ``positions``, in that order)."""
        shape, representatives, owners = pickle.loads(self.tables)
        rows, width = array(self.code, self.rows), self.width
        wanted = range(len(rows) // width) if positions is None else positions
        kind = shape[0]
        if kind == _WHOLE:
            whole = [representatives[r] for r in owners[0]]
            return [whole[rows[p]] for p in wanted]
        if kind == _TUPLE:
            tables = [[representatives[r][j] for r in column] for j, column in enumerate(owners)]
        else:
            tables = [[getattr(representatives[r], name) for r in column] for name, column in zip(shape[2], owners,
                                                                                                 strict=True)]
        columns = range(width)
        if kind == _TUPLE:
            return [tuple([tables[j][rows[p * width + j]] for j in columns]) for p in wanted]
        cls = shape[1]
        return [cls(*[tables[j][rows[p * width + j]] for j in columns]) for p in wanted]


def _shape(states: Sequence[Any]) -> tuple[Any, ...]:
    """How the batch splits into fields: one dataclass (init fields only), tuples of one length, else whole."""
    first = type(states[0]) if states else None
    if first is None or any(type(s) is not first for s in states):
        return (_WHOLE,)
    if first is tuple:
        width = len(states[0])
        if width and all(len(s) == width for s in states):
            return (_TUPLE, width)
        return (_WHOLE,)
    if dataclasses.is_dataclass(first):
        fields = dataclasses.fields(first)
        if fields and all(f.init for f in fields):
            return (_DATACLASS, first, tuple(f.name for f in fields))
    return (_WHOLE,)


def encode(states: Sequence[Any]) -> Batch:
    """The batch of ``states`` (in order).

    >>> batch = encode([(1, "a"), (1, "b"), (2, "a")])
    >>> len(batch), batch.decode(), batch.select([2, 0]).decode()
    (3, [(1, 'a'), (1, 'b'), (2, 'a')], [(2, 'a'), (1, 'a')])
    """
    shape = _shape(states)
    kind = shape[0]
    if kind == _WHOLE:
        columns: list[Any] = [list(states)]
    elif kind == _TUPLE:
        columns = [[s[j] for s in states] for j in range(shape[1])]
    else:
        columns = [[getattr(s, name) for s in states] for name in shape[2]]
    # each distinct value is written as a field of the first state that holds it (its representative): a
    # model's own unpickling then treats it as it treats a state's field (the spec interns them)
    representatives: list[Any] = []
    chosen: dict[int, int] = {}  # id of a representative state -> its position
    owners: list[array[int]] = []
    indices: list[list[int]] = []
    for column in columns:
        seen: dict[int, int] = {}
        owner = array("I")
        index: list[int] = []
        for position, v in enumerate(column):
            i = seen.get(id(v))  # the values are held by ``states`` meanwhile: an identity is not reused
            if i is None:
                i = seen[id(v)] = len(owner)
                state = states[position]
                r = chosen.get(id(state))
                if r is None:
                    r = chosen[id(state)] = len(representatives)
                    representatives.append(state)
                owner.append(r)
            index.append(i)
        owners.append(owner)
        indices.append(index)
    largest = max((len(o) for o in owners), default=0)
    code = "B" if largest <= 0xFF else "H" if largest <= 0xFFFF else "I"
    rows = array(code, [i for row in zip(*indices, strict=True) for i in row]) if indices else array(code)
    blob = pickle.dumps((shape, representatives, owners), protocol=5)
    return Batch(blob, code, len(columns), rows.tobytes())
