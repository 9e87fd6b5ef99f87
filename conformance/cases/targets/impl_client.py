"""Client cases on the implementation: a sans-I/O :class:`Producer` driven call by call and response by response.

How ``given`` becomes a producer (CONVENTIONS.md): an initialized client (any state but UNINITIALIZED /
INITIALIZING) has its pid/epoch and knows its transaction coordinator; a given INITIALIZING client has
called ``initTransactions`` and its coordinator lookup is in flight; a given ABORTABLE_ERROR / FATAL_ERROR
client has a generic ``KafkaException`` as last error. After each step the adapter polls the producer
(dispatching every request it can send) and acknowledges every completed call result, as Kafka's tests
do with ``runUntil(result::isCompleted)`` / ``await``. A response step answers the request in flight of
that name; one answering another request while a coordinator lookup is in flight completes the lookup
first. ``sends`` is the first request dispatched during the step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from txnspec.conformance.cases.format import CaseInputError
from txnspec.conformance.cases.steps import client as steps
from txnspec.impl.client import Producer
from txnspec.impl.client_results import TransactionalRequestResult
from txnspec.impl.client_states import State
from txnspec.impl.errors import Errors, InvalidRequestError, KafkaException
from txnspec.impl.messages import CoordinatorType, FindCoordinator, Produce, Response, request_name


class ClientSession:
    def __init__(self, given: Mapping[str, Any]) -> None:
        g = steps.ClientGiven.parse(given)
        state = State(g.state)
        try:
            # TransactionManagerTest's Sender guarantees message order: one Produce in flight per partition.
            self.producer = Producer(g.transactional_id, transaction_version=g.transaction_version, max_in_flight=1,
                                     enable_two_pc=g.enable_two_pc)
        except InvalidRequestError as exc:
            raise CaseInputError(str(exc)) from None
        tm = self.producer.tm
        self.results: list[TransactionalRequestResult] = []
        if state is State.INITIALIZING:
            self.results.append(self.producer.init_transactions())
            self.producer.poll()
        elif state is not State.UNINITIALIZED:
            tm.state = state
            tm.producer_id = g.producer_id
            tm.producer_epoch = g.producer_epoch
            tm.coordinators.add((CoordinatorType.TRANSACTION, tm.transactional_id or ""))
            if state in (State.ABORTABLE_ERROR, State.FATAL_ERROR):
                tm.last_error = KafkaException("injected by the test")

    def apply(self, when: Mapping[str, Any]) -> dict[str, Any]:
        step = steps.parse_client_step(when)
        throws = None
        if isinstance(step, steps.CallStep):
            try:
                self._call(step)
            except InvalidRequestError as exc:
                raise CaseInputError(str(exc)) from None
            except KafkaException as exc:
                throws = type(exc).__name__
        else:
            self._respond(step)
        sent = self.producer.poll()
        tm = self.producer.tm
        if tm.pending_transition is not None and tm.pending_transition[0].completed:
            tm.pending_transition[0].acked = True
        return steps.ClientObservation(tm.state.value, throws, request_name(sent[0]) if sent else None,
                                       tm.producer_id, tm.producer_epoch, tm.prepared_txn_state).as_json()

    def _call(self, step: steps.CallStep) -> None:
        p = self.producer
        call = step.call
        if call == "initTransactions":
            p.init_transactions(step.keep_prepared_txn)
        elif call == "prepareTransaction":
            p.prepare_transaction()
        elif call == "completeTransaction":
            p.complete_transaction(step.prepared)
        elif call == "beginTransaction":
            p.begin_transaction()
        elif call == "commitTransaction":
            p.commit_transaction()
        elif call == "abortTransaction":
            p.abort_transaction()
        elif call == "send":
            assert step.partition is not None
            future = p.send(step.partition)
            if future.completed and future.error is not None and not isinstance(future.error, KafkaException):
                raise future.error
        else:
            assert step.group_id is not None
            p.send_offsets_to_transaction(dict(step.offsets), step.group_id)

    def _respond(self, step: steps.ResponseStep) -> None:
        p = self.producer
        name = step.response
        response = Response(Errors.named(step.error), step.producer_id, step.producer_epoch, base_offset=0,
                            ongoing_txn_producer_id=step.ongoing_txn[0], ongoing_txn_producer_epoch=step.ongoing_txn[1])
        if name == "Produce":
            produces = [r for r in p.in_flight_requests() if isinstance(r, Produce)]
            if not produces:
                raise CaseInputError("a Produce response, but no Produce is in flight")
            p.on_response(produces[0], response)
            return
        in_flight = p.in_flight_txn[0] if p.in_flight_txn is not None else None
        if isinstance(in_flight, FindCoordinator) and name != "FindCoordinator":
            p.on_response(in_flight, Response(Errors.NONE))
            p.poll()
            in_flight = p.in_flight_txn[0] if p.in_flight_txn is not None else None
        if in_flight is None or request_name(in_flight) != name:
            raise CaseInputError(f"a {name} response, but the request in flight is "
                                 f"{request_name(in_flight) if in_flight is not None else None}")
        if isinstance(in_flight, FindCoordinator):
            key_type = step.key_type or in_flight.key_type.value
            if key_type != in_flight.key_type.value:
                raise CaseInputError(f"a FindCoordinator({key_type}) response, but the lookup in flight is for "
                                     f"{in_flight.key_type.value}")
        p.on_response(in_flight, response)


def session(given: Mapping[str, Any]) -> ClientSession:
    return ClientSession(given)
