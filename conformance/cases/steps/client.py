"""Behaviour cases of the producer client's (``TransactionManager``): application calls and the responses it is given.

The rules every component's cases share are in :mod:`txnspec.conformance.cases.steps`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from txnspec.conformance.cases.format import CaseInputError
from txnspec.conformance.cases.values import (
    Observation,
    error_name,
    get_bool,
    get_choice,
    get_int,
    get_str,
    named_choice,
)

CLIENT_STATES = ("UNINITIALIZED", "INITIALIZING", "READY", "IN_TRANSACTION", "PREPARED_TRANSACTION",
                 "COMMITTING_TRANSACTION", "ABORTING_TRANSACTION", "ABORTABLE_ERROR", "FATAL_ERROR")
CALLS = ("initTransactions", "beginTransaction", "commitTransaction", "abortTransaction", "send",
         "sendOffsetsToTransaction", "prepareTransaction", "completeTransaction")
RESPONSES = ("FindCoordinator", "InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "TxnOffsetCommit",
             "EndTxn", "Produce")


@dataclass(frozen=True)
class ClientGiven:
    transactional_id: str
    state: str  # TransactionManager.State
    producer_id: int
    producer_epoch: int
    transaction_version: int
    enable_two_pc: bool = False  # transaction.two.phase.commit.enable (KIP-939)

    @staticmethod
    def parse(given: Mapping[str, Any]) -> ClientGiven:
        state = given.get("state")
        if state not in CLIENT_STATES:
            raise CaseInputError(f"unknown client state {state!r}")
        tv = get_int(given, "transaction_version", 0)
        if tv not in (0, 1, 2):
            raise CaseInputError(f"transaction_version must be 0, 1 or 2, got {tv}")
        return ClientGiven(get_str(given, "transactional_id"), str(state), get_int(given, "producer_id", -1),
                           get_int(given, "producer_epoch", -1), tv, get_bool(given, "enable_two_pc", False))


@dataclass(frozen=True)
class CallStep:
    """The application calls ``call`` (``partition`` for ``send``; ``group_id`` and ``offsets`` for
    ``sendOffsetsToTransaction``; ``keep_prepared_txn`` for ``initTransactions``; the ``PreparedTxnState``
    ``prepared_producer_id``/``prepared_producer_epoch`` for ``completeTransaction``, KIP-939)."""

    call: str
    partition: str | None = None
    group_id: str | None = None
    offsets: tuple[tuple[str, int], ...] = ()
    keep_prepared_txn: bool = False
    prepared: tuple[int, int] = (-1, -1)


@dataclass(frozen=True)
class ResponseStep:
    """The answer to the client's request ``response`` in flight (``key_type``: of a FindCoordinator; None:
    whatever lookup is in flight)."""

    response: str
    error: str
    producer_id: int = -1
    producer_epoch: int = -1
    key_type: str | None = None
    ongoing_txn: tuple[int, int] = (-1, -1)  # InitProducerId v6's OngoingTxnProducerId/Epoch (KIP-939)


ClientStep = CallStep | ResponseStep


def parse_client_step(when: Mapping[str, Any]) -> ClientStep:
    if "call" in when:
        call = named_choice(when, "call", CALLS, "client call")
        if call == "send":
            return CallStep(call, partition=get_str(when, "partition"))
        if call == "sendOffsetsToTransaction":
            offsets = when.get("offsets", {})
            if not isinstance(offsets, Mapping) or not all(
                    isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in offsets.items()):
                raise CaseInputError("'offsets' must be an object of partition -> offset")
            return CallStep(call, group_id=get_str(when, "group_id"), offsets=tuple(offsets.items()))
        if call == "initTransactions":
            return CallStep(call, keep_prepared_txn=get_bool(when, "keep_prepared_txn", False))
        if call == "completeTransaction":
            return CallStep(call, prepared=(get_int(when, "prepared_producer_id"),
                                            get_int(when, "prepared_producer_epoch")))
        return CallStep(call)
    if "response" in when:
        name = named_choice(when, "response", RESPONSES, "response to")
        key_type = get_choice(when, "key_type", ("TRANSACTION", "GROUP")) if "key_type" in when else None
        return ResponseStep(name, error_name(when), get_int(when, "producer_id", -1),
                            get_int(when, "producer_epoch", -1), key_type,
                            (get_int(when, "ongoing_txn_producer_id", -1),
                             get_int(when, "ongoing_txn_producer_epoch", -1)))
    raise CaseInputError(f"a client step needs 'call' or 'response': {dict(when)!r}")


@dataclass(frozen=True)
class ClientObservation(Observation):
    state: str
    throws: str | None  # the exception's simple name, or None
    sends: str | None  # the first request dispatched during the step
    producer_id: int
    producer_epoch: int
    prepared: tuple[int, int] = (-1, -1)  # the PreparedTxnState the client holds (KIP-939)

    def as_json(self) -> dict[str, Any]:
        return {"state": self.state, "throws": self.throws, "fatal": self.state == "FATAL_ERROR",
                "sends": self.sends, "producer_id": self.producer_id, "producer_epoch": self.producer_epoch,
                "prepared_producer_id": self.prepared[0], "prepared_producer_epoch": self.prepared[1]}


