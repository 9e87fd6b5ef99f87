"""The network of the system model: addresses, messages in flight, and the bag they fly in.

System
    Every actor has an address: ``producer-k`` for the k-th producer instance, ``coordinator`` for the
    transaction coordinator, ``group`` for the group coordinator, and a partition's name for its leader.
    A message in flight is an :class:`Envelope`: source, destination, the request or response
    (:mod:`txnspec.spec.messages`), a correlation and the ghost tag of the transaction it belongs to.

Assumptions
    The network is a bag (any order of delivery covers delay and reordering). It is a tuple kept sorted by
    the envelopes' ``repr`` so that equal bags are equal tuples (states stay canonical and hashable).

Left out
    Connections, their ordering guarantees and request pipelining per connection: TCP's in-order delivery
    per connection is weaker than what Kafka's clients rely on only where the client itself enforces it
    (one transactional request in flight, see :mod:`txnspec.spec.producer`).
"""

from __future__ import annotations

import functools
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
from txnspec.spec.values import value

COORDINATOR, GROUP = "coordinator", "group"
NETWORK = "network"  # the actor of a loss
PRODUCER_PREFIX = "producer-"

Tag = tuple[int, int, int]  # (producer index, incarnation, transaction number): ghost, see spec/ghost.py


def producer_address(index: int) -> str:
    """The address of the ``index``-th producer instance."""
    return f"{PRODUCER_PREFIX}{index}"


def producer_index(address: str) -> int | None:
    """The producer instance behind ``address``, or None for a server."""
    if address.startswith(PRODUCER_PREFIX):
        return int(address[len(PRODUCER_PREFIX):])
    return None


@value
class Envelope:
    """A message in flight. ``context``: a correlation for a transactional request and its answer, the
    batch ``(partition, producer id, epoch, base sequence)`` for a produce and its answer,
    ``(transactional id, coordinator epoch, partition)`` for a marker and its answer."""

    source: str
    target: str
    body: Any
    context: Any = None
    tag: Tag | None = None

    def __str__(self) -> str:
        return f"{self.source}->{self.target}: {describe(self.body)}"


def describe(body: Any) -> str:
    """A message as reports show it (report text only: nothing parses it)."""
    name = type(body).__name__
    if isinstance(body, InitProducerId):
        return f"InitProducerId({body.transactional_id}, pid={body.producer_id}, epoch={body.producer_epoch})"
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
    return repr(envelope)


def send(network: tuple[Envelope, ...], *envelopes: Envelope) -> tuple[Envelope, ...]:
    """The bag with ``envelopes`` added."""
    if not envelopes:
        return network
    return tuple(sorted((*network, *envelopes), key=_sort_key))


def remove_one(network: tuple[Envelope, ...], envelope: Envelope) -> tuple[Envelope, ...]:
    """The bag with one copy of ``envelope`` taken out."""
    i = network.index(envelope)
    return network[:i] + network[i + 1:]
