"""RocketMQ's broker side of transactional messages: the half queue, END_TRANSACTION, op records and the
check-back loop, as pure functions over a frozen :class:`Broker`.

Follows (apache/rocketmq 5.3.3, ``broker/.../transaction/queue``)
    * ``SendMessageProcessor`` + ``TransactionalMessageBridge.parseHalfMessageInner``: a half message is
      stored in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 with its real topic kept aside (:func:`put_half`).
    * ``EndTransactionProcessor.processRequest``: look the half up by its commit-log offset, check the
      producer group and offsets, then COMMIT puts the real message and queues an op record, ROLLBACK only
      queues the op record (:func:`end_transaction`). **Nothing checks whether the half was already
      resolved**: a second COMMIT puts a second real message (issues #5574, #8158).
    * ``TransactionalMessageServiceImpl.deletePrepareMessage`` + ``TransactionalOpBatchService``: the op
      record is held in memory and written in batches (:func:`flush_op_batch`); a broker crash loses
      what was not written (:func:`crash`, [derived] in RULES §1.4, confirmed below).
    * ``TransactionalMessageServiceImpl.check``: one step of the check loop at the half consume offset
      (:func:`check_step`): skip the entry if a durable op record names it (op offsets below the
      consume offset are ignored, ``fillOpRemoveMap``), discard it after ``transactionCheckMax``
      checks (``needDiscard``, no op record written), otherwise re-put a copy with the check count + 1
      (``putBackHalfMsgQueue`` / ``renewHalfMessageInner``) and send a one-way CHECK for the copy
      (``AbstractTransactionalMessageCheckListener.sendCheckMessage``).

Checked against the source (read through the code index, this session)
    * ``EndTransactionProcessor.processRequest`` (apache/rocketmq at 02a4875d): COMMIT runs
      ``commitMessage`` → ``checkPrepareMessage`` → ``endMessageTransaction`` → ``sendFinalMessage``, and
      ``deletePrepareMessage`` only if the put succeeded; ROLLBACK runs the same lookup and check, then
      ``deletePrepareMessage``. ``commitMessage`` and ``rollbackMessage`` are both just
      ``getHalfMessageByOffset(commitLogOffset)``: no op or state lookup, so RULES §1.3.5 (COMMIT is not
      idempotent) holds.
    * ``TransactionalMessageServiceImpl.deletePrepareMessage``: offers ``"<offset>,"`` to the in-memory
      ``MessageQueueOpContext`` queue (100 ms) and returns true; only a failed offer writes the op message
      at once ("Force add remove op data"). The crash window of RULES §1.4 ([derived]) follows from that
      code; it is not a documented behaviour, and the model treats it as such.

Assumes
    * Time is abstract. A half may become checkable at any moment after it is stored (its age passes
      ``transactionTimeOut``, 6 s, while one-way messages may be delayed without bound), so the check
      step is enabled whenever there is an entry at the consume offset; the "stop at the first fresh
      half" rule only delays checks and is covered by that interleaving.
    * One broker (master) with one half queue; commit-log offset and half-queue offset are one number
      (the entry's index), because lookups by either find the same entry.
    * The op queue is read completely at each step (``fillOpRemoveMap`` pulls 32 at a time; the model
      has fewer).

Leaves out
    Check immunity (``CHECK_IMMUNITY_TIME_IN_SECONDS``, #8311), the 72 h retention and purge, slave acting
    as master (escape), the proxy's ``TransactionDataManager``, manual resume of discarded halves,
    clock skew (#9640), and the body/properties of messages (a message is its transaction key).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace


class EndType(enum.Enum):
    """``MessageSysFlag`` transaction types carried by END_TRANSACTION (NOT_TYPE is never sent: ignored)."""

    COMMIT = "COMMIT_TYPE"
    ROLLBACK = "ROLLBACK_TYPE"

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True, order=True)
class HalfEntry:
    """One entry of ``RMQ_SYS_TRANS_HALF_TOPIC/0``: the transaction key (``UNIQ_KEY``) and
    ``TRANSACTION_CHECK_TIMES`` of this copy."""

    key: int
    check_times: int = 0


@dataclass(frozen=True, slots=True)
class Broker:
    """The broker's transactional state.

    ``half_queue[q]`` is the half entry at queue offset ``q``; ``half_offset`` is the check loop's consume
    offset (``CID_RMQ_SYS_TRANS``); ``op_durable`` the offsets named by written op records (tag ``d``);
    ``op_batch`` those still in memory; ``real_queue`` the real topic's queue (keys of committed messages,
    in put order); ``discarded`` the offsets copied to ``TRANS_CHECK_MAX_TIME_TOPIC``."""

    half_queue: tuple[HalfEntry, ...] = ()
    half_offset: int = 0
    op_durable: frozenset[int] = frozenset()
    op_batch: frozenset[int] = frozenset()
    real_queue: tuple[int, ...] = ()
    discarded: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class EndOutcome:
    """What one END_TRANSACTION did: ``put_real`` when a real message was put, ``op`` the offset queued."""

    broker: Broker
    put_real: bool
    op: int | None
    error: str | None = None


def put_half(broker: Broker, key: int) -> tuple[Broker, int]:
    """``asyncPutHalfMessage``: store a half message; returns the broker and the half's queue offset."""
    return replace(broker, half_queue=(*broker.half_queue, HalfEntry(key))), len(broker.half_queue)


