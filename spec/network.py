"""The network of the system model: addresses, messages in flight, and the bag they fly in.

System
    Every actor has an address: a :class:`ProducerAddress` for the k-th producer instance (shown
    ``producer-k``; its index is a field, never read back from the text), ``coordinator`` for the
    transaction coordinator, ``group`` for the group coordinator, and a partition's name for its leader.
    A message in flight is an :class:`Envelope`: source, destination, the request or response
    (:mod:`txnspec.spec.messages`), a correlation and the ghost tag of the transaction it belongs to.

Assumptions
    The network is a bag (any order of delivery covers delay and reordering). It is a tuple kept sorted by
    the envelopes' ``repr`` (with sets' elements sorted: :func:`stable_repr`, the same in every process) so
    that equal bags are equal tuples (states stay canonical and hashable).

Cost
    The model checker meets the same few hundred envelopes and some ten thousand bags again and again, so
    :func:`send`, :func:`deliveries` and :func:`contexts` are memoised, and what they (and :func:`remove_one`)
    return is interned (one shared tuple per bag): an envelope is inserted with ``bisect.insort`` into the sorted bag
    (its sort key rendered once), never by sorting the whole bag again.

Left out
    Connections, their ordering guarantees and request pipelining per connection: TCP's in-order delivery
    per connection is weaker than what Kafka's clients rely on only where the client itself enforces it
    (one transactional request in flight, see :mod:`txnspec.spec.producer`).
"""

from __future__ import annotations

import dataclasses
import functools
from bisect import insort
from typing import Any

from txnspec.spec.messages import (
    AddOffsetsToTxn,
    AddPartitionsToTxn,
    EndTxn,
    EndTxnResponse,
    ErrorResponse,
    InitProducerId,
    InitProducerIdResponse,
    Produce,
    ProduceResponse,
    TxnOffsetCommit,
    WriteTxnMarkers,
    WriteTxnMarkersResponse,
)
from txnspec.spec.values import SMALL_TABLE_SIZE, intern, memoised, value

COORDINATOR, GROUP = "coordinator", "group"
NETWORK = "network"  # the actor of a loss
PRODUCER_PREFIX = "producer-"  # how a producer's address is shown (and written in a trace file)

Tag = tuple[int, int, int]  # (producer index, incarnation, transaction number): ghost, see spec/ghost.py


@value
class ProducerAddress:
    """The address of the ``index``-th producer instance, shown ``producer-k``. The servers' addresses are
    their names (``coordinator``, ``group``, a partition's); only a producer's carries a number the model reads."""

    index: int

    def __str__(self) -> str:
        return self.text

    @property
    def text(self) -> str:
        """The address as reports, trace files and the state's orders show it (``producer-k``)."""
        return f"{PRODUCER_PREFIX}{self.index}"


Address = ProducerAddress | str


@functools.lru_cache(maxsize=1024)  # a handful of addresses, asked about at every step: one value each
def producer_address(index: int) -> ProducerAddress:
    """The address of the ``index``-th producer instance."""
    return intern(ProducerAddress(index))


def producer_index(address: Address) -> int | None:
    """The producer instance behind ``address``, or None for a server."""
    return address.index if type(address) is ProducerAddress else None


def parse_address(text: str) -> Address:
    """The address a trace file writes as text (``producer-k``, else a server's name): the trace format's
    decoder (:mod:`txnspec.conformance.action_codec`) is its only reader."""
    index = text.removeprefix(PRODUCER_PREFIX)
    if index != text and index.isascii() and index.isdigit():
        return producer_address(int(index))
    return text


@value
class Envelope:
    """A message in flight. ``context``: a correlation for a transactional request and its answer, the
    batch ``(partition, producer id, epoch, base sequence)`` for a produce and its answer,
    ``(transactional id, coordinator epoch, partition)`` for a marker and its answer."""

    source: Address
    target: Address
    body: Any
    context: Any = None
    tag: Tag | None = None

    def __str__(self) -> str:
        return f"{self.source}->{self.target}: {describe(self.body)}"


