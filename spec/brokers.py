"""The brokers of the system model: what the coordinator, a partition leader and the group coordinator do
with a message delivered to them, and the KIP-890 verification of a transactional produce.

System
    * Coordinator: each delivered request runs the handler of :mod:`txnspec.spec.coordinator`; markers go out
      as ``WriteTxnMarkers`` messages, one per partition; their answers complete the transaction.
    * Partition leaders: a transactional produce is verified first (TV1 with
      ``transaction.partition.verification.enable``: the partition must be in the ongoing transaction; TV2:
      the leader adds the partition itself, KIP-890), then appended by the rules of
      :mod:`txnspec.spec.partition`; markers are appended and answered.
    * Group coordinator: a ``TxnOffsetCommit`` whose member is not in the group's current generation is
      refused (KIP-447), as is one of a consumer group (KIP-848) whose member is gone or whose member epoch is
      stale for the partitions it commits (:mod:`txnspec.spec.consumer_group`); otherwise it is a record of
      the group's ``__consumer_offsets`` partition held pending until the marker on that partition commits or
      drops it.

Cost
    The model checker delivers the same message to the same broker state in many system states (which differ
    elsewhere), so each handler has a memoised form (:func:`coordinator_effect`, :func:`partition_effect`,
    :func:`group_effect`) keyed on exactly the parts of the state it reads: it runs the handler on a
    :func:`~txnspec.spec.system_state.projection` and returns the parts changed and the messages sent.

Assumptions
    The verification call from a partition leader to the coordinator (and the TV2 implicit
    AddPartitionsToTxn) is atomic with the append. Kafka makes it an RPC and guards the race with a
    ``VerificationGuard`` (``ReplicaManager.appendRecords``, ``UnifiedLog.maybeStartTransactionVerification``);
    the spec takes the guard as correct.
"""

from __future__ import annotations

from typing import Any, cast

from txnspec.spec import consumer_group as cg
from txnspec.spec import coordinator_state as coord_state
from txnspec.spec import group as group_mod
from txnspec.spec import partition as partition_mod
from txnspec.spec import verification as spec_verification
from txnspec.spec.errors import Errors
from txnspec.spec.ghost import AppendedBatch, after_coordinator_step
from txnspec.spec.messages import (
    AddOffsetsToTxn,
    AddPartitionsToTxn,
    EndTxn,
    ErrorResponse,
    InitProducerId,
    Produce,
    ProduceResponse,
    TransactionResult,
    TxnOffsetCommit,
    WriteTxnMarkers,
    WriteTxnMarkersResponse,
)
from txnspec.spec.network import COORDINATOR, GROUP, Envelope, Tag, send
from txnspec.spec.system_state import System, SystemState, projection, set_partition
from txnspec.spec.txn_state import PREPARE_STATES
from txnspec.spec.values import intern, replace


def coordinator_step(state: SystemState, result: coord_state.CoordinatorResult, env: Envelope) -> SystemState:
    """``state`` after the coordinator took ``result`` on ``env`` (its ghost updated), before any sending."""
    return replace(state, ghost=after_coordinator_step(state.ghost, state.coordinator, result, env),
                   coordinator=result.state)


def coordinator_receives(system: System, state: SystemState, env: Envelope, append_error: Errors) -> SystemState:
    proto, config = system.protocol, system.coordinator_config
    body = env.body
    cs = state.coordinator
    if isinstance(body, InitProducerId):
        result = proto.handle_init_producer_id(cs, body, config=config, append_error=append_error)
    elif isinstance(body, AddPartitionsToTxn):
        result = proto.handle_add_partitions_to_txn(cs, body, config=config, append_error=append_error)
    elif isinstance(body, AddOffsetsToTxn):
        result = proto.handle_add_offsets_to_txn(cs, body, config=config, append_error=append_error)
    elif isinstance(body, EndTxn):
        result = proto.handle_end_txn(cs, body, config=config, append_error=append_error)
    elif isinstance(body, WriteTxnMarkersResponse):
        tid, coordinator_epoch, partition = env.context
        result = proto.handle_write_txn_markers_response(cs, tid, partition, coordinator_epoch, body.error,
                                                         config=config)
    else:
        raise TypeError(f"the coordinator does not handle {type(body).__name__}")
    state = coordinator_step(state, result, env)
    out = [Envelope(COORDINATOR, env.source, result.response, env.context)] if result.response is not None else []
    out += [marker_envelope(system, m, tid) for tid, m in result.markers]
    return replace(state, network=send(state.network, *out))


