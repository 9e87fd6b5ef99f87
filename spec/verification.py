"""Transaction verification (KIP-890): what a producer sees when the coordinator answers its leader's check.

Models
    A leader verifies a transactional Produce (and a TxnOffsetCommit) with the transaction coordinator before it
    appends (``AddPartitionsToTxnManager``; the leader's own side, its verification entry, is
    :func:`txnspec.spec.partition.start_verification`). The coordinator's answer reaches the producer mapped twice:
    :func:`add_partitions_manager_error` (``AddPartitionsToTxnHandler.onComplete``), then for a Produce
    :func:`verification_error` (``ReplicaManager.appendRecords``' ``postVerificationCallback``); the request
    versions that decide both are data (``PRODUCE_VERSION_*``, ``TXN_OFFSET_COMMIT_VERSION_*``).

Kafka sources followed (trunk, 4.x)
    ``core/.../server/AddPartitionsToTxnManager.scala`` (``produceRequestVersionToTransactionSupportedOperation``,
    ``AddPartitionsToTxnHandler.onComplete``), ``ReplicaManager.scala`` (``appendRecords``,
    ``postVerificationCallback``).

Assumptions
    The clients send Produce v11 (TV1) or v12 (TV2) and TxnOffsetCommit v4 or v5 (docs/spec.md).

Not modelled
    The verification's RPC and its timing: the system model asks the coordinator within the Produce's step.
"""

from __future__ import annotations

from txnspec.spec.errors import Errors

# AddPartitionsToTxnManager.produceRequestVersionToTransactionSupportedOperation: Produce v11 is the first whose
# client handles TRANSACTION_ABORTABLE (GENERIC_ERROR_SUPPORTED), v12 the first that lets the leader add the
# partition itself (ADD_PARTITION, transaction version 2); TxnOffsetCommit likewise at v4 and v5.
PRODUCE_VERSION_GENERIC_ERROR, PRODUCE_VERSION_ADD_PARTITION = 11, 12


TXN_OFFSET_COMMIT_VERSION_GENERIC_ERROR, TXN_OFFSET_COMMIT_VERSION_ADD_PARTITION = 4, 5


# the errors under which ReplicaManager reports a verification that could not complete as retriable
VERIFICATION_NOT_COMPLETED = frozenset({Errors.NETWORK_EXCEPTION, Errors.COORDINATOR_LOAD_IN_PROGRESS,
                                        Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR})


def add_partitions_manager_error(coordinator_error: Errors, generic_error_supported: bool) -> Errors:
    """What ``AddPartitionsToTxnManager.AddPartitionsToTxnHandler.onComplete`` hands back to the verifying
    leader for one partition: PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH; TRANSACTION_ABORTABLE becomes
    INVALID_TXN_STATE for a request older than ``*_VERSION_GENERIC_ERROR`` (``DEFAULT_ERROR``); every other
    answer as it is. A Produce and a TxnOffsetCommit then map it each their own way
    (:func:`verification_error`; :func:`txnspec.spec.group.txn_offset_commit_verification_error`)."""
    if coordinator_error is Errors.PRODUCER_FENCED:
        return Errors.INVALID_PRODUCER_EPOCH
    if coordinator_error is Errors.TRANSACTION_ABORTABLE and not generic_error_supported:
        return Errors.INVALID_TXN_STATE
    return coordinator_error


def verification_error(coordinator_error: Errors, generic_error_supported: bool,
                       supports_epoch_bump: bool = False) -> Errors:
    """The error a producer gets when the transaction coordinator answers its leader's verification (or, in
    TV2, add) of a Produce with ``coordinator_error``: :func:`add_partitions_manager_error`, then
    ``ReplicaManager.appendRecords``' ``postVerificationCallback``: a verification that did not complete
    becomes NOT_ENOUGH_REPLICAS, and so does CONCURRENT_TRANSACTIONS for a request that cannot bump the epoch
    (Produce v11 and older; from v12 the broker retries it and then passes it on). Found on Kafka 4.4 by
    ``txnspec audit --broker kafka --transaction-version 1``: a TV1 Produce v11 outside the transaction is
    TRANSACTION_ABORTABLE."""
    error = add_partitions_manager_error(coordinator_error, generic_error_supported)
    if error in VERIFICATION_NOT_COMPLETED or (error is Errors.CONCURRENT_TRANSACTIONS and not supports_epoch_bump):
        return Errors.NOT_ENOUGH_REPLICAS
    return error
