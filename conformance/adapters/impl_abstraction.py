"""The implementation's abstraction function: a :class:`txnspec.impl.cluster.Cluster` as the spec's abstract state.

What it maps (:class:`txnspec.conformance.abstraction.AbstractState`, component by component)
    ``coordinator`` from the transaction coordinator's cache (``TransactionMetadata``), ``txn_log`` from the
    last record of each transactional id in the ``__transaction_state`` partitions (``TransactionLog``'s value,
    decoded as Kafka's ``readTxnRecordValue`` does), ``partitions`` from each partition leader's log, producer
    state (``ProducerStateManager``), transaction index and verification entries, ``group`` from the group
    coordinator's committed and pending offsets, the membership's generations and the consumer groups (KIP-848:
    group epoch, each member's epoch and partitions with their assignment epochs), ``producers`` from each
    spec producer's live client (``TransactionManager`` and the Sender's produce requests in flight).

Names
    The spec's names throughout: ``p0`` for the broker's ``p0-0`` (:class:`~.impl_messages.Names`), the spec's
    producer addresses, generations and consumer-group epochs less the offset of the adapter's group formation.

Differences from the spec's abstraction (:data:`DIFFERENCES`: path pattern -> reason)
    Each is something the implementation does not hold in the spec's form; everything else is compared.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from txnspec.conformance import abstraction as ab
from txnspec.conformance.adapters.impl_messages import Names

# nothing of a cluster at transaction version >= 1 is held otherwise than in the spec's abstraction
DIFFERENCES: dict[str, str] = {}


# what a version-0 transaction log value (server transaction version 0) does not hold
UNTAGGED_LOG: dict[str, str] = {
    f"txn_log.*.{field}": "a version-0 transaction log value (the cluster at transaction version 0) has no previous "
                          "or next producer id nor client transaction version (tagged fields of version 1, "
                          "TransactionLog.valueToBytes); the spec keeps the whole transit and drops them when it "
                          "loads the log (spec/txn_loading.py load_from_log)"
    for field in ("prev_producer_id", "next_producer_id", "transaction_version")}


def differences(server_transaction_version: int) -> dict[str, str]:
    """The table of :data:`DIFFERENCES` for a cluster at ``server_transaction_version``."""
    return {**DIFFERENCES, **(UNTAGGED_LOG if server_transaction_version < 1 else {})}


def _coordinator(cluster: Any, names: Names) -> dict[str, ab.CoordinatorEntry]:
    out: dict[str, ab.CoordinatorEntry] = {}
    for tid, md in sorted(cluster.broker.txn_coordinator.txn_manager.cache.items()):
        out[tid] = {"state": md.state.value, "pending": None if md.pending_state is None else md.pending_state.value,
                    "producer_id": md.producer_id, "producer_epoch": md.producer_epoch,
                    "last_producer_epoch": md.last_producer_epoch, "prev_producer_id": md.prev_producer_id,
                    "next_producer_id": md.next_producer_id,
                    "partitions": sorted(names.partition(p) for p in md.topic_partitions),
                    "txn_timeout_ms": md.txn_timeout_ms, "transaction_version": md.client_transaction_version}
    return out


def _txn_log(cluster: Any, names: Names) -> dict[str, ab.TxnLogRecord]:
    from txnspec.impl.txn_metadata import TransactionState

    last: dict[str, str | None] = {}
    for partition in cluster.broker.txn_coordinator.txn_manager.log_partitions:
        for batch in partition.log.batches:
            for record in batch.records:
                last[str(record.key)] = None if record.value is None else str(record.value)
    out: dict[str, ab.TxnLogRecord] = {}
    for tid, raw in sorted(last.items()):
        if raw is None:
            continue  # a tombstone: the log as compaction leaves it has no record of the id (the spec's txn_log)
        v = json.loads(raw)
        out[tid] = {"state": TransactionState.from_id(v["status"]).value, "producer_id": v["producer_id"],
                    "producer_epoch": v["producer_epoch"], "prev_producer_id": v.get("prev_producer_id", -1),
                    "next_producer_id": v.get("next_producer_id", -1),
                    "partitions": sorted(names.partition(p) for p in v["partitions"] or ()),
                    "txn_timeout_ms": v["timeout_ms"], "transaction_version": v.get("client_tv", 0)}
    return out


def _partition(p: Any) -> ab.PartitionView:
    from txnspec.impl.log import NO_SEQUENCE

    log = []
    for b in p.log.batches:
        count = len(b.records)
        last_seq = b.base_sequence + count - 1 if b.base_sequence != NO_SEQUENCE else NO_SEQUENCE
        control = None if b.control_type is None else b.control_type.name
        log.append([b.base_offset, b.base_offset + count - 1, b.producer_id, b.producer_epoch, b.base_sequence,
                    last_seq, b.is_transactional, control, b.coordinator_epoch])
    state = p.producer_state
    return {
        "log": log, "log_end": p.log_end_offset, "hw": p.high_watermark, "lso": p.last_stable_offset,
        "aborted": [[a.producer_id, a.first_offset, a.last_offset, a.last_stable_offset] for a in p.txn_index.entries],
        "producers": {str(pid): {"producer_epoch": e.producer_epoch, "coordinator_epoch": e.coordinator_epoch,
                                 "batches": [[m.first_seq, m.last_seq, m.first_offset, m.last_offset]
                                             for m in e.batch_metadata],
                                 "current_txn_first_offset": -1 if e.current_txn_first_offset is None
                                 else e.current_txn_first_offset}
                      for pid, e in sorted(state.producers.items())},
        "verifying": {str(pid): [v.lowest_sequence, v.epoch, v.supports_epoch_bump]
                      for pid, v in sorted(state.verification_states.items())},
    }


def _group(cluster: Any, generation_offset: int, group_ids: tuple[str, ...]) -> ab.GroupView:
    gc = cluster.broker.group_coordinator
    committed = {f"{g}/{tp}": [offset, gc.committed_record_offsets.get((g, tp), -1)]
                 for (g, tp), offset in sorted(gc.committed.items())}
    pending = {str(pid): {f"{g}/{tp}": [offset, record] for (g, tp), (offset, record) in sorted(entries.items())}
               for pid, entries in sorted(gc.pending.items()) if entries}
    # a group nobody joined yet is Empty at generation 0 (a ClassicGroup as created for an offset commit); the
    # membership creates its entry only at the first JoinGroup
    groups: dict[str, dict[str, int]] = {g: {"generation": 0, "members": 0} for g in group_ids}
    membership = cluster.broker.membership
    for group_id, group in sorted(membership.groups.items()):
        groups[group_id] = {"generation": group.generation_id - generation_offset, "members": len(group.members)}
    consumer_groups = {group_id: ab.consumer_group_view(group.group_epoch, (
        (m.member_id, m.member_epoch, m.assigned, m.revoking) for m in group.members.values()), generation_offset)
        for group_id, group in sorted(cluster.broker.consumer_groups.groups.items())}
    return {"committed": committed, "pending": pending, "groups": groups, "consumer_groups": consumer_groups}


def _client(producer: Any, names: Names, txn: int) -> ab.ClientView:
    # the batches sent and unfinished, one waiting for its retry included (Kafka's inflightBatchesBySequence keeps
    # them until they complete), as the spec's Producer.in_flight: the accumulator's batches given a sequence
    in_flight = sorted([names.partition(tp), b.producer_id, b.producer_epoch, b.base_sequence]
                       for tp, queue in producer.accumulator.items() for b in queue if b.base_sequence != -1)
    if producer.tm.state.value == "FATAL_ERROR":
        in_flight = []  # the spec sees a fatal client only as fatal (spec/projection.py): nothing it waits for
    # TransactionManager.partitionsInTransaction; under TV2 the leader adds them (KIP-890) and the spec's client
    # keeps none (spec/projection.py): the abstraction shows none either
    tm = producer.tm
    added = [] if tm.transaction_version >= 2 else sorted(names.partition(p) for p in tm.partitions_in_transaction)
    return {"phase": tm.state.value, "producer_id": tm.producer_id, "epoch": tm.producer_epoch, "txn": txn,
            "in_flight": in_flight, "added": added}


def of_cluster(cluster: Any, names: Names, producers: Mapping[Any, Any], partitions: Mapping[str, str],
               txn_no: Mapping[Any, int] | None = None, generation_offset: int = 0,
               group_ids: tuple[str, ...] = ()) -> ab.AbstractState:
    """The abstract state of ``cluster``: ``producers`` maps each spec producer address to its live client
    (:class:`txnspec.impl.client.Producer`), ``partitions`` each spec partition name to the broker's,
    ``group_ids`` the groups that exist from the start (Empty until joined)."""
    broker = cluster.broker
    views = {spec_name: _partition(broker.partition(impl_name)) for spec_name, impl_name in partitions.items()}
    return {"coordinator": _coordinator(cluster, names), "txn_log": _txn_log(cluster, names), "partitions": views,
            "group": _group(cluster, generation_offset, group_ids),
            "producers": {str(who): _client(p, names, (txn_no or {}).get(who, 0)) for who, p in producers.items()}}