def marker_envelope(system: System, marker: WriteTxnMarkers, tid: str) -> Envelope:
    target = GROUP if marker.partition == system.offsets_partition else marker.partition
    return Envelope(COORDINATOR, target, marker, (tid, marker.coordinator_epoch, marker.partition))


def partition_receives(system: System, state: SystemState, env: Envelope) -> SystemState | None:
    """A partition leader handles ``env``; None when it cannot yet (a TV2 verification the coordinator
    answers CONCURRENT_TRANSACTIONS: the leader retries by itself and the produce waits)."""
    body, proto, name = env.body, system.protocol, cast(str, env.target)  # the partition's name is its address
    pstate = state.partition(name)
    if isinstance(body, WriteTxnMarkers):
        pstate, reply = proto.append_end_txn_marker(pstate, body.producer_id, body.producer_epoch,
                                                    body.coordinator_epoch, body.result, body.transaction_version,
                                                    limits=system.limits)
        state = set_partition(state, name, pstate)
        return replace(state, network=send(state.network, Envelope(name, COORDINATOR, WriteTxnMarkersResponse(
            reply.error), env.context)))
    if not isinstance(body, Produce):
        raise TypeError(f"a partition leader does not handle {type(body).__name__}")
    verified = _verify_transactional_produce(system, state, pstate, body, env.tag)
    if verified is None:
        return None
    state, error = verified
    pstate = state.partition(name)  # with the verification entry it may have started
    if error is not Errors.NONE:
        response = ProduceResponse(error)
    else:
        fenced = _is_fenced_at_coordinator(state.coordinator, body)
        pstate, response = proto.append_data(pstate, body.producer_id, body.producer_epoch, body.base_sequence,
                                             body.record_count, body.transactional, limits=system.limits)
        state = set_partition(state, name, pstate)
        if response.error is Errors.NONE and not response.duplicate:
            last = body.base_sequence + body.record_count - 1
            batch = AppendedBatch(name, response.base_offset, body.producer_id, body.producer_epoch,
                                  body.base_sequence, last, body.transactional, env.tag, fenced)
            state = replace(state, ghost=state.ghost.appended(batch))
    return replace(state, network=send(state.network, Envelope(name, env.source, response, env.context)))


def _is_fenced_at_coordinator(cs: coord_state.CoordinatorState, produce: Produce) -> bool:
    md = cs.metadata(produce.transactional_id or "")
    if md is None:
        return False
    if produce.producer_id == md.producer_id:
        return produce.producer_epoch < md.producer_epoch and not (
            md.state in PREPARE_STATES and produce.producer_epoch == md.last_producer_epoch)
    return produce.producer_id != md.prev_producer_id


