"""The producer client's error rules: the exceptions the application sees, one table per response handler.

Models
    What each answer means to the client, as data: :data:`RESPONSE_RULES` holds one table per response handler
    (``FindCoordinatorHandler``, ``InitProducerIdHandler``, ``AddPartitionsToTxnHandler``,
    ``AddOffsetsToTxnHandler``, ``TxnOffsetCommitHandler``, ``EndTxnHandler`` by its result), each row (errors,
    :class:`Reaction`, exception); :func:`classify_response` reads them, the handlers of
    :mod:`txnspec.spec.client_responses` act on what it says. A Produce answer goes through
    :func:`classify_produce_error` (``Sender.completeBatch`` with ``canRetry``) and :data:`PRODUCE_FATAL_ERRORS`
    (``maybeTransitionToErrorState``). Exceptions are Kafka's simple class names (:func:`exception_of`). The
    model checker's producer (:mod:`txnspec.spec.producer`) reads the same rules.

Kafka classes followed (trunk, 4.5.0-SNAPSHOT, ``clients/.../producer/internals/``)
    ``TransactionManager.java`` (each ``*Handler.handleResponse``, ``maybeTransitionToErrorState``,
    ``canRetry``), ``Sender.java`` (``completeBatch``), ``common/protocol/Errors.java`` (``exception()``).

Assumptions
    A produce error on a transactional producer is never a retention loss (the response's log start offset is
    assumed known and not past the last acknowledged offset), so UNKNOWN_PRODUCER_ID fails the batch;
    OUT_OF_ORDER_SEQUENCE_NUMBER answering the first batch in flight fails it, and is retried behind an earlier
    batch still in flight while the partition's sequences are resolved.

Not modelled
    Idempotent-only producers; exceptions' messages and causes (a name is what the application sees).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import TypeAlias

from txnspec.spec.errors import EXCEPTION_NAMES, RETRIABLE_ERRORS, Errors
from txnspec.spec.messages import TransactionResult

# Exception simple names (what the application sees).
PRODUCER_FENCED = "ProducerFencedException"


INVALID_PRODUCER_EPOCH = "InvalidProducerEpochException"


ILLEGAL_STATE = "IllegalStateException"


KAFKA_EXCEPTION = "KafkaException"


TRANSACTION_ABORTABLE = "TransactionAbortableException"


COMMIT_FAILED = "CommitFailedException"


TOPIC_AUTHORIZATION = "TopicAuthorizationException"


GROUP_AUTHORIZATION = "GroupAuthorizationException"


TRANSACTIONAL_ID_AUTHORIZATION = "TransactionalIdAuthorizationException"


CLUSTER_AUTHORIZATION = "ClusterAuthorizationException"


AUTHENTICATION = "AuthenticationException"


INVALID_TXN_STATE = "InvalidTxnStateException"


# ApiException subclasses among the exceptions a transactional call can throw: KafkaProducer.send returns
# them in the future instead of throwing (and hands them to maybeTransitionToErrorState).
API_EXCEPTIONS = frozenset(EXCEPTION_NAMES.values()) | {COMMIT_FAILED}


def exception_of(error: Errors) -> str:
    """``Errors.exception()`` by simple class name."""
    return str(EXCEPTION_NAMES.get(error, "ApiException"))


# --- the error rules: one table per response handler (used here and by spec/producer.py) ---------------

class Reaction(enum.Enum):
    """A branch of a ``TxnRequestHandler.handleResponse``, or how ``Sender.completeBatch`` settles a produce."""

    DONE = "done"  # result.done() (a produce: completeBatch)
    LOOKUP_AND_RETRY = "lookup and retry"  # lookupCoordinator, then reenqueue
    RETRY = "retry"  # reenqueue (a produce: reenqueueBatch, keeping its sequence)
    ABORTABLE = "abortable"  # abortableError (a produce: maybeTransitionToErrorState)
    ABORTABLE_IF_POSSIBLE = "abortable if possible"  # abortableErrorIfPossible: a TV < 2 client bumps its epoch
    FATAL = "fatal"  # fatalError

    @property
    def retries(self) -> bool:
        return self in (Reaction.RETRY, Reaction.LOOKUP_AND_RETRY)


# maybeTransitionToErrorState: a failed produce (or send) with one of these is fatal for any producer.
PRODUCE_FATAL_ERRORS = frozenset({Errors.CLUSTER_AUTHORIZATION_FAILED, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                  Errors.PRODUCER_FENCED, Errors.UNSUPPORTED_VERSION,
                                  Errors.INVALID_PRODUCER_ID_MAPPING})


FATAL_EXCEPTIONS = frozenset(exception_of(e) for e in PRODUCE_FATAL_ERRORS)


COORDINATOR_MOVED = frozenset({Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE})


FENCED_ERRORS = frozenset({Errors.PRODUCER_FENCED, Errors.INVALID_PRODUCER_EPOCH})


# AddPartitionsToTxn / AddOffsetsToTxn / EndTxn: fatal with the error's own exception (trunk).
FATAL_COORDINATOR_ERRORS = frozenset({Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Errors.INVALID_TXN_STATE,
                                      Errors.INVALID_PRODUCER_ID_MAPPING})


# TxnOffsetCommitHandler: the group membership errors of KIP-447 (CommitFailedException)
MEMBERSHIP_ERRORS = frozenset({Errors.UNKNOWN_MEMBER_ID, Errors.ILLEGAL_GENERATION, Errors.GROUP_ID_NOT_FOUND,
                               Errors.STALE_MEMBER_EPOCH})


# A rule: (the errors it applies to, None for any error no earlier rule took; the reaction; the exception's simple
# name, None for the error's own). The first rule whose errors hold the response's error decides.
Rule: TypeAlias = tuple[frozenset[Errors] | None, Reaction, str | None]


_R = Reaction


_OK: Rule = (frozenset({Errors.NONE}), _R.DONE, None)


_RETRY: tuple[Rule, ...] = ((COORDINATOR_MOVED, _R.LOOKUP_AND_RETRY, None), (RETRIABLE_ERRORS, _R.RETRY, None))


_FENCED: Rule = (FENCED_ERRORS, _R.FATAL, PRODUCER_FENCED)


_ABORTABLE: Rule = (frozenset({Errors.TRANSACTION_ABORTABLE}), _R.ABORTABLE, TRANSACTION_ABORTABLE)


_UNKNOWN_PID: Rule = (frozenset({Errors.UNKNOWN_PRODUCER_ID}), _R.ABORTABLE_IF_POSSIBLE, None)


_COORDINATOR_FATAL: Rule = (FATAL_COORDINATOR_ERRORS, _R.FATAL, None)


_ELSE_FATAL: Rule = (None, _R.FATAL, KAFKA_EXCEPTION)


_ONE = frozenset


# TransactionManager's handlers (trunk), row by row; the key is the request (EndTxn by its result).
RESPONSE_RULES: Mapping[str, tuple[Rule, ...]] = MappingProxyType({
    "FindCoordinator": (
        _OK, (RETRIABLE_ERRORS, _R.RETRY, None),
        (_ONE({Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}), _R.FATAL, TRANSACTIONAL_ID_AUTHORIZATION),
        (_ONE({Errors.GROUP_AUTHORIZATION_FAILED}), _R.ABORTABLE, GROUP_AUTHORIZATION), _ABORTABLE, _ELSE_FATAL),
    "InitProducerId": (
        _OK, *_RETRY,
        (_ONE({Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Errors.CLUSTER_AUTHORIZATION_FAILED}), _R.ABORTABLE, None),
        _FENCED, _ABORTABLE, _ELSE_FATAL),
    # AddPartitionsToTxnHandler: after TRANSACTION_ABORTABLE the pending partitions are dropped (see the handler)
    "AddPartitionsToTxn": (
        _OK, *_RETRY, _FENCED, _COORDINATOR_FATAL, _UNKNOWN_PID, _ABORTABLE,
        (_ONE({Errors.TOPIC_AUTHORIZATION_FAILED}), _R.ABORTABLE, TOPIC_AUTHORIZATION),
        (None, _R.ABORTABLE, KAFKA_EXCEPTION)),  # OPERATION_NOT_ATTEMPTED or unexpected: "Could not add partitions"
    "AddOffsetsToTxn": (
        _OK, *_RETRY, _UNKNOWN_PID, _FENCED, _COORDINATOR_FATAL,
        (_ONE({Errors.GROUP_AUTHORIZATION_FAILED}), _R.ABORTABLE, GROUP_AUTHORIZATION), _ABORTABLE, _ELSE_FATAL),
    # the group coordinator is looked up again after a timeout too; fatal or abortable drops the pending offsets
    "TxnOffsetCommit": (
        _OK, (COORDINATOR_MOVED | {Errors.REQUEST_TIMED_OUT}, _R.LOOKUP_AND_RETRY, None),
        (RETRIABLE_ERRORS, _R.RETRY, None),
        (_ONE({Errors.GROUP_AUTHORIZATION_FAILED}), _R.ABORTABLE, GROUP_AUTHORIZATION),
        (_ONE({Errors.FENCED_INSTANCE_ID, Errors.TRANSACTION_ABORTABLE}), _R.ABORTABLE, None),
        (MEMBERSHIP_ERRORS, _R.ABORTABLE, COMMIT_FAILED), _FENCED,
        (_ONE({Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT}), _R.FATAL, None),
        _ELSE_FATAL),
    "EndTxn(COMMIT)": (_OK, *_RETRY, _FENCED, _COORDINATOR_FATAL, _UNKNOWN_PID, _ABORTABLE, _ELSE_FATAL),
    # "Failed to abort transaction": TRANSACTION_ABORTABLE on an abort is fatal
    "EndTxn(ABORT)": (_OK, *_RETRY, _FENCED, _COORDINATOR_FATAL, _UNKNOWN_PID,
                      (_ONE({Errors.TRANSACTION_ABORTABLE}), _R.FATAL, KAFKA_EXCEPTION), _ELSE_FATAL),
})


def classify_response(request_name: str, error: Errors, result: TransactionResult | None = None
                      ) -> tuple[Reaction, str | None]:
    """What the handler of ``request_name`` does with ``error`` (``result``: an EndTxn's), and the exception it
    fails with (None when it does not fail)."""
    key = f"EndTxn({result.value})" if request_name == "EndTxn" and result is not None else request_name
    for errors, reaction, exception in RESPONSE_RULES[key]:
        if errors is None or error in errors:
            failed = reaction in (_R.ABORTABLE, _R.ABORTABLE_IF_POSSIBLE, _R.FATAL)
            return reaction, (exception or exception_of(error)) if failed else None
    raise AssertionError(f"no rule of {key} takes {error}")  # pragma: no cover: every table ends with None


def classify_produce_error(error: Errors, earlier_in_flight: bool) -> Reaction:
    """``Sender.completeBatch`` for a transactional producer: NONE and DUPLICATE_SEQUENCE_NUMBER complete the batch;
    ``canRetry`` retries a retriable error, and an OUT_OF_ORDER_SEQUENCE_NUMBER answering a batch that is not the
    next one (``!isNextSequence``: an earlier batch of the partition is still in flight); any other error fails
    the batch (``failBatch``), fatal or abortable as ``maybeTransitionToErrorState`` says."""
    if error in (Errors.NONE, Errors.DUPLICATE_SEQUENCE_NUMBER):
        return _R.DONE
    if error in RETRIABLE_ERRORS or (error is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER and earlier_in_flight):
        return _R.RETRY
    return _R.FATAL if error in PRODUCE_FATAL_ERRORS else _R.ABORTABLE


__all__ = [
    "API_EXCEPTIONS", "AUTHENTICATION", "CLUSTER_AUTHORIZATION", "COMMIT_FAILED", "COORDINATOR_MOVED",
    "FATAL_COORDINATOR_ERRORS", "FATAL_EXCEPTIONS", "FENCED_ERRORS", "GROUP_AUTHORIZATION", "ILLEGAL_STATE",
    "INVALID_PRODUCER_EPOCH", "INVALID_TXN_STATE", "KAFKA_EXCEPTION", "MEMBERSHIP_ERRORS", "PRODUCER_FENCED",
    "PRODUCE_FATAL_ERRORS", "RESPONSE_RULES", "TOPIC_AUTHORIZATION", "TRANSACTIONAL_ID_AUTHORIZATION",
    "TRANSACTION_ABORTABLE", "Reaction", "Rule", "classify_produce_error", "classify_response", "exception_of",
]
