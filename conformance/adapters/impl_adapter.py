"""The reference implementation (:mod:`txnspec.impl`) as a replay adapter, in lock step with the spec.

How steps map onto :class:`txnspec.impl.cluster.Cluster`
    * application actions call the (non-blocking) client :class:`~txnspec.impl.client.Producer` of the
      spec's ``producer-k`` and let it queue its requests on the cluster's network;
    * ``deliver`` actions deliver the one matching message of the network (same client, RPC, partition),
      wherever it is in the queue; ``deliver WriteTxnMarkers`` appends the marker at the leader and keeps
      its answer, which ``deliver WriteTxnMarkersResponse`` then gives to the coordinator, so the
      coordinator completes the transaction when the spec's does (not when the marker is written);
    * each producer runs with one record per batch and one Produce in flight per partition, as the spec's
      producer does (``batch.size`` and ``max.in.flight.requests.per.connection``, both Kafka-legal);
    * ``FindCoordinator``, which the spec abstracts away, is delivered as soon as it is queued;
    * faults: ``duplicate`` re-sends the request, ``timeout`` (and ``abandoned timeout``) advances the clock
      past the transaction timeout and aborts the named id's transaction only (without running the network),
      ``failover`` crashes and restarts the coordinators (markers already sent stay in flight), a slow failover's
      ``resign``, ``elect`` and ``load transaction-log partition`` are ``TransactionCoordinator.emigrate`` of every
      transaction-log partition, ``begin_load`` of them at the next coordinator epoch and ``finish_load`` of one,
      ``expire batch``
      expires the in-flight batch (``Producer.expire_batch``); an action names what it does by its fields
      (:class:`txnspec.spec.actions.Action`), so no step can say one thing and be read as another;
    * ``lose`` takes the message off the implementation's network (``Network.lose``) and nobody is told:
      the spec's ``retry`` (the client's request timeout) and ``resend marker`` (the coordinator's) then
      time the lost message out (``Cluster.time_out``), so the client retries when the spec's does;
    * ``append fails`` arms the transaction-log partition to refuse its next append with the spec's
      ``NOT_ENOUGH_REPLICAS`` (``Partition.refuse_next_append``, as the leader refuses below
      ``min.insync.replicas``) and delivers the request: the coordinator's own error handling runs;
    * ``crash`` is ``Cluster.crash_producer`` and a new client instance with the same transactional id; what
      the dead instance sent stays in flight (a zombie's requests still reach the brokers, as in the spec),
      answers to it are dropped on delivery.

What is compared, in lock step
    * A delivered message is the implementation's message in flight equal to the step's field by field
      (:mod:`.impl_messages` maps each implementation message onto the spec's, :mod:`txnspec.conformance.
      envelope_diff` compares them): a step delivering a message the implementation never sent, or sent with
      other fields, diverges naming the field (``InitProducerId.transactional_id: trace 'zz', impl 't1'``).
    * The messages a step put in flight (``sent``), as the spec's messages, with the visible records per data
      partition at both isolation levels, the committed group offsets and the error codes (:meth:`ImplAdapter.
      project`). The spec's ``__consumer_offsets`` records are compared through the abstract state.

Long because :meth:`ImplAdapter.apply` maps every kind of spec step (application calls, deliveries, faults)
onto the cluster in one place: that is the lock step this module is; the messages, faults, reads, groups and
the abstraction are modules of their own (``impl_*``).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import txnspec.conformance.adapters.impl_consumer_group as consumer_group
from txnspec.conformance.abstraction import AbstractState, PathPattern
from txnspec.conformance.adapters.impl_abstraction import DIFFERENCES, differences, of_cluster
from txnspec.conformance.adapters.impl_classic_group import GroupMembers
from txnspec.conformance.adapters.impl_faults import FaultSteps
from txnspec.conformance.adapters.impl_messages import Names, marker_answer
from txnspec.conformance.adapters.impl_messages import envelope as spec_envelope
from txnspec.conformance.adapters.impl_reads import VisibleReads
from txnspec.conformance.adapters.spec_adapter import StepNotEnabledError
from txnspec.conformance.envelope_diff import compared_json, describe_mismatch, key, plain, same
from txnspec.impl import messages as implm
from txnspec.impl.internal_topics import GROUP_METADATA_TOPIC
from txnspec.impl.topic_partition import TopicPartition
from txnspec.impl.txn_markers import TxnMarker
from txnspec.spec import messages as spec
from txnspec.spec.actions import APPLICATION_CALLS, ActionKind
from txnspec.spec.network import Envelope, producer_address, producer_index

# the implementation's request type of each spec request, and the requests each spec response answers
IMPL_REQUEST: dict[type, type] = {
    spec.InitProducerId: implm.InitProducerId, spec.AddPartitionsToTxn: implm.AddPartitionsToTxn,
    spec.AddOffsetsToTxn: implm.AddOffsetsToTxn, spec.TxnOffsetCommit: implm.TxnOffsetCommit,
    spec.EndTxn: implm.EndTxn, spec.Produce: implm.Produce,
}
ANSWERS: dict[type, tuple[type, ...]] = {
    spec.InitProducerIdResponse: (implm.InitProducerId,), spec.EndTxnResponse: (implm.EndTxn,),
    spec.ProduceResponse: (implm.Produce,),
    spec.ErrorResponse: (implm.AddPartitionsToTxn, implm.AddOffsetsToTxn, implm.TxnOffsetCommit),
}
K = ActionKind
# the scenario's fault budget (spec/scenarios.py FAULTS) each fault step spends: the trace's environment
FAULT_BUDGET: dict[ActionKind, str] = {
    K.LOSE: "loss", K.DUPLICATE: "duplicate", K.APPEND_FAILS: "append_failure", K.TIMEOUT: "timeout",
    K.FAILOVER: "failover", K.CRASH: "crash", K.EXPIRE_BATCH: "expire_batch", K.REBALANCE: "rebalance",
    K.REASSIGN: "rebalance", K.ADMIN_ABORT: "admin_abort", K.RESIGN: "slow_failover"}
BLOCKING_CALLS = frozenset({K.INIT_TRANSACTIONS, K.SEND_OFFSETS_TO_TRANSACTION, K.COMMIT_TRANSACTION,
                            K.ABORT_TRANSACTION, K.COMPLETE_TRANSACTION})


# the consumed input partition whose offsets the producers commit (the spec's offsets are of one input)
INPUT = TopicPartition("input", 0)



_CLIENT_CALLS = ("initTransactions", "beginTransaction", "sendOffsetsToTransaction", "commitTransaction",
                 "abortTransaction")


class ImplAdapter(FaultSteps):
    observes = ("visible", "offsets", "errors", "sent")

    def __init__(self, rules: Any = None) -> None:
        self.rules = rules  # the implementation's rules (txnspec.impl.policy.Rules); None: Kafka's
        self.cluster: Any = None
        self.producers: dict[Any, tuple[str, Any]] = {}  # by the spec producer's address
        self.partitions: tuple[str, ...] = ()
        self.group = "g"
        self.txn_no: dict[Any, int] = {}
        self.results: list[Any] = []  # the clients' pending TransactionalRequestResults
        self.marker_answers: list[tuple[Any, Any]] = []  # (marker, error) appended, answer not yet delivered
        self.handles: dict[Any, Any] = {}  # spec producer -> the live instance's ProducerHandle
        self.transactional_ids: dict[Any, str] = {}
        self.instances: dict[Any, list[str]] = {}  # spec producer -> client name of each incarnation
        self.lost: list[Any] = []  # messages of producers lost and not yet timed out
        self.lost_markers: list[Any] = []  # markers lost, or whose answer was lost, not yet re-sent
        self.group_members: GroupMembers | None = None  # the producers' consumers (KIP-447 scenarios)
        self.budget: dict[str, int] = {}  # faults left in the scenario's budget
        self.reads: VisibleReads | None = None  # what consumers read, cached while a partition is unchanged
        self.offsets_partition = ""
        self.spec_partitions: tuple[str, ...] = ()
        # the broker's partition of each spec partition: a spec topic's only partition (``p0`` -> ``p0-0``), the
        # group's offsets partition the broker's own for the group (the same Utils.abs(hashCode) % 50)
        self.broker_partition: dict[str, TopicPartition] = {}
        self.group_ids: tuple[str, ...] = ()
        self.generation_offset = 0  # see impl_messages.Names
        # KIP-939: the producers enable 2PC; each producer's external coordinator's durable record (the
        # PreparedTxnState stored with a commit decision, None for an abort), which survives a crash
        self.two_phase_commit = False
        self.recorded: dict[str, tuple[int, int] | None] = {}

    def reset(self, scenario: str, variant: str = "current") -> None:
        from txnspec.impl.broker import BrokerConfig
        from txnspec.impl.cluster import Cluster
        from txnspec.impl.policy import KAFKA
        from txnspec.spec.model import build_system
        from txnspec.spec.system import initial_state

        system = build_system(scenario, variant)
        s = system.scenario
        # the scenario's epoch bound stands for Short.MAX_VALUE in the spec: the broker gets the same bound, so
        # epoch exhaustion (and the producer-id rotation after it) comes at the same step in both
        self.two_phase_commit, self.recorded = s.two_phase_commit, {}
        self.cluster = Cluster(transaction_version=s.transaction_version,
                               config=BrokerConfig(max_producer_epoch=s.max_epoch,
                                                   num_txn_log_partitions=s.txn_log_partitions,
                                                   transaction_two_phase_commit_enable=s.two_phase_commit),
                               rules=self.rules or KAFKA)
        self.partitions, self.group = s.partitions, s.group_id
        self.offsets_partition = system.offsets_partition
        self.abstraction_differences = {**type(self).abstraction_differences, **differences(s.transaction_version)}
        self.spec_partitions = tuple(name for name, _ in initial_state(system).partitions)
        self.group_ids = tuple(g.group_id for g in initial_state(system).group.groups)
        self.broker_partition = {p: TopicPartition(p, 0) for p in self.partitions}
        if self.offsets_partition in self.spec_partitions:
            group_coordinator = self.cluster.broker.group_coordinator
            self.broker_partition[self.offsets_partition] = group_coordinator.partition_for(s.group_id)
        self.producers, self.txn_no, self.results, self.marker_answers = {}, {}, [], []
        self.handles, self.instances, self.lost, self.lost_markers = {}, {}, [], []
        self.max_in_flight = s.max_in_flight
        self.budget = {fault: s.budget(fault) for fault in FAULT_BUDGET.values()}
        self.reads = VisibleReads(self.cluster)
        for p in initial_state(system).producers:
            self._start_producer(producer_address(p.index), p.transactional_id)
            self.txn_no[producer_address(p.index)] = 0
        self.generation_offset = 0
        self.group_members = GroupMembers(self.cluster.broker.membership, s.group_id)
        if s.group_protocol == "consumer":
            members = {producer_address(p.index): p.member_id for p in initial_state(system).producers}
            self.generation_offset = consumer_group.form(self, members) - s.initial_generation
        elif s.group_members:
            self.group_members.form(list(self.producers))
            self.generation_offset = self.cluster.broker.membership.groups[self.group].generation_id \
                - s.initial_generation

    @property
    def members(self) -> dict[Any, Any]:
        """Each spec producer's consumer's MemberIdentity in the group (empty outside KIP-447 scenarios)."""
        return self.group_members.members if self.group_members is not None else {}

    def members_of_group(self) -> GroupMembers:
        if self.group_members is None:
            raise RuntimeError("reset() the adapter before applying steps")
        return self.group_members

    def _start_producer(self, who: Any, transactional_id: str) -> None:
        handle = self.cluster.producer(transactional_id, enable_two_pc=self.two_phase_commit)
        # the spec's producer sends each record in its own Produce, up to the scenario's max_in_flight per
        # partition (spec/producer.py): batch.size of one record and max.in.flight.requests.per.connection
        handle.producer.batch_records = 1
        handle.producer.max_in_flight = self.max_in_flight
        handle.producer.retry_backoff = True  # a batch is retried at the spec's retry step, not before
        self.producers[who] = (handle.name, handle.producer)
        self.handles[who] = handle
        self.transactional_ids[who] = transactional_id
        self.instances.setdefault(who, []).append(handle.name)

    def _clients(self, who: Any, tag: Any) -> set[str]:
        """The implementation's client names of spec producer ``who``: the instance of the message's tag
        (producer, incarnation, transaction), or every instance for a message without one."""
        names = self.instances[who]
        if tag is not None and tag[1] < len(names):
            return {names[tag[1]]}
        return set(names)

    # --- steps ---

    def _pump(self) -> None:
        """Queue what the clients send, and deliver FindCoordinator (not in the spec) at once."""
        cluster = self.cluster
        for _ in range(100):
            cluster._dispatch()
            pending = [m for m in cluster.network.messages if isinstance(m.request, implm.FindCoordinator)]
            if not pending:
                return
            cluster.deliver(pending[0])

    def _ack(self) -> None:
        """The application learns the outcome of its completed calls (``result.await()`` in Kafka)."""
        from txnspec.impl.errors import KafkaException

        still = []
        for result in self.results:
            if result.completed:
                with contextlib.suppress(KafkaException):  # the client's state tells the application the rest
                    result.result()
            else:
                still.append(result)
        self.results = still

    def names(self) -> Names:
        """How the spec names the implementation's clients, partitions and members (the message mapping's)."""
        instance_of = {name: who for who, names in self.instances.items() for name in names}
        members = {m.member_id: f"member-{who.index}" for who, m in self.members.items()}
        return Names(instance_of.get, {self.broker_partition[p]: p for p in self.partitions}, members,
                     self.offsets_partition, self.generation_offset)

    def _in_flight(self) -> list[tuple[Any, Envelope]]:
        names = self.names()
        out = []
        for m in self.cluster.network.messages:
            translated = spec_envelope(m, names)
            if translated is not None:
                out.append((m, translated))
        return out

    def _match(self, step: Any) -> Any:
        """The implementation's message in flight that is the step's message, field by field: source, target and
        every body field equal (through :mod:`.impl_messages`), of the producer instance the trace names; a marker
        also of the transactional id the trace names. Raises the divergence naming the first differing field."""
        envelope = step.action.message
        in_flight = self._in_flight()
        candidates = [m for m, e in in_flight if same(envelope, e) and self._same_instance(m, envelope)]
        if not candidates:
            raise self._not_enabled(step, describe_mismatch(envelope, [e for _, e in in_flight]))
        client_side = envelope.target if envelope.target in self.producers else envelope.source
        if client_side in self.producers and len(candidates) > 1:
            # equal copies (a duplicated request, or answers to two copies): the trace says whether the spec
            # delivered the copy its producer awaits or a stale one
            producer = self.producers[client_side][1]
            txn_request = producer.in_flight_txn[0] if producer.in_flight_txn is not None else None
            awaited = [m for m in candidates if m.request is txn_request
                       or getattr(m.request, "correlation_id", None) in producer.in_flight_produce]
            stale = [m for m in candidates if m not in awaited]
            candidates = stale + awaited if step.action.awaited is False else awaited + stale
        return candidates[0]

    def _same_instance(self, m: Any, envelope: Envelope) -> bool:
        if isinstance(m.request, TxnMarker):  # two ids may have markers on their way to one partition
            return bool(m.request.transactional_id == envelope.context[0])
        client_side = envelope.target if envelope.target in self.producers else envelope.source
        return client_side not in self.producers or m.client in self._clients(client_side, envelope.tag)

    def _same_partition(self, impl_name: str, spec_name: str) -> bool:
        """Whether a marker's partition is the spec's: any offsets partition is the group's (the spec names one)."""
        if spec_name in self.partitions:
            return impl_name == self.broker_partition[spec_name]
        return TopicPartition.of(impl_name).topic == GROUP_METADATA_TOPIC

    def _not_enabled(self, step: Any, why: str = "") -> StepNotEnabledError:
        pending = [repr(m) for m in self.cluster.network.messages]
        return StepNotEnabledError(f"{step.action}" + (f" ({why})" if why else ""), pending)

    def apply(self, step: Any) -> dict[str, Any]:
        from txnspec.impl.errors import InvalidRequestError, KafkaException

        if self.cluster is None:
            raise RuntimeError("reset() the adapter before applying steps")
        before = {m.id for m in self.cluster.network.messages}
        answers_before = len(self.marker_answers)
        action = step.action
        kind = action.kind
        if producer_index(action.actor) is not None and action.actor not in self.producers:
            raise self._not_enabled(step, f"the scenario has no {action.actor}")
        fault = FAULT_BUDGET.get(kind)
        if fault is not None:
            if self.budget[fault] <= 0:
                raise self._not_enabled(step, f"the scenario's budget allows no more {fault} faults")
            self.budget[fault] -= 1
        if kind in APPLICATION_CALLS:
            who = action.actor
            _, p = self.producers[who]
            self._ack()
            pending = p.tm.pending_transition
            if kind in BLOCKING_CALLS and pending is not None and not pending[0].acked:
                # Kafka hands the pending call's result back (TransactionManager.handleCachedTransactionRequestResult):
                # the application re-awaits a call that timed out, which the spec's application never does
                raise self._not_enabled(step, f"{pending[2]} is still pending: the call would re-await its result")
            result = None
            try:
                if kind is K.INIT_TRANSACTIONS:
                    # a 2PC instance restarted after a crash keeps the prepared transaction (as the spec's)
                    result = p.init_transactions(keep_prepared_txn=self.two_phase_commit
                                                 and len(self.instances[who]) > 1)
                elif kind is K.PREPARE_TRANSACTION:
                    p.prepare_transaction()
                elif kind is K.DECIDE_COMMIT:  # the external coordinator stores the client's PreparedTxnState
                    self.recorded[who] = p.tm.prepared_txn_state
                elif kind is K.DECIDE_ABORT:
                    self.recorded[who] = None
                elif kind is K.COMPLETE_TRANSACTION:
                    result = p.complete_transaction(self.recorded.get(who) or (-1, -1))
                elif kind is K.BEGIN_TRANSACTION:
                    p.begin_transaction()
                    self.txn_no[who] += 1
                elif kind is K.SEND:
                    p.send(self.broker_partition[action.partition], b"v")
                elif kind is K.SEND_OFFSETS_TO_TRANSACTION:
                    result = p.send_offsets_to_transaction({INPUT: self.txn_no[who]}, self.group,
                                                           self.members.get(who))
                elif kind is K.COMMIT_TRANSACTION:
                    result = p.commit_transaction()
                else:
                    result = p.abort_transaction()
            except KafkaException as exc:
                raise self._not_enabled(step, f"the client refused: {type(exc).__name__}: {exc}") from None
            if result is not None:
                self.results.append(result)
        elif kind is K.DELIVER_WRITE_TXN_MARKERS_RESPONSE:
            marker, error = self._take_marker_answer(step)
            self.cluster.broker.txn_coordinator.marker_channel.on_marker_response(marker, error, self.cluster.now_ms)
            self.cluster._dispatch()
        elif kind is K.DELIVER_WRITE_TXN_MARKERS:
            m = self._match(step)
            # the leader appends the marker now; its answer flies back as the spec's next step says
            self.cluster.network.messages.remove(m)
            self.marker_answers.append((m.request, self.cluster.broker.append_marker(m.request, self.cluster.now_ms)))
            self.cluster._dispatch()
        elif action.is_delivery:
            m = self._match(step)
            self.cluster.deliver(m)
        elif kind is K.RETRY and isinstance(action.body, spec.Produce):
            # a lost produce (or its lost answer): the client's request timeout fires first; then retry.backoff.ms
            # elapses and the client's Sender drains the batch waiting for its retry if it is the first in flight
            name, producer = self.producers[action.actor]
            partition = self.broker_partition[action.message.target]
            lost = [m for m in self.lost if m.client == name and isinstance(m.request, implm.Produce)
                    and m.request.partition == partition]
            if lost:
                self.lost.remove(lost[-1])
                self.cluster.time_out(lost[-1])
            producer.end_retry_backoff(partition, action.body.base_sequence)  # the step's batch only
            self.cluster._dispatch()
            self._match(step)  # the client sent that batch again, field by field
        elif kind is K.DUPLICATE:
            m = self._match(step)
            self.cluster.network.send(m.client, m.request, m.response)
        elif kind in (K.TIMEOUT, K.ABANDONED_TIMEOUT):  # the transaction timeout fires (abandoned: nobody ends it)
            # for the action's transactional id only: the spec's time is abstract, so another id's open
            # transaction has not necessarily timed out too
            self.cluster.now_ms += 60_001
            self.cluster.broker.tick(self.cluster.now_ms, timed_out=action.transactional_id)
            self.cluster._queue_markers()
        elif kind is K.EXPIRE_BATCH:
            _, producer = self.producers[action.actor]
            try:
                producer.expire_batch(self.broker_partition[action.partition],
                                      action.batch[3] if action.batch else None)
            except InvalidRequestError as exc:
                raise self._not_enabled(step, str(exc)) from None
        elif kind is K.FAILOVER:
            # markers the old coordinator already sent stay on their way to the leaders (the spec keeps them;
            # the new coordinator ignores answers of an older coordinator epoch)
            sent = [m for m in self.cluster.network.messages if isinstance(m.request, TxnMarker)]
            self.cluster.crash_coordinator()
            self.cluster.restart_coordinator()
            self.cluster.network.messages[:0] = sent
        elif kind is K.RESIGN:  # the coordinator loses every transaction-log partition; its markers stay in flight
            tc = self.cluster.broker.txn_coordinator
            for index in range(len(tc.txn_manager.log_partitions)):
                tc.emigrate(index)
        elif kind is K.ELECT:  # a new coordinator epoch leads the partitions nobody leads and starts loading them
            tc = self.cluster.broker.txn_coordinator
            tc.begin_load(set(tc.txn_manager.not_led), tc.coordinator_epoch + 1)
        elif kind is K.LOAD_TXN_PARTITION:  # one partition's load finishes: its prepared transactions' markers go
            loaded = TopicPartition.parse(action.partition)  # a trace names it: __transaction_state-N
            if loaded is None:
                raise StepNotEnabledError(action, [])  # a trace naming no transaction-log partition
            self.cluster.broker.txn_coordinator.finish_load(loaded.partition, self.cluster.now_ms)
            self.cluster._queue_markers()
        elif kind is K.LOSE:
            self._lose(step)
        elif kind is K.RETRY:
            self._retry(step)
        elif kind is K.RESEND_MARKER:
            self._resend_marker(step)
        elif kind is K.APPEND_FAILS:
            self._append_fails(step)
        elif kind is K.CRASH:
            self._crash(action.actor)
        elif kind is K.REBALANCE and self.cluster.broker.consumer_groups.groups:
            consumer_group.fence(self, action.actor)
        elif kind is K.REBALANCE:
            self.members_of_group().rebalance(action.actor)
        elif kind is K.REASSIGN:
            consumer_group.reassign(self, action.actor)
        elif kind is K.HEARTBEAT:
            consumer_group.heartbeat(self, action.actor)
        elif kind is K.EXPIRE_PRODUCERS:  # producer.id.expiration.ms passes for the partition's idle producers
            partition = self.cluster.broker.partition(self.broker_partition[action.partition])
            partition.remove_expired_producers(self.cluster.now_ms + partition.producer_state.producer_id_expiration_ms)
        elif kind is K.ADMIN_ABORT:  # Admin.abortTransaction: the admin's WriteTxnMarkers, straight to the leader
            self._admin_abort(action.body)
        elif kind is K.EXPIRE_TRANSACTIONAL_ID:  # transactional.id.expiration.ms passes for the idle ids
            self.cluster.broker.txn_coordinator.expire_transactional_ids(self.cluster.now_ms, 0)
        elif kind is K.OFFSET_COMMIT:  # an admin's plain commit of the input offset, outside group management
            from txnspec.impl.membership import MemberIdentity

            self.cluster.broker.group_coordinator.handle_offset_commit(self.group, {INPUT: 0},
                                                                       now_ms=self.cluster.now_ms,
                                                                       member=MemberIdentity())
        else:
            raise self._not_enabled(step, f"the step {kind.value!r} is not mapped onto the implementation")
        self._pump()
        self._ack()
        observed = self.observe()
        # the error codes of the answers this step produced (a duplicate only copies a message)
        answers = [] if kind is K.DUPLICATE else \
            [m.response.error for m in self.cluster.network.messages if m.id not in before and m.response is not None]
        answers += [error for _, error in self.marker_answers[answers_before:]]
        observed["errors"] = sorted(e.name for e in answers if e.name != "NONE")
        observed["sent"] = self._sent(before, answers_before)
        return observed

    def _sent(self, before: set[int], answers_before: int) -> list[dict[str, Any]]:
        """What this step put in flight, as the spec's messages (source, target, body), in a canonical order."""
        names = self.names()
        sent = [spec_envelope(m, names) for m in self.cluster.network.messages if m.id not in before]
        sent += [marker_answer(marker, error, names) for marker, error in self.marker_answers[answers_before:]]
        return [plain(e) for e in sorted((e for e in sent if e is not None), key=key)]

    def _take_marker_answer(self, step: Any) -> tuple[Any, Any]:
        """The (marker, error) answered by the partition the step's WriteTxnMarkersResponse comes from."""
        tid, coordinator_epoch, source = step.action.message.context  # the marker's partition and sender's epoch
        # two transactional ids may send markers to one partition (the group's), and after a failover the old and
        # the new coordinator's markers of one transaction may both be answered: match all three
        answered = next((a for a in self.marker_answers
                         if self._same_partition(a[0].partition, source) and a[0].transactional_id == tid
                         and a[0].coordinator_epoch == coordinator_epoch), None)
        if answered is None:
            raise self._not_enabled(step, "no marker answer from that partition")
        expected = step.action.message
        actual = marker_answer(answered[0], answered[1], self.names())
        if not same(expected, actual):
            raise self._not_enabled(step, describe_mismatch(expected, [actual]))
        self.marker_answers.remove(answered)
        return answered

    # --- observation ---

    def observe(self) -> dict[str, Any]:
        assert self.reads is not None, "reset() the adapter first"
        visible = {p: {"read_committed": self.reads.offsets(self.broker_partition[p], "READ_COMMITTED"),
                       "read_uncommitted": self.reads.offsets(self.broker_partition[p], "READ_UNCOMMITTED")}
                   for p in self.spec_partitions}
        _, committed = self.cluster.broker.group_coordinator.fetch_offsets(self.group, [INPUT])
        return {"visible": visible, "offsets": {f"{self.group}/{tp}": off for tp, off in committed.items()}}

    def project(self, expected: dict[str, Any]) -> dict[str, Any]:
        """The part of the spec's observation this adapter reports."""
        visible = expected.get("visible", {})
        return {"visible": {p: visible[p] for p in self.spec_partitions if p in visible},
                "offsets": expected.get("offsets", {}), "errors": expected.get("errors", []),
                "sent": sorted((compared_json(m) for m in expected.get("sent", [])),
                               key=lambda m: json.dumps(m, sort_keys=True))}

    abstraction_differences: dict[PathPattern | str, str] = DIFFERENCES  # the reset sets the table of its cluster

    def abstract_state(self) -> AbstractState:
        """The implementation's state as the spec's abstraction (:mod:`.impl_abstraction`)."""
        producers = {who: p for who, (_, p) in self.producers.items()}
        return of_cluster(self.cluster, self.names(), producers, self.broker_partition, self.txn_no,
                          self.generation_offset, self.group_ids)