def _verify_transactional_produce(system: System, state: SystemState, pstate: Any, body: Produce, tag: Tag | None
                                  ) -> tuple[SystemState, Errors] | None:
    """KIP-890: before a transactional batch starts a transaction on this partition, ask the coordinator."""
    if not body.transactional or partition_mod.has_ongoing_transaction(pstate, body.producer_id, body.producer_epoch):
        return state, Errors.NONE
    if not system.tv2 and not system.scenario.partition_verification:
        return state, Errors.NONE
    tid = body.transactional_id or ""
    # UnifiedLog.maybeStartTransactionVerification: an epoch older than the producer's entry is refused first
    started, error = partition_mod.start_verification(pstate, body.producer_id, body.base_sequence,
                                                      body.producer_epoch, supports_epoch_bump=system.tv2)
    if error is not Errors.NONE:
        return state, error
    if system.tv2:
        add = AddPartitionsToTxn(tid, body.producer_id, body.producer_epoch, frozenset({body.partition}), 2)
        result = system.protocol.handle_add_partitions_to_txn(state.coordinator, add,
                                                              config=system.coordinator_config)
        error = result.response.error
        if error is Errors.CONCURRENT_TRANSACTIONS:
            return None  # ReplicaManager retries a TV2 verification itself: the produce waits
        state = set_partition(state, body.partition, started)
        state = coordinator_step(state, result, Envelope(body.partition, COORDINATOR, add, None, tag))
        return state, map_verification_error(error, supports_epoch_bump=True)
    state = set_partition(state, body.partition, started)
    error = verify_only(state.coordinator, tid, body.producer_id, body.producer_epoch, body.partition,
                        system.coordinator_config)
    return state, map_verification_error(error, supports_epoch_bump=False)


def verify_only(cs: coord_state.CoordinatorState, tid: str, producer_id: int, epoch: int, partition: str,
                config: coord_state.CoordinatorConfig = coord_state.DEFAULT_CONFIG) -> Errors:
    """A TV1 leader's ``verifyOnly`` AddPartitionsToTxn as the coordinator answers it
    (``handleVerifyPartitionsInTransaction``: a transaction being completed is CONCURRENT_TRANSACTIONS, a
    partition not in the transaction TRANSACTION_ABORTABLE, an id whose transaction-log partition is not served here
    NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS); the caller maps the answer for its request."""
    unserved = coord_state.ownership_error(cs, tid, config)
    if unserved is not Errors.NONE:
        return unserved
    md = cs.metadata(tid)
    if md is None or md.producer_id != producer_id:
        return Errors.INVALID_PRODUCER_ID_MAPPING
    if md.producer_epoch != epoch:
        return Errors.PRODUCER_FENCED
    if md.state in PREPARE_STATES:
        return Errors.CONCURRENT_TRANSACTIONS
    if partition in md.partitions:
        return Errors.NONE
    return Errors.TRANSACTION_ABORTABLE


def map_verification_error(error: Errors, supports_epoch_bump: bool) -> Errors:
    """What the producer sees of a failed verification of its Produce; the modelled clients send Produce v11
    (TV1) and v12 (TV2), which handle TRANSACTION_ABORTABLE."""
    return spec_verification.verification_error(error, generic_error_supported=True,
                                                supports_epoch_bump=supports_epoch_bump)


def _verify_txn_offset_commit(system: System, state: SystemState, body: TxnOffsetCommit, tag: Tag | None
                              ) -> tuple[SystemState, Errors]:
    """``CoordinatorPartitionWriter.maybeStartTransactionVerification`` for a TxnOffsetCommit (TV1 with
    verification enabled, and TV2, where the offsets partition is added to the transaction), answered as
    ``GroupCoordinatorService.commitTransactionalOffsets`` answers it; the modelled clients send TxnOffsetCommit
    v4 (TV1) and v5 (TV2), which handle TRANSACTION_ABORTABLE. The verification entry the leader starts with
    sequence -1 is left out: a coordinator-origin append checks no sequence and clears it."""
    name = system.offsets_partition
    offsets_log = state.partition(name)
    if not system.tv2 and not system.scenario.partition_verification:
        return state, Errors.NONE
    current = offsets_log.entry(body.producer_id)
    if current is not None and body.producer_epoch < current.producer_epoch:
        return state, Errors.INVALID_PRODUCER_EPOCH  # maybeStartTransactionVerification refuses it first
    if partition_mod.has_ongoing_transaction(offsets_log, body.producer_id, body.producer_epoch):
        return state, Errors.NONE
    if system.tv2:
        add = AddPartitionsToTxn(body.transactional_id, body.producer_id, body.producer_epoch, frozenset({name}), 2)
        result = system.protocol.handle_add_partitions_to_txn(state.coordinator, add,
                                                              config=system.coordinator_config)
        error = result.response.error
        if error is not Errors.CONCURRENT_TRANSACTIONS:
            state = coordinator_step(state, result, Envelope(GROUP, COORDINATOR, add, None, tag))
    else:
        error = verify_only(state.coordinator, body.transactional_id, body.producer_id, body.producer_epoch, name,
                            system.coordinator_config)
    return state, group_mod.txn_offset_commit_verification_error(error, generic_error_supported=True)


