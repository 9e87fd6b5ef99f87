"""The transaction log's records: a transactional id's metadata as the value of a ``__transaction_state`` record.

Follows Kafka TRUNK ``core/src/main/scala/kafka/coordinator/transaction/TransactionLog.scala``
(``valueToBytes``, ``readTxnRecordValue``) and the schema ``TransactionLogValue.json``: value version 0 for a
server transaction version 0, version 1 (with the tagged fields previous / next producer id and the client
transaction version) from 1 on. The key is the transactional id; a ``None`` value is the tombstone of
``removeExpiredTransactionalIds``.

Assumed: the value is JSON text with the schema's fields, not Kafka's binary encoding (the implementation reads
only what it wrote). Left out: ``lastProducerEpoch`` (never persisted, as in Kafka), the key's version.
"""

from __future__ import annotations

import json

from txnspec.impl.log import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, SHORT_MAX
from txnspec.impl.txn_metadata import TransactionMetadata, TransactionState, TxnTransitMetadata


def value_to_json(t: TxnTransitMetadata, server_tv: int) -> str:
    """``TransactionLog.valueToBytes``: version 1 iff the server TV >= 1. The previous and next producer ids and
    the client transaction version are tagged fields of version 1 (``TransactionLogValue.json``): version 0
    does not carry them."""
    value: dict[str, object] = {
        "version": 1 if server_tv >= 1 else 0, "producer_id": t.producer_id, "producer_epoch": t.producer_epoch,
        "timeout_ms": t.txn_timeout_ms, "status": t.txn_state.id,
        "partitions": None if t.txn_state is TransactionState.EMPTY else sorted(t.topic_partitions),
        "last_update_ms": t.txn_last_update_timestamp, "start_ms": t.txn_start_timestamp}
    if server_tv >= 1:
        value["prev_producer_id"] = t.prev_producer_id
        value["next_producer_id"] = t.next_producer_id
        value["client_tv"] = t.client_transaction_version
    return json.dumps(value, sort_keys=True)


def metadata_from_json(transactional_id: str, raw: str, max_epoch: int = SHORT_MAX) -> TransactionMetadata:
    """``TransactionLog.read``: ``last_producer_epoch`` is not stored, so it loads as -1; a tagged field a
    version-0 value lacks loads as its default (previous / next producer id -1, client transaction version 0)."""
    v = json.loads(raw)
    return TransactionMetadata(
        transactional_id, v["producer_id"], v.get("prev_producer_id", NO_PRODUCER_ID),
        v.get("next_producer_id", NO_PRODUCER_ID), v["producer_epoch"], NO_PRODUCER_EPOCH, v["timeout_ms"],
        TransactionState.from_id(v["status"]), set(v["partitions"] or ()), v["start_ms"], v["last_update_ms"],
        v.get("client_tv", 0), max_epoch=max_epoch)


__all__ = ["metadata_from_json", "value_to_json"]