def end_transaction(broker: Broker, key: int, offset: int, end: EndType) -> EndOutcome:
    """``EndTransactionProcessor.processRequest`` for a COMMIT or ROLLBACK naming half ``offset``.

    The lookup is by offset and ignores whether the half was already committed, rolled back or
    discarded; ``checkPrepareMessage`` compares producer group and offsets, which the model's messages
    always carry right, and the key (the model's stand-in for the producer-group check)."""
    if offset >= len(broker.half_queue):
        return EndOutcome(broker, False, None, "SYSTEM_ERROR: Find prepared transaction message failed")
    if broker.half_queue[offset].key != key:
        return EndOutcome(broker, False, None, "SYSTEM_ERROR: The producer group wrong")
    real_queue = (*broker.real_queue, key) if end is EndType.COMMIT else broker.real_queue
    # put the real message first, then queue the op record (the two are not atomic)
    return EndOutcome(replace(broker, real_queue=real_queue, op_batch=broker.op_batch | {offset}),
                      end is EndType.COMMIT, offset)


def flush_op_batch(broker: Broker) -> Broker:
    """``TransactionalOpBatchService`` → ``batchSendOpMessage``: write the pending op records."""
    return replace(broker, op_durable=broker.op_durable | broker.op_batch, op_batch=frozenset())


def crash(broker: Broker) -> Broker:
    """A broker crash and restart: the stores survive, the in-memory op batch does not."""
    return replace(broker, op_batch=frozenset())


class CheckStep(enum.Enum):
    RESOLVED = "resolved"    # a durable op record names the entry: skip it
    DISCARDED = "discarded"  # TRANSACTION_CHECK_TIMES reached transactionCheckMax: to TRANS_CHECK_MAX_TIME_TOPIC
    CHECKED = "checked"      # re-put as a new copy and a CHECK sent for the copy


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    broker: Broker
    step: CheckStep
    offset: int                  # the entry at the consume offset
    copy_offset: int | None = None


def check_step(broker: Broker, check_max: int) -> CheckOutcome | None:
    """One step of ``TransactionalMessageServiceImpl.check`` at the half consume offset, or None when the
    loop has nothing to read (``NO_NEW_MSG``).

    Op records are matched only for offsets at or above the consume offset (``fillOpRemoveMap``): an op
    record for an older copy, written after the loop moved past it, never resolves a later copy."""
    i = broker.half_offset
    if i >= len(broker.half_queue):
        return None
    advanced = replace(broker, half_offset=i + 1)
    if i in broker.op_durable:
        return CheckOutcome(advanced, CheckStep.RESOLVED, i)
    entry = broker.half_queue[i]
    if entry.check_times >= check_max:  # needDiscard; no op record is written
        return CheckOutcome(replace(advanced, discarded=(*broker.discarded, i)), CheckStep.DISCARDED, i)
    copy = HalfEntry(entry.key, entry.check_times + 1)
    return CheckOutcome(replace(advanced, half_queue=(*broker.half_queue, copy)), CheckStep.CHECKED, i,
                        len(broker.half_queue))