def _validate_member(system: System, state: SystemState, body: TxnOffsetCommit, proto: Any) -> Errors:
    """The member check of a TxnOffsetCommit by the group's protocol: a consumer group's
    (``ConsumerGroup.validateOffsetCommit``, the generation id read as the member epoch, at the version the
    modelled client sends) or a classic group's (``ClassicGroup.validateOffsetCommit``)."""
    consumer = state.group.consumer_group(body.group_id)
    if consumer is not None:
        version = cg.TXN_OFFSET_COMMIT_VERSION[2 if system.tv2 else 1]
        return proto.validate_consumer_offset_commit(consumer, body.member_id, body.group_instance_id,
                                                     body.generation_id, True, tuple(p for p, _ in body.offsets),
                                                     version)
    return proto.validate_offset_commit(state.group, body.group_id, body.member_id, body.group_instance_id,
                                        body.generation_id, transactional=True)


def _fenced(state: SystemState, body: TxnOffsetCommit) -> bool:
    """The ghost's verdict on an accepted commit: did it come from a fenced member? A consumer group's by
    :func:`~txnspec.spec.consumer_group.legitimate_commit` (written apart from the validator a variant may
    replace), a classic group's by the current member check."""
    consumer = state.group.consumer_group(body.group_id)
    if consumer is not None:
        return not cg.legitimate_commit(consumer, body.member_id, body.generation_id,
                                        tuple(p for p, _ in body.offsets))
    return group_mod.validate_offset_commit(state.group, body.group_id, body.member_id, body.group_instance_id,
                                            body.generation_id, transactional=True) is not Errors.NONE


