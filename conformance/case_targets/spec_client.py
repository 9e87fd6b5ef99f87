"""Client cases on the spec: ``given`` becomes a :class:`ClientState`, each step an API call or a response.

A given INITIALIZING client has its coordinator lookup in flight; if the first step answers
InitProducerId, the lookup succeeded and InitProducerId is in flight (FORMAT.md). A given error state
stands for a generic ``KafkaException`` as the last error (CONVENTIONS.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from txnspec.conformance.case_targets.case_values import get_choice, get_int, get_str
from txnspec.conformance.cases import CaseInputError
from txnspec.spec import client as cl
from txnspec.spec.errors import Errors

CALLS = ("initTransactions", "beginTransaction", "commitTransaction", "abortTransaction", "send",
         "sendOffsetsToTransaction")
RESPONSES = ("FindCoordinator", "InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "TxnOffsetCommit",
             "EndTxn", "Produce")


class ClientSession:
    def __init__(self, given: Mapping[str, Any]) -> None:
        try:
            state = cl.State(get_str(given, "state"))
        except ValueError:
            raise CaseInputError(f"unknown client state {given.get('state')!r}") from None
        tv = get_int(given, "transaction_version", 0)
        if tv not in (0, 1, 2):
            raise CaseInputError(f"transaction_version must be 0, 1 or 2, got {tv}")
        error = "KafkaException" if state in (cl.S.ABORTABLE_ERROR, cl.S.FATAL_ERROR) else None
        self.client = cl.ClientState(
            get_str(given, "transactional_id"), state, get_int(given, "producer_id", -1),
            get_int(given, "producer_epoch", -1), tv, last_error=error,
            txn_coordinator_known=state is not cl.S.UNINITIALIZED,
            in_flight="FindCoordinator:TRANSACTION" if state is cl.S.INITIALIZING else None,
            init_pending=state is cl.S.INITIALIZING)
        self.first = True

    def apply(self, when: Mapping[str, Any]) -> dict[str, Any]:
        c = self.client
        if self.first and c.state is cl.S.INITIALIZING and when.get("response") == "InitProducerId":
            c = replace(c, in_flight="InitProducerId", init_pending=False)  # the lookup already succeeded
        self.first = False
        if "call" in when:
            call = get_choice(when, "call", CALLS)
            if call == "initTransactions":
                c, outcome = cl.init_transactions(c)
            elif call == "beginTransaction":
                c, outcome = cl.begin_transaction(c)
            elif call == "commitTransaction":
                c, outcome = cl.commit_transaction(c)
            elif call == "abortTransaction":
                c, outcome = cl.abort_transaction(c)
            elif call == "send":
                c, outcome = cl.send(c, get_str(when, "partition"))
            else:
                if not isinstance(when.get("offsets", {}), Mapping):
                    raise CaseInputError("'offsets' must be an object of partition -> offset")
                c, outcome = cl.send_offsets_to_transaction(c, get_str(when, "group_id"))
        elif "response" in when:
            name = get_choice(when, "response", RESPONSES)
            try:
                error = Errors.named(get_str(when, "error"))
            except ValueError as exc:
                raise CaseInputError(str(exc)) from None
            key_type = get_choice(when, "key_type", ("TRANSACTION", "GROUP"), "TRANSACTION")
            c, outcome = cl.on_response(c, name, error, get_int(when, "producer_id", -1),
                                        get_int(when, "producer_epoch", -1), key_type)
        else:
            raise CaseInputError(f"a client step needs 'call' or 'response': {dict(when)!r}")
        self.client = c
        first_sent = outcome.sends[0].split(":")[0] if outcome.sends else None
        return {"state": c.state.value, "throws": outcome.throws, "fatal": c.state is cl.S.FATAL_ERROR,
                "sends": first_sent, "producer_id": c.producer_id, "producer_epoch": c.producer_epoch}


def session(given: Mapping[str, Any]) -> ClientSession:
    return ClientSession(given)
