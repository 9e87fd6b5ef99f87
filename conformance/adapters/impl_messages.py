"""The typed mapping between the implementation's messages and the spec's: what the lock-step replay compares.

What it maps
    Every message on :class:`txnspec.impl.cluster.Network` that the spec models, request or response, becomes
    the spec's envelope of it (:class:`txnspec.spec.network.Envelope`: source, target and a body of
    :mod:`txnspec.spec.messages` with every field), through one function per RPC (:data:`REQUESTS`,
    :data:`RESPONSES`): ``InitProducerId``, ``AddPartitionsToTxn``, ``AddOffsetsToTxn``, ``TxnOffsetCommit``,
    ``EndTxn``, ``Produce``, the coordinator's ``TxnMarker`` (the spec's ``WriteTxnMarkers``), their answers,
    and a marker's answer (the spec's ``WriteTxnMarkersResponse``). Addresses are the spec's: ``producer-k``
    for the k-th producer of the scenario (whichever incarnation), ``coordinator``, ``group``, a partition's
    spec name (``p0`` for the broker's ``p0-0``). Two envelopes are equal when source, target and body are;
    :func:`txnspec.conformance.envelope_diff.differences` names the fields that are not.

What it assumes (the named differences of the mapping, :data:`MESSAGE_DIFFERENCES`)
    The spec's correlation (``context``) and ghost ``tag`` are the spec's own bookkeeping and are not
    compared (the adapter uses the tag's incarnation to pick the instance). The fields the implementation's
    message does not carry are derived from what it does, each with its reason in the table.

Leaves out
    ``FindCoordinator`` (the spec answers it inside the step) and ``Fetch`` / ``OffsetFetch`` (observations,
    not protocol steps).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from txnspec.impl import messages as implm
from txnspec.impl.txn_markers import TxnMarker
from txnspec.spec import messages as spec
from txnspec.spec.errors import Errors as SpecErrors
from txnspec.spec.network import COORDINATOR, GROUP, Envelope

# field of a spec message -> why the implementation's value is derived rather than carried
MESSAGE_DIFFERENCES: dict[str, str] = {
    "AddPartitionsToTxn.transaction_version": "the client's AddPartitionsToTxn (v3 and below) has no transaction "
                                             "version: the spec's client request says 0, the mapping gives 0",
    "ProduceResponse.last_offset": "Kafka's ProduceResponse carries the base offset only; the spec's last offset "
                                   "is base offset + record count - 1 of the answered batch (-1 on an error)",
    "TxnOffsetCommit.member_id": "the implementation's membership generates member ids; the mapping names the "
                                 "member of the spec's producer-k as the spec does (member-k)",
    "TxnOffsetCommit.generation_id": "the adapter forms the group through JoinGroup one member at a time, each "
                                     "newcomer a rebalance; the spec starts it at its initial generation: the "
                                     "mapping subtracts the difference at formation (Names.generation_offset)",
    "context": "a transactional request's correlation is the spec's own counter: not compared (a produce's batch "
               "and a marker's identity are, from the implementation's request)",
    "tag": "the spec's ghost (producer, incarnation, transaction): picks the instance, not compared",
}


@dataclass(frozen=True)
class Names:
    """How the adapter names what the implementation names otherwise."""

    producer: Callable[[str], str | None]  # the implementation's client name -> the spec's producer address
    partitions: Mapping[str, str]  # the broker's partition name -> the spec's (``p0-0`` -> ``p0``)
    members: Mapping[str, str]  # the membership's member id -> the spec's (``member-0``)
    offsets_partition: str  # the spec's name of the group's __consumer_offsets partition
    generation_offset: int = 0  # the membership's generation when the group formed, less the spec's initial one

    def partition(self, name: str) -> str:
        return self.partitions.get(name, name)


def _error(error: Any) -> SpecErrors:
    return SpecErrors(error.name)


def _result(control: Any) -> spec.TransactionResult:
    return spec.TransactionResult(control.name)


def _target(request: Any) -> str:
    return GROUP if isinstance(request, implm.TxnOffsetCommit) else COORDINATOR


def _init(r: implm.InitProducerId, names: Names) -> spec.InitProducerId:
    return spec.InitProducerId(r.transactional_id, r.transaction_timeout_ms, r.producer_id, r.producer_epoch,
                               r.enable_two_pc, r.keep_prepared_txn)


def _add_partitions(r: implm.AddPartitionsToTxn, names: Names) -> spec.AddPartitionsToTxn:
    return spec.AddPartitionsToTxn(r.transactional_id, r.producer_id, r.producer_epoch,
                                   frozenset(names.partition(p) for p in r.partitions), 0)


def _add_offsets(r: implm.AddOffsetsToTxn, names: Names) -> spec.AddOffsetsToTxn:
    return spec.AddOffsetsToTxn(r.transactional_id, r.producer_id, r.producer_epoch, r.group_id)


def _offset_commit(r: implm.TxnOffsetCommit, names: Names) -> spec.TxnOffsetCommit:
    member = r.member
    return spec.TxnOffsetCommit(
        r.transactional_id, r.group_id, r.producer_id, r.producer_epoch, tuple(r.offsets),
        "" if member is None else names.members.get(member.member_id, member.member_id),
        -1 if member is None else member.generation_id - names.generation_offset,
        None if member is None else member.group_instance_id)


def _end_txn(r: implm.EndTxn, names: Names) -> spec.EndTxn:
    return spec.EndTxn(r.transactional_id, r.producer_id, r.producer_epoch, _result(r.result), r.transaction_version)


def _produce(r: implm.Produce, names: Names) -> spec.Produce:
    return spec.Produce(names.partition(r.partition), r.producer_id, r.producer_epoch, r.base_sequence,
                        len(r.records), r.is_transactional, r.transactional_id)


def _marker(r: TxnMarker, names: Names) -> spec.WriteTxnMarkers:
    return spec.WriteTxnMarkers(names.partition(r.partition), r.producer_id, r.producer_epoch, r.coordinator_epoch,
                                _result(r.result), r.transaction_version)


# the implementation's request type -> its spec message
REQUESTS: dict[type, Callable[[Any, Names], Any]] = {
    implm.InitProducerId: _init, implm.AddPartitionsToTxn: _add_partitions, implm.AddOffsetsToTxn: _add_offsets,
    implm.TxnOffsetCommit: _offset_commit, implm.EndTxn: _end_txn, implm.Produce: _produce, TxnMarker: _marker,
}


def _produce_response(r: implm.Produce, response: implm.Response) -> spec.ProduceResponse:
    if response.error.name != "NONE":
        return spec.ProduceResponse(_error(response.error))
    last = response.base_offset + len(r.records) - 1
    return spec.ProduceResponse(_error(response.error), response.base_offset, last,
                                bool(response.extra.get("duplicate", False)))


# the implementation's request type -> the spec's answer to it
RESPONSES: dict[type, Callable[[Any, implm.Response], Any]] = {
    implm.InitProducerId: lambda r, a: spec.InitProducerIdResponse(_error(a.error), a.producer_id, a.producer_epoch,
                                                                   a.ongoing_txn_producer_id,
                                                                   a.ongoing_txn_producer_epoch),
    implm.EndTxn: lambda r, a: spec.EndTxnResponse(_error(a.error), a.producer_id, a.producer_epoch),
    implm.Produce: _produce_response,
    implm.AddPartitionsToTxn: lambda r, a: spec.ErrorResponse(_error(a.error)),
    implm.AddOffsetsToTxn: lambda r, a: spec.ErrorResponse(_error(a.error)),
    implm.TxnOffsetCommit: lambda r, a: spec.ErrorResponse(_error(a.error)),
}


def envelope(message: Any, names: Names) -> Envelope | None:
    """The spec's envelope of an implementation's message in flight (an ``impl.network.Message``); None for a
    message the spec does not model (``FindCoordinator``) or of a client that is none of the spec's producers."""
    request = message.request
    to_spec = REQUESTS.get(type(request))
    if to_spec is None:
        return None
    if isinstance(request, TxnMarker):
        target = names.partition(request.partition)
        return Envelope(COORDINATOR, GROUP if target == names.offsets_partition else target, to_spec(request, names),
                        (request.transactional_id, request.coordinator_epoch, target))
    producer = names.producer(message.client)
    if producer is None:
        return None
    context = None
    if isinstance(request, implm.Produce):  # the batch a produce and its answer belong to
        server = names.partition(request.partition)
        context = (server, request.producer_id, request.producer_epoch, request.base_sequence)
    else:
        server = _target(request)
    if message.response is None:
        return Envelope(producer, server, to_spec(request, names), context)
    return Envelope(server, producer, RESPONSES[type(request)](request, message.response), context)


def marker_answer(marker: TxnMarker, error: Any, names: Names) -> Envelope:
    """The spec's ``WriteTxnMarkersResponse`` of a marker the leader answered with ``error``."""
    source = names.partition(marker.partition)
    return Envelope(GROUP if source == names.offsets_partition else source, COORDINATOR,
                    spec.WriteTxnMarkersResponse(_error(error)),
                    (marker.transactional_id, marker.coordinator_epoch, source))
