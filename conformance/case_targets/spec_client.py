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

from txnspec.conformance.case_format import CaseInputError
from txnspec.conformance.case_targets.case_values import get_choice, get_int, get_str
from txnspec.spec import client as cl
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

CALLS = ("initTransactions", "beginTransaction", "commitTransaction", "abortTransaction", "send",
         "sendOffsetsToTransaction")
RESPONSES = ("FindCoordinator", "InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "TxnOffsetCommit",
             "EndTxn", "Produce")


def client_from_case(given: Mapping[str, Any], config: cl.ClientConfig = cl.DEFAULT_CONFIG) -> cl.ClientState:
    try:
        state = cl.State(get_str(given, "state"))
    except ValueError:
        raise CaseInputError(f"unknown client state {given.get('state')!r}") from None
    tv = get_int(given, "transaction_version", 0)
    if tv not in (0, 1, 2):
        raise CaseInputError(f"transaction_version must be 0, 1 or 2, got {tv}")
    tid = get_str(given, "transactional_id")
    client = cl.ClientState(
        tid, state, get_int(given, "producer_id", -1), get_int(given, "producer_epoch", -1), tv,
        last_error=cl.KAFKA_EXCEPTION if state in (cl.ABORTABLE_ERROR, cl.FATAL_ERROR) else None,
        txn_coordinator_known=state not in (cl.UNINITIALIZED, cl.INITIALIZING))
    if state is cl.INITIALIZING:
        init = cl.TxnRequestHandler(InitProducerId(tid, config.txn_timeout_ms), cl.Priority.INIT_PRODUCER_ID,
                                    is_retry=True, completes_call=True)
        lookup = cl.TxnRequestHandler(FindCoordinator(CoordinatorType.TRANSACTION, tid), cl.Priority.FIND_COORDINATOR)
        client = replace(client, in_flight=lookup, pending_requests=(init,),
                         pending_transition=(cl.INITIALIZING, "initTransactions"))
    return client


def _response(name: str, when: Mapping[str, Any]) -> cl.Response:
    try:
        error = Errors.named(get_str(when, "error"))
    except ValueError as exc:
        raise CaseInputError(str(exc)) from None
    if name == "InitProducerId":
        return InitProducerIdResponse(error, get_int(when, "producer_id", -1), get_int(when, "producer_epoch", -1))
    if name == "EndTxn":
        return EndTxnResponse(error, get_int(when, "producer_id", -1), get_int(when, "producer_epoch", -1))
    if name == "Produce":
        return ProduceResponse(error)
    return ErrorResponse(error)


class ClientSession:
    def __init__(self, given: Mapping[str, Any], config: cl.ClientConfig = cl.DEFAULT_CONFIG) -> None:
        self.config = config
        self.client = client_from_case(given, config)

    def apply(self, when: Mapping[str, Any]) -> dict[str, Any]:
        if "call" in when:
            c, outcome = self._call(when)
        elif "response" in when:
            c, outcome = self._respond(when)
        else:
            raise CaseInputError(f"a client step needs 'call' or 'response': {dict(when)!r}")
        self.client = c
        return {"state": c.state.value, "throws": outcome.throws, "fatal": c.state is cl.FATAL_ERROR,
                "sends": outcome.send_names[0] if outcome.sends else None,
                "producer_id": c.producer_id, "producer_epoch": c.producer_epoch}

    def _call(self, when: Mapping[str, Any]) -> tuple[cl.ClientState, cl.ClientOutcome]:
        c, config = self.client, self.config
        call = get_choice(when, "call", CALLS)
        result: tuple[cl.ClientState, cl.ClientOutcome]
        if call == "initTransactions":
            result = cl.init_transactions(c, config)
        elif call == "beginTransaction":
            result = cl.begin_transaction(c, config)
        elif call == "commitTransaction":
            result = cl.commit_transaction(c, config)
        elif call == "abortTransaction":
            result = cl.abort_transaction(c, config)
        elif call == "send":
            result = cl.send(c, get_str(when, "partition"), config)
        else:
            offsets = when.get("offsets", {})
            if not isinstance(offsets, Mapping) or not all(
                    isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in offsets.items()):
                raise CaseInputError("'offsets' must be an object of partition -> offset")
            result = cl.send_offsets_to_transaction(c, get_str(when, "group_id"), dict(offsets), config)
        return result

    def _respond(self, when: Mapping[str, Any]) -> tuple[cl.ClientState, cl.ClientOutcome]:
        c, config = self.client, self.config
        name = get_choice(when, "response", RESPONSES)
        response = _response(name, when)
        result: tuple[cl.ClientState, cl.ClientOutcome]
        if name == "Produce":
            if not c.in_flight_batches:
                raise CaseInputError("a Produce response, but no produce is in flight")
            result = cl.on_response(c, name, response, None, config)
            return result
        if c.in_flight is not None and c.in_flight.name == "FindCoordinator" and name != "FindCoordinator":
            c, _ = cl.on_response(c, "FindCoordinator", ErrorResponse(Errors.NONE), None, config)
        if c.in_flight is None or c.in_flight.name != name:
            in_flight = c.in_flight.name if c.in_flight else None
            raise CaseInputError(f"a {name} response, but the request in flight is {in_flight}")
        if name == "FindCoordinator":
            key_type = get_choice(when, "key_type", ("TRANSACTION", "GROUP"), "TRANSACTION")
            if c.in_flight.request.key_type.value != key_type:
                raise CaseInputError(f"a FindCoordinator({key_type}) response, but the lookup in flight is for "
                                     f"{c.in_flight.request.key_type.value}")
        result = cl.on_response(c, name, response, None, config)
        return result


def session(given: Mapping[str, Any]) -> ClientSession:
    return ClientSession(given)


__all__ = ["ClientSession", "client_from_case", "session"]
