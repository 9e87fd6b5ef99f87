"""The transactional producer's application API: Kafka's ``KafkaProducer``, sans-I/O, built from its parts.

Follows Kafka TRUNK ``clients/src/main/java/org/apache/kafka/clients/producer/KafkaProducer.java``
(``initTransactions``, ``beginTransaction``, ``send`` / ``doSend``: the record is appended to the accumulator
before its partition is added to the transaction, ``sendOffsetsToTransaction``, ``commitTransaction``,
``abortTransaction``, ``close``, and KIP-939's ``prepareTransaction``, ``completeTransaction`` and
``throwIfInPreparedState``). The parts, each a module of its own: the transaction manager
(:mod:`~txnspec.impl.transaction_manager`, its states :mod:`~txnspec.impl.client_states`, its request handlers
:mod:`~txnspec.impl.txn_handlers`), the Sender and the accumulator's drain (:mod:`~txnspec.impl.sender`, which
:class:`Producer` extends), batches (:mod:`~txnspec.impl.producer_batch`) and results
(:mod:`~txnspec.impl.client_results`).

Theory of operation: the application calls the API methods (``init_transactions`` ... ``abort_transaction``,
``send``); they change state, queue handlers and return a
:class:`~txnspec.impl.client_results.TransactionalRequestResult` or a
:class:`~txnspec.impl.client_results.RecordFuture` at once, raising only what Kafka raises synchronously.
:meth:`Producer.poll` runs Sender iterations and returns the requests to put on the wire (transactional requests
before Produce); :meth:`Producer.on_response` feeds back an answer, :meth:`Producer.on_disconnect` a lost
request. Blocking is the caller's business (:class:`txnspec.impl.cluster.Cluster` pumps the network until a
result completes). Invalid transitions raised on the Sender side poison the manager (FATAL_ERROR).

Assumed / left out: delivery timeouts, ``max.block.ms`` and backoff delays (retries are immediate, or held
until :meth:`Producer.end_retry_backoff` when ``retry_backoff`` is set, as the conformance adapter does); batch
size is a record count; no compression, partitioner or metadata; the TV of the client is fixed at
construction (no upgrade detection).

KIP-939 (two-phase commit, Kafka 4.4's client): ``enable_two_pc`` (``transaction.two.phase.commit.enable``) sends
``Enable2Pc``; :meth:`Producer.prepare_transaction` (``PREPARED_TRANSACTION``, the ``PreparedTxnState`` of the
current producer id and epoch), :meth:`Producer.complete_transaction` (commit exactly when the state handed in
matches, else abort), ``init_transactions(keep_prepared_txn=True)`` (a kept transaction's ongoing pair becomes
the prepared state). ``prepareTransaction`` flushes in Kafka; here the caller drains first (it refuses while a
batch is incomplete).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

from txnspec.impl.client_results import RecordFuture, TransactionalRequestResult
from txnspec.impl.client_states import St, State
from txnspec.impl.errors import ApiException, IllegalStateException, InvalidRequestError, InvalidTxnStateException
from txnspec.impl.log import SHORT_MAX, Record, RecordValue
from txnspec.impl.membership import MemberIdentity
from txnspec.impl.policy import KAFKA, Rules
from txnspec.impl.producer_batch import ProducerBatch
from txnspec.impl.sender import Sender
from txnspec.impl.transaction_manager import TransactionManager


class Producer(Sender):
    """A transactional (or idempotent, with ``transactional_id=None``) producer, sans-I/O.

    >>> p = Producer("tx", transaction_version=2)
    >>> r = p.init_transactions()
    >>> [type(q).__name__ for q in p.poll()]
    ['FindCoordinator']
    """

    def __init__(self, transactional_id: str | None, *, transaction_version: int = 2, txn_timeout_ms: int = 60_000,
                 batch_records: int = 1000, max_in_flight: int = 5,
                 coordinator_supports_bumping_epoch: bool = True, rules: Rules = KAFKA,
                 enable_two_pc: bool = False) -> None:
        if transactional_id is not None and (not isinstance(transactional_id, str) or not transactional_id):
            raise InvalidRequestError(f"transactional_id must be a non-empty string or None, got {transactional_id!r}")
        if transaction_version not in (0, 1, 2):
            raise InvalidRequestError(f"transaction_version must be 0, 1 or 2, got {transaction_version!r}")
        if isinstance(txn_timeout_ms, bool) or not isinstance(txn_timeout_ms, int) or txn_timeout_ms <= 0:
            raise InvalidRequestError(f"txn_timeout_ms must be a positive integer, got {txn_timeout_ms!r}")
        super().__init__(TransactionManager(transactional_id, txn_timeout_ms, transaction_version,
                                            coordinator_supports_bumping_epoch, rules, enable_two_pc), max_in_flight)
        self.batch_records = batch_records

    # --- Kafka's API names ---

    @property
    def state(self) -> State:
        return self.tm.state

    def init_transactions(self, keep_prepared_txn: bool = False) -> TransactionalRequestResult:
        """``initTransactions(keepPreparedTxn)`` (KIP-939: keep a prepared transaction of a crashed instance)."""
        self._ensure_open()
        self._throw_if_in_prepared_state()
        return self.tm.initialize_transactions(keep_prepared_txn=keep_prepared_txn)

    def begin_transaction(self) -> None:
        self._ensure_open()
        self._throw_if_in_prepared_state()
        self.tm.begin_transaction()

    def prepare_transaction(self) -> tuple[int, int]:
        """``KafkaProducer.prepareTransaction``: the ``PreparedTxnState`` (producer id, epoch). Kafka flushes first;
        here the caller must have drained (a batch still incomplete is refused)."""
        self._ensure_open()
        self._throw_if_in_prepared_state()
        if not self.tm.enable_two_pc:
            raise InvalidTxnStateException("Cannot prepare a transaction when 2PC is not enabled")
        if self.has_incomplete_batches():
            raise IllegalStateException("prepareTransaction flushes first: batches are still incomplete")
        return self.tm.prepare_transaction()

    def complete_transaction(self, prepared_txn_state: tuple[int, int]) -> TransactionalRequestResult:
        """``KafkaProducer.completeTransaction``: commit exactly when ``prepared_txn_state`` is the client's."""
        self._ensure_open()
        if self.tm.state is not St.PREPARED_TRANSACTION:
            raise InvalidTxnStateException("Cannot complete transaction because no transaction has been prepared. "
                                           "Call prepareTransaction() first, or make sure initTransaction(true) "
                                           "was called.")
        if tuple(prepared_txn_state) == self.tm.prepared_txn_state:
            return self.tm.begin_commit()
        return self.tm.begin_abort()

    def _throw_if_in_prepared_state(self) -> None:
        """``KafkaProducer.throwIfInPreparedState``: only commit, abort or complete in PREPARED_TRANSACTION."""
        if self.tm.is_transactional and self.tm.state is St.PREPARED_TRANSACTION:
            raise IllegalStateException("Cannot perform operation while the transaction is in a prepared state. "
                                        "Only commitTransaction(), abortTransaction(), or completeTransaction() "
                                        "are permitted.")

    def send(self, partition: str, value: RecordValue = None, key: RecordValue = None, *,
             timestamp: int = 0) -> RecordFuture:
        """``KafkaProducer.send``: ApiExceptions come back in the future, others are raised."""
        self._ensure_open()
        self._throw_if_in_prepared_state()
        if not isinstance(partition, str) or not partition:
            raise InvalidRequestError(f"partition must be a non-empty string, got {partition!r}")
        for name, v in (("value", value), ("key", key)):
            if v is not None and not isinstance(v, str | bytes):
                raise InvalidRequestError(f"{name} must be bytes, str or None, got {type(v).__name__}")
        future = RecordFuture(partition)
        # As KafkaProducer.doSend: the record is appended to the accumulator first, then the partition is
        # added to the transaction (which may throw, leaving the record behind until an abort drops it).
        queue = self.accumulator.setdefault(partition, deque())
        if not queue or queue[-1].base_sequence != -1 or len(queue[-1].records) >= self.batch_records:
            queue.append(ProducerBatch(partition))
        queue[-1].records.append(Record(key, value, timestamp))
        queue[-1].futures.append(future)
        try:
            self.tm.maybe_add_partition(partition)
        except ApiException as e:
            self.tm.maybe_transition_to_error_state(e)
            future._fail(e)
        return future

    def send_offsets_to_transaction(self, offsets: Mapping[str, int], group_id: str,
                                    member: MemberIdentity | None = None) -> TransactionalRequestResult:
        """``KafkaProducer.sendOffsetsToTransaction``; ``member`` is the consumer's group metadata (KIP-447)."""
        self._ensure_open()
        self._throw_if_in_prepared_state()
        if not isinstance(group_id, str) or not group_id:
            raise InvalidRequestError(f"group_id must be a non-empty string, got {group_id!r}")
        if not isinstance(offsets, Mapping) or not all(
                isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 2 ** 63 - 1
                for k, v in offsets.items()):
            raise InvalidRequestError("offsets must map partition names to non-negative integer offsets")
        return self.tm.send_offsets_to_transaction(offsets, group_id, member)

    def commit_transaction(self) -> TransactionalRequestResult:
        self._ensure_open()
        return self.tm.begin_commit()

    def abort_transaction(self) -> TransactionalRequestResult:
        self._ensure_open()
        return self.tm.begin_abort()

    def close(self) -> None:
        self.closed = True

    def _ensure_open(self) -> None:
        if self.closed:
            raise IllegalStateException("Cannot perform operation after producer has been closed")


assert SHORT_MAX == 32_767

__all__ = ["Producer"]