def group_receives(system: System, state: SystemState, env: Envelope) -> SystemState:
    """The group coordinator. Its transactional offset commits are records in the group's
    ``__consumer_offsets`` partition, written with the producer's id and epoch (origin COORDINATOR: the
    epoch is checked, not the sequence), so that partition's producer state fences stale markers and
    stale commits exactly as a data partition does; the group's view follows the records. A commit never
    waits: unlike a Produce, a verification answered CONCURRENT_TRANSACTIONS is not retried by the broker but
    answered (the client retries)."""
    body, proto, name = env.body, system.protocol, system.offsets_partition
    offsets_log = state.partition(name)
    if isinstance(body, WriteTxnMarkers):
        offsets_log, reply = proto.append_end_txn_marker(offsets_log, body.producer_id, body.producer_epoch,
                                                         body.coordinator_epoch, body.result,
                                                         body.transaction_version, limits=system.limits)
        state = set_partition(state, name, offsets_log)
        if reply.error is Errors.NONE:
            commit = body.result is TransactionResult.COMMIT
            group = proto.complete_pending_txn_offset_commit(state.group, body.producer_id, commit)
            had_offsets = any(p.producer_id == body.producer_id for p in state.group.pending)
            epochs = (*(g.generation_id for g in state.group.groups),
                      *(g.group_epoch for g in state.group.consumer_groups))
            rebalanced = had_offsets and any(e > system.scenario.initial_generation for e in epochs)
            state = replace(state, group=group, ghost=state.ghost.offsets_settled(body.producer_id, commit,
                                                                                  rebalanced))
        return replace(state, network=send(state.network, Envelope(GROUP, COORDINATOR, WriteTxnMarkersResponse(
            reply.error), env.context)))
    if not isinstance(body, TxnOffsetCommit):
        raise TypeError(f"the group coordinator does not handle {type(body).__name__}")
    state, error = _verify_txn_offset_commit(system, state, body, env.tag)
    if error is not Errors.NONE:
        return replace(state, network=send(state.network, Envelope(GROUP, env.source, ErrorResponse(error),
                                                                   env.context)))
    # OffsetMetadataManager.commitTransactionalOffset: the member checks (KIP-447, KIP-848) before anything is
    # written
    error = _validate_member(system, state, body, proto)
    if error is not Errors.NONE:
        return replace(state, network=send(state.network, Envelope(GROUP, env.source, ErrorResponse(error),
                                                                   env.context)))
    # the group coordinator's transactional batch starts at sequence 0 (CoordinatorRuntime.maybeAllocateNewBatch
    # builds it with baseSequence 0); its sequence is not validated (origin COORDINATOR)
    offsets_log, appended = proto.append_data(offsets_log, body.producer_id, body.producer_epoch, 0, 1, True,
                                              limits=system.limits, detect_duplicates=False, validate_sequence=False)
    if appended.error is not Errors.NONE:
        return replace(state, network=send(state.network, Envelope(GROUP, env.source, ErrorResponse(appended.error),
                                                                   env.context)))
    group, response = proto.handle_txn_offset_commit(state.group, body, record_offset=appended.base_offset)
    state = replace(state, ghost=state.ghost.offsets_accepted(body.producer_id, fenced=_fenced(state, body)))
    state = replace(set_partition(state, name, offsets_log), group=group)
    return replace(state, network=send(state.network, Envelope(GROUP, env.source, response, env.context)))


# --- the handlers memoised on what they read (used with System.memo) -----------------------------------------

Sent = tuple[Envelope, ...]  # the messages a step sent, sorted as the network keeps them


def coordinator_effect(system: System, cs: coord_state.CoordinatorState, ghost: Any, env: Envelope, append_error: Errors
                       ) -> tuple[coord_state.CoordinatorState, Any, Sent]:
    """:func:`coordinator_receives` as a function of what it reads: the coordinator and ghost after, and what
    was sent."""
    after = coordinator_receives(system, projection(coordinator=cs, ghost=ghost), env, append_error)
    return intern(after.coordinator), intern(after.ghost), after.network


def partition_effect(system: System, pstate: Any, cs: coord_state.CoordinatorState, ghost: Any, env: Envelope
                     ) -> tuple[Any, coord_state.CoordinatorState, Any, Sent] | None:
    """:func:`partition_receives` on the leader of ``env.target`` as a function of what it reads: that
    partition, the coordinator and the ghost after, and what was sent; None when the produce waits."""
    name = cast(str, env.target)  # a partition leader's address is the partition's name
    if isinstance(env.body, Produce) and env.body.partition != name:
        raise ValueError(f"a Produce for {env.body.partition} sent to the leader of {name}")
    after = partition_receives(system, projection(coordinator=cs, partitions=((name, pstate),), ghost=ghost), env)
    if after is None:
        return None
    return intern(after.partition(name)), intern(after.coordinator), intern(after.ghost), after.network


def group_effect(system: System, offsets_log: Any, group: Any, cs: coord_state.CoordinatorState, ghost: Any,
                 env: Envelope) -> tuple[Any, Any, coord_state.CoordinatorState, Any, Sent] | None:
    """:func:`group_receives` as a function of what it reads: the group's offsets partition, the group
    coordinator, the transaction coordinator and the ghost after, and what was sent; None when the commit
    waits."""
    name = system.offsets_partition
    before = projection(coordinator=cs, partitions=((name, offsets_log),), group=group, ghost=ghost)
    after = group_receives(system, before, env)
    if after is before:
        return None
    return (intern(after.partition(name)), intern(after.group), intern(after.coordinator), intern(after.ghost),
            after.network)
