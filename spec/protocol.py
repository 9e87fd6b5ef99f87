"""The protocol a system model runs: which handler implements each Kafka rule.

System: a :class:`Protocol` is a record of the component handlers the system model calls (the
coordinator's, the partition leader's, the group coordinator's) plus a few switches for behaviour that
is one boolean in Kafka's code (the epoch bump when fencing, duplicate detection). The current protocol
is :data:`CURRENT`; a protocol *variant* (``spec/variants/``) is a function from a protocol to a
protocol that overrides named handlers, the way hachikuji's ``Kip101.tla`` extends a spec and replaces
one action. Mutants (``spec/mutants.py``) are built the same way.

Assumptions: handlers are pure functions with the signatures of :mod:`txnspec.spec.coordinator`,
:mod:`txnspec.spec.partition` and :mod:`txnspec.spec.group`; an override must keep the signature.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from txnspec.spec import consumer_group, two_phase, txn_expiry, txn_loading, txn_markers
from txnspec.spec import coordinator as coord
from txnspec.spec import coordinator_state as coord_state
from txnspec.spec import group as group_mod
from txnspec.spec import partition as partition_mod

Handler = Callable[..., Any]


@dataclass(frozen=True)
class Protocol:
    name: str = "current"
    description: str = "Kafka trunk (4.x): the rules of apache/kafka's source"
    # transaction coordinator
    handle_init_producer_id: Handler = coord.handle_init_producer_id
    handle_add_partitions_to_txn: Handler = coord.handle_add_partitions_to_txn
    handle_add_offsets_to_txn: Handler = coord.handle_add_offsets_to_txn
    handle_end_txn: Handler = coord.handle_end_txn
    handle_write_txn_markers_response: Handler = txn_markers.handle_write_txn_markers_response
    abort_timed_out_transaction: Handler = txn_expiry.abort_timed_out_transaction
    coordinator_failover: Handler = txn_loading.coordinator_failover
    expire_transactional_id: Handler = txn_expiry.expire_transactional_id
    is_timeout_candidate: Handler = two_phase.is_timeout_candidate  # which transactions the timeout scan may abort
    coordinator_config: coord_state.CoordinatorConfig = field(default_factory=coord_state.CoordinatorConfig)
    # partition leader
    append_data: Handler = partition_mod.append_data
    append_end_txn_marker: Handler = partition_mod.append_end_txn_marker
    fetch: Handler = partition_mod.fetch
    expire_producer_ids: Handler = partition_mod.expire_producer_ids
    # group coordinator
    validate_offset_commit: Handler = group_mod.validate_offset_commit
    validate_consumer_offset_commit: Handler = consumer_group.validate_offset_commit  # KIP-848's groups
    handle_offset_commit: Handler = group_mod.handle_offset_commit
    handle_txn_offset_commit: Handler = group_mod.handle_txn_offset_commit
    complete_pending_txn_offset_commit: Handler = group_mod.complete_pending_txn_offset_commit
    # client behaviour the system model's producers follow
    client_waits_for_produce_before_end_txn: bool = True
    client_bumps_epoch_after_abortable_error: bool = True  # KIP-360 (TV < 2)
    # KafkaProducer.completeTransaction commits only when the PreparedTxnState handed in matches (KIP-939)
    client_complete_compares_prepared_state: bool = True
    # InitProducerIdHandler on a kept transaction: 4.4 leaves transactionStarted false, so the EndTxn of
    # completeTransaction is completed locally without an RPC (docs/kip-939.md)
    client_kept_transaction_started: bool = False
    # the 4.4 sources' TransactionManager puts Enable2Pc and KeepPreparedTxn in InitProducerId; the 4.4.0 release's
    # does not (its request leaves both false: docs/kip-939.md), the variant kafka-4.4.0-client
    client_sends_two_phase_fields: bool = True

    def but(self, name: str, description: str, **overrides: Any) -> Protocol:
        """This protocol with some handlers or switches replaced, under a new name."""
        return replace(self, name=name, description=description, **overrides)


CURRENT = Protocol()
