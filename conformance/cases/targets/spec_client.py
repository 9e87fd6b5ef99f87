"""Client cases on the spec: ``given`` becomes a :class:`ClientState`, each step an API call or a response.

Case conventions (FORMAT.md, CONVENTIONS.md):

* An initialized client (any state but UNINITIALIZED / INITIALIZING) knows its transaction coordinator
  (TransactionManagerTest's ``doInitTransactions``); no client knows its group coordinator.
* A given INITIALIZING client has called ``initTransactions`` and its coordinator lookup is in flight; a
  response step that answers another request while the lookup is in flight first completes the lookup.
* A given ABORTABLE_ERROR / FATAL_ERROR client has a generic ``KafkaException`` as its last error.
* ``sends`` is the name of the first request dispatched during the step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from txnspec.conformance.cases.format import CaseInputError
from txnspec.conformance.cases.steps import client as steps
from txnspec.spec import client as cl
from txnspec.spec import client_errors as cl_errors
from txnspec.spec import client_responses as cl_responses
from txnspec.spec import client_state as cl_state
from txnspec.spec.errors import Errors
from txnspec.spec.messages import (
    CoordinatorType,
    EndTxnResponse,
    ErrorResponse,
    FindCoordinator,
    InitProducerId,
    InitProducerIdResponse,
    ProduceResponse,
)


def client_from_case(given: Mapping[str, Any] | steps.ClientGiven,
                     config: cl_state.ClientConfig = cl_state.DEFAULT_CONFIG) -> cl_state.ClientState:
    g = given if isinstance(given, steps.ClientGiven) else steps.ClientGiven.parse(given)
    config = replace(config, enable_two_pc=g.enable_two_pc)
    state = cl_state.State(g.state)
    tid = g.transactional_id
    client = cl_state.ClientState(
        tid, state, g.producer_id, g.producer_epoch, g.transaction_version,
        last_error=cl_errors.KAFKA_EXCEPTION if state in (cl_state.ABORTABLE_ERROR, cl_state.FATAL_ERROR) else None,
        txn_coordinator_known=state not in (cl_state.UNINITIALIZED, cl_state.INITIALIZING))
    if state is cl_state.INITIALIZING:
        init = cl_state.TxnRequestHandler(InitProducerId(tid, config.txn_timeout_ms, -1, -1, config.enable_two_pc),
                                          cl_state.Priority.INIT_PRODUCER_ID,
                                          is_retry=True, completes_call=True)
        lookup = cl_state.TxnRequestHandler(FindCoordinator(CoordinatorType.TRANSACTION, tid),
                                            cl_state.Priority.FIND_COORDINATOR)
        client = replace(client, in_flight=lookup, pending_requests=(init,),
                         pending_transition=(cl_state.INITIALIZING, "initTransactions"))
    return client


def _response(step: steps.ResponseStep) -> cl_state.Response:
    error = Errors.named(step.error)
    if step.response == "InitProducerId":
        return InitProducerIdResponse(error, step.producer_id, step.producer_epoch, *step.ongoing_txn)
    if step.response == "EndTxn":
        return EndTxnResponse(error, step.producer_id, step.producer_epoch)
    if step.response == "Produce":
        return ProduceResponse(error)
    return ErrorResponse(error)


class ClientSession:
    def __init__(self, given: Mapping[str, Any], config: cl_state.ClientConfig = cl_state.DEFAULT_CONFIG) -> None:
        self.config = replace(config, enable_two_pc=steps.ClientGiven.parse(given).enable_two_pc)
        self.client = client_from_case(given, config)

    def apply(self, when: Mapping[str, Any]) -> dict[str, Any]:
        step = steps.parse_client_step(when)
        c, outcome = self._call(step) if isinstance(step, steps.CallStep) else self._respond(step)
        self.client = c
        return steps.ClientObservation(c.state.value, outcome.throws,
                                       outcome.send_names[0] if outcome.sends else None, c.producer_id,
                                       c.producer_epoch, c.prepared_txn_state).as_json()

    def _call(self, step: steps.CallStep) -> tuple[cl_state.ClientState, cl_state.ClientOutcome]:
        c, config = self.client, self.config
        call = step.call
        if call == "initTransactions":
            return cl.init_transactions(c, config, step.keep_prepared_txn)
        if call == "prepareTransaction":
            return cl.prepare_transaction(c, config)
        if call == "completeTransaction":
            return cl.complete_transaction(c, step.prepared, config)
        if call == "beginTransaction":
            return cl.begin_transaction(c, config)
        if call == "commitTransaction":
            return cl.commit_transaction(c, config)
        if call == "abortTransaction":
            return cl.abort_transaction(c, config)
        if call == "send":
            assert step.partition is not None
            return cl.send(c, step.partition, config)
        assert step.group_id is not None
        return cl.send_offsets_to_transaction(c, step.group_id, dict(step.offsets), config)

    def _respond(self, step: steps.ResponseStep) -> tuple[cl_state.ClientState, cl_state.ClientOutcome]:
        c, config = self.client, self.config
        name = step.response
        response = _response(step)
        if name == "Produce":
            if not c.in_flight_batches:
                raise CaseInputError("a Produce response, but no produce is in flight")
            return cl_responses.on_response(c, name, response, None, config)
        if c.in_flight is not None and isinstance(c.in_flight.request, FindCoordinator) and name != "FindCoordinator":
            c, _ = cl_responses.on_response(c, "FindCoordinator", ErrorResponse(Errors.NONE), None, config)
        if c.in_flight is None or c.in_flight.name != name:
            in_flight = c.in_flight.name if c.in_flight else None
            raise CaseInputError(f"a {name} response, but the request in flight is {in_flight}")
        lookup = c.in_flight.request
        if isinstance(lookup, FindCoordinator):
            key_type = step.key_type or "TRANSACTION"
            if lookup.key_type.value != key_type:
                raise CaseInputError(f"a FindCoordinator({key_type}) response, but the lookup in flight is for "
                                     f"{lookup.key_type.value}")
        return cl_responses.on_response(c, name, response, None, config)


def session(given: Mapping[str, Any]) -> ClientSession:
    return ClientSession(given)


__all__ = ["ClientSession", "client_from_case", "session"]