def describe(body: Any) -> str:
    """A message as reports show it (report text only: nothing parses it)."""
    name = type(body).__name__
    if isinstance(body, InitProducerId):
        flags = "".join((", enable2Pc" if body.enable_two_pc else "", ", keepPreparedTxn" if body.keep_prepared_txn
                         else ""))
        return f"InitProducerId({body.transactional_id}, pid={body.producer_id}, epoch={body.producer_epoch}{flags})"
    if isinstance(body, AddPartitionsToTxn):
        return f"AddPartitionsToTxn({','.join(sorted(body.partitions))}, pid={body.producer_id}, " \
               f"epoch={body.producer_epoch})"
    if isinstance(body, AddOffsetsToTxn | TxnOffsetCommit):
        return f"{name}({body.group_id}, pid={body.producer_id}, epoch={body.producer_epoch})"
    if isinstance(body, EndTxn):
        return f"EndTxn({body.result}, pid={body.producer_id}, epoch={body.producer_epoch})"
    if isinstance(body, Produce):
        return f"Produce({body.partition}, pid={body.producer_id}, epoch={body.producer_epoch}, " \
               f"seq={body.base_sequence})"
    if isinstance(body, WriteTxnMarkers):
        return f"WriteTxnMarkers({body.partition}, {body.result}, pid={body.producer_id}, " \
               f"epoch={body.producer_epoch}, coordinatorEpoch={body.coordinator_epoch})"
    if isinstance(body, InitProducerIdResponse | EndTxnResponse):
        return f"{name}({body.error}, pid={body.producer_id}, epoch={body.producer_epoch})"
    if isinstance(body, ProduceResponse):
        extra = ", duplicate" if body.duplicate else ""
        return f"ProduceResponse({body.error}, offset={body.base_offset}{extra})"
    error = getattr(body, "error", None)
    return f"{name}({error})" if error is not None else name


RESPONSES = frozenset({InitProducerIdResponse, ErrorResponse, EndTxnResponse, ProduceResponse,
                       WriteTxnMarkersResponse})


def is_request(body: Any) -> bool:
    return type(body) not in RESPONSES


@functools.cache  # envelopes are few and shared across states: render each one's key once
def _sort_key(envelope: Envelope) -> str:
    return stable_repr(envelope)


def stable_repr(x: Any) -> str:
    """``repr(x)`` with every set's elements in sorted order. A frozenset's own ``repr`` follows the process's
    string-hash salt (``PYTHONHASHSEED``), and the bag's order must not: processes with different salts (a
    Spark driver and its executors) must keep one state as one tuple."""
    if type(x) is ProducerAddress:  # ordered as its text, as when addresses were strings: bags keep their order
        return repr(x.text)
    if isinstance(x, frozenset | set):
        elements = ", ".join(sorted(stable_repr(e) for e in x))
        return f"{type(x).__name__}({{{elements}}})" if x else f"{type(x).__name__}()"
    if type(x) is tuple:
        elements = ", ".join(stable_repr(e) for e in x)
        return f"({elements},)" if len(x) == 1 else f"({elements})"
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        shown = ", ".join(f"{f.name}={stable_repr(getattr(x, f.name))}" for f in dataclasses.fields(x) if f.repr)
        return f"{type(x).__qualname__}({shown})"
    return repr(x)


Network = tuple[Envelope, ...]


@memoised(SMALL_TABLE_SIZE)
def send(network: Network, *envelopes: Envelope) -> Network:
    """The bag with ``envelopes`` added (``network`` is sorted, as every state's is)."""
    if not envelopes:
        return network
    bag = list(network)
    for envelope in envelopes:
        insort(bag, intern(envelope), key=_sort_key)
    return intern(tuple(bag))


def bag(envelopes: tuple[Envelope, ...]) -> Network:
    """The bag of ``envelopes`` as every state keeps it: sorted as :func:`send` inserts (equal keys are equal
    envelopes, so the order among them does not matter), interned."""
    return intern(tuple(sorted((intern(e) for e in envelopes), key=_sort_key)))


def remove_one(network: Network, envelope: Envelope) -> Network:
    """The bag with one copy of ``envelope`` taken out."""
    i = network.index(envelope)
    return intern(network[:i] + network[i + 1:])


@memoised(SMALL_TABLE_SIZE)
def deliveries(network: Network) -> tuple[tuple[Envelope, Network], ...]:
    """Each distinct envelope of the bag, in the bag's order, with the bag without one copy of it."""
    seen: set[Envelope] = set()
    out = []
    for envelope in network:
        if envelope not in seen:
            seen.add(envelope)
            out.append((envelope, remove_one(network, envelope)))
    return tuple(out)


@memoised(SMALL_TABLE_SIZE)
def contexts(network: Network, address: Address) -> frozenset[Any]:
    """The contexts of the messages in flight from or to ``address`` (correlation ids, batches)."""
    return frozenset(e.context for e in network if e.source == address or e.target == address)
