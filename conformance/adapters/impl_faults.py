"""The spec's faults on the implementation's cluster, for the lock-step adapter (:mod:`.impl_adapter`).

System
    ``lose`` takes a message off the implementation's network and nobody is told (a marker, or a marker's
    answer, is remembered as lost); ``retry`` is the client's request timeout firing for the lost request it
    waits for (``Cluster.time_out``); ``resend marker`` the coordinator's for a lost marker (answered
    ``REQUEST_TIMED_OUT``, so it sends it again); ``append fails`` delivers a request while the transaction-log
    partition refuses its next append with ``NOT_ENOUGH_REPLICAS`` (as a leader below ``min.insync.replicas``);
    ``crash`` replaces a client instance by a new one with the same transactional id, what the dead one sent
    staying in flight; the admin's abort marker is appended by the partition as serve's ``WriteTxnMarkers``
    handler appends an admin's.

Assumptions
    A step names what it does (:class:`txnspec.spec.actions.Action`): a fault the implementation cannot take is
    :class:`~txnspec.conformance.adapters.spec_adapter.StepNotEnabledError`, never a guess.

:class:`FaultSteps` is mixed into :class:`~txnspec.conformance.adapters.impl_adapter.ImplAdapter`, whose state
(cluster, producers, what was lost) and message matching it uses.
"""

from __future__ import annotations

from typing import Any

from txnspec.impl.txn_markers import TxnMarker
from txnspec.spec import messages as spec


class FaultSteps:
    """The fault steps of the lock-step adapter (see the module docstring)."""

    cluster: Any
    producers: dict[Any, tuple[str, Any]]
    handles: dict[Any, Any]
    transactional_ids: dict[Any, str]
    lost: list[Any]
    lost_markers: list[Any]
    marker_answers: list[tuple[Any, Any]]
    broker_partition: dict[str, Any]
    _match: Any  # the adapter's message matching, field by field
    _take_marker_answer: Any
    _same_partition: Any
    _not_enabled: Any
    _start_producer: Any

    def _lose(self, step: Any) -> None:
        if isinstance(step.action.body, spec.WriteTxnMarkersResponse):
            marker, _ = self._take_marker_answer(step)
            self.lost_markers.append(marker)
            return
        m = self._match(step)
        self.cluster.network.lose(m)
        if isinstance(m.request, TxnMarker):
            self.lost_markers.append(m.request)
        else:
            self.lost.append(m)

    def _retry(self, step: Any) -> None:
        """The client's request timeout fires for a lost transactional request (or one whose answer was lost); a
        produce's retry is handled with the retry backoff in :meth:`apply`."""
        action = step.action
        name, producer = self.producers[action.actor]
        awaited = producer.in_flight_txn[0] if producer.in_flight_txn is not None else None
        lost = [m for m in self.lost if m.client == name and m.request is awaited]
        if not lost:
            raise self._not_enabled(step, "the implementation's client lost nothing it waits for")
        self.lost.remove(lost[-1])
        self.cluster.time_out(lost[-1])

    def _resend_marker(self, step: Any) -> None:
        from txnspec.impl.errors import Errors

        partition = step.action.body.partition
        lost = [mk for mk in self.lost_markers if self._same_partition(mk.partition, partition)]
        if not lost:
            raise self._not_enabled(step, "no marker to that partition was lost")
        self.lost_markers.remove(lost[-1])
        self.cluster.broker.txn_coordinator.marker_channel.on_marker_response(lost[-1], Errors.REQUEST_TIMED_OUT,
                                                                              self.cluster.now_ms)
        self.cluster._dispatch()

    def _append_fails(self, step: Any) -> None:
        """Deliver the request with the coordinator's transaction-log partition refusing its next append."""
        from txnspec.impl.errors import Errors

        m = self._match(step)
        log = self.cluster.broker.txn_coordinator.txn_manager.partition_for(m.request.transactional_id)
        log.refuse_next_append(Errors.NOT_ENOUGH_REPLICAS)
        try:
            self.cluster.deliver(m)
        finally:
            log.refused_appends.clear()  # a request that wrote nothing had nothing refused (as in the spec)

    def _admin_abort(self, marker: spec.WriteTxnMarkers) -> None:
        """The marker the spec's admin sent (producer id and epoch, coordinator epoch, transaction version 0),
        appended by the partition as serve's WriteTxnMarkers handler appends an admin's; the coordinator is not
        told. A refusal the spec did not make shows as the partition's state differing after the step."""
        from txnspec.impl.log import ControlType

        partition = self.cluster.broker.partition(self.broker_partition[marker.partition])
        partition.write_txn_marker(marker.producer_id, marker.producer_epoch, marker.coordinator_epoch,
                                   ControlType.ABORT, marker.transaction_version, now_ms=self.cluster.now_ms)

    def _crash(self, who: Any) -> None:
        name, _ = self.producers[who]
        in_flight = list(self.cluster.network.messages)
        self.cluster.crash_producer(self.handles[who])
        # what the dead instance sent stays on its way (the spec keeps it); answers to it are dropped on delivery
        self.cluster.network.messages = in_flight
        self.lost = [m for m in self.lost if m.client != name]
        self._start_producer(who, self.transactional_ids[who])


__all__ = ["FaultSteps"]
