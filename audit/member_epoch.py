"""KIP-848's member-epoch fencing of transactional offset commits, through real clients: consumers of the
``consumer`` group protocol (librdkafka's, ``group.protocol=consumer``) and a transactional producer that
commits their positions with ``sendOffsetsToTransaction(offsets, consumer.groupMetadata())``.

The rule, step by step (bounded waits on the consumers' heartbeats):

1. consumer A joins a fresh group alone and is assigned both partitions of a fresh two-partition topic; its
   group metadata ``M`` (member id, member epoch E) is kept;
2. a transaction commits partition 0's offset with ``M``: accepted (the member's epoch);
3. consumer B joins: the target moves one partition to B; A revokes it and its epoch moves past E;
4. a transaction commits the partition A lost, with ``M``: refused (STALE_MEMBER_EPOCH, which a TxnOffsetCommit
   before v6 answers ILLEGAL_GENERATION): the client aborts;
5. a transaction commits the partition A kept, with ``M``: accepted (KIP-1251: A has held it since E);
6. A leaves the group; a transaction commits the kept partition with ``M``: refused (UNKNOWN_MEMBER_ID);
7. the group's committed offsets are those of the accepted commits only.

Expected answers come from the spec (:func:`txnspec.spec.consumer_group.validate_offset_commit` on the group
as the steps leave it, :func:`~txnspec.spec.consumer_group.fence_member` for the leave), at the TxnOffsetCommit
version librdkafka sends (:data:`CLIENT_TXN_OFFSET_COMMIT_VERSION`: below 6, so a stale epoch is
ILLEGAL_GENERATION there). Which partition A keeps is the broker's assignor's choice: the rule reads it from A's
assignment and asks the spec about that one.

A broker whose ApiVersions lacks CreateTopics or ConsumerGroupHeartbeat (KIP-848's protocol) cannot run the
rule: it is not checked, with a note naming what is not offered, at once (a consumer of the ``consumer`` protocol
would otherwise wait :data:`WAIT_SECONDS` for an assignment that never comes).

Left out: the Java client (whose TxnOffsetCommit v6 would answer STALE_MEMBER_EPOCH), a session timeout
(45 s by default: the leave fences the member the same way, ``consumerGroupFenceMember`` either way), static
members.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from txnspec.audit.report import RuleResult
from txnspec.impl.errors import Errors as WireErrors
from txnspec.spec import consumer_group as cg
from txnspec.spec.errors import Errors

RULE = "group.member_epoch_fencing"
DESCRIPTION = ("KIP-848: a TxnOffsetCommit with a consumer's group metadata is accepted at the member's epoch and, "
               "for a partition held since, at an older one; refused for a partition the member lost since "
               "(STALE_MEMBER_EPOCH, ILLEGAL_GENERATION below v6) and once the member left (UNKNOWN_MEMBER_ID); "
               "refused commits leave the committed offsets as they were")
CLIENT_TXN_OFFSET_COMMIT_VERSION = 3  # librdkafka's TxnOffsetCommit (rdkafka_txnmgr: v3, KIP-447's member fields)
WAIT_SECONDS = 60.0  # a reassignment takes a few heartbeats (group.consumer.heartbeat.interval.ms: 5 s)
A, B = "member-a", "member-b"
NAMES = {e.code: e.name for e in WireErrors}  # a broker error's wire code -> its name (librdkafka keeps the code)


@dataclass(frozen=True)
class Expected:
    current: Errors
    lost: Errors
    kept: Errors
    after_leave: Errors


def expected(kept: int, lost: int, topic: str) -> Expected:
    """The spec's answers: A at epoch 1 with both partitions; B's join moves ``lost`` to B at epoch 2 and A,
    having revoked it, to epoch 2 holding ``kept`` since 1; then A leaves."""
    parts = {i: f"{topic}-{i}" for i in (kept, lost)}
    group = cg.ConsumerGroup("g", partitions=tuple(sorted(parts.values())))
    group, _ = cg.heartbeat(group, A, 0, ())
    v = CLIENT_TXN_OFFSET_COMMIT_VERSION

    def check(g: cg.ConsumerGroup, partition: int) -> Errors:
        return cg.validate_offset_commit(g, A, None, 1, True, (parts[partition],), v)

    current = check(group, 0)
    moved = cg.new_target(cg.with_member(group, cg.ConsumerMember(B, 0)), ((parts[kept], A), (parts[lost], B)))
    moved, _ = cg.heartbeat(moved, A, 1, (parts[kept], parts[lost]))  # revoking
    moved, _ = cg.heartbeat(moved, A, 1, (parts[kept],))  # revoked: A at epoch 2
    moved, _ = cg.heartbeat(moved, B, 0, ())
    return Expected(current, check(moved, lost), check(moved, kept), check(cg.fence_member(moved, A), kept))


def _wait(consumers: list[Any], done: Callable[[], bool], seconds: float = WAIT_SECONDS) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(0.2)
        if done():
            return True
    return False


def run_member_epoch_rule(bootstrap: str, run: str) -> RuleResult:
    """The rule against the broker at ``bootstrap`` (names made unique by ``run``); a broker without the
    consumer group protocol, or a client error outside the rule's requests, leaves it unchecked with a note."""
    try:
        from confluent_kafka import KafkaException
    except ImportError:
        return RuleResult("client", RULE, DESCRIPTION, note="not checked: confluent-kafka is not installed")
    missing = _not_offered(bootstrap)
    if missing:
        return RuleResult("client", RULE, DESCRIPTION, note=f"not checked: the broker does not offer {missing}")
    try:
        return _run(bootstrap, run)
    except KafkaException as exc:
        return RuleResult("client", RULE, DESCRIPTION, note=f"not checked: the client failed: {exc.args[0]}")
    except TimeoutError:  # an admin future (CreateTopics) never answered: librdkafka's mock cluster
        return RuleResult("client", RULE, DESCRIPTION, note="not checked: the broker did not answer the client's "
                                                            "admin request within 30 s")


def _not_offered(bootstrap: str) -> str:
    """The requests the rule needs that the broker's ApiVersions leaves out, named ("" when it offers them all,
    or cannot be asked: the client's own error says why then)."""
    from kafka.protocol.api_key import ApiKey

    from txnspec.audit.connection import BrokerConnection, WireError
    from txnspec.audit.report import BrokerUnavailable

    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    try:
        conn = BrokerConnection(host.strip("[]"), int(port))
    except (BrokerUnavailable, WireError, OSError, ValueError):
        return ""
    conn.close()
    needed = (ApiKey.CreateTopics, ApiKey.ConsumerGroupHeartbeat)  # Kafka's ApiKeys.CREATE_TOPICS, ...
    return " or ".join(key.name for key in needed if key not in conn.versions)


def _run(bootstrap: str, run: str) -> RuleResult:
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    result = RuleResult("client", RULE, DESCRIPTION)
    topic, group, tid = f"kip848-in-{run}", f"kip848-g-{run}", f"kip848-t-{run}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept referenced until its futures complete
    for future in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        future.result(30)
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
            "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    a = Consumer(conf)
    a.subscribe([topic])
    consumers = [a]
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    try:
        if not _wait(consumers, lambda: len(a.assignment()) == 2):
            result.note = "not checked: the first consumer was never assigned both partitions"
            return result
        metadata = a.consumer_group_metadata()
        producer.init_transactions(30)

        def commit(partition: int, offset: int) -> str:
            """The error name of the commit's TxnOffsetCommit (the client aborts a refused one)."""
            producer.begin_transaction()
            try:
                producer.send_offsets_to_transaction([TopicPartition(topic, partition, offset)], metadata, 30)
            except KafkaException as exc:
                producer.abort_transaction(30)
                code = exc.args[0].code()
                return NAMES.get(code, f"code {code}")
            producer.commit_transaction(30)
            return Errors.NONE.value

        answers = {"current": commit(0, 10)}
        b = Consumer(conf)
        b.subscribe([topic])
        consumers.append(b)
        if not _wait(consumers, lambda: len(a.assignment()) == 1 and len(b.assignment()) == 1):
            result.note = "not checked: the second consumer's join never moved a partition"
            return result
        kept = a.assignment()[0].partition
        lost = 1 - kept
        answers["lost"] = commit(lost, 20)
        answers["kept"] = commit(kept, 30)
        a.close()
        consumers.remove(a)
        answers["after_leave"] = commit(kept, 40)
        want = expected(kept, lost, topic)
        committed = {tp.partition: tp.offset for tp in b.committed([TopicPartition(topic, i) for i in (0, 1)], 30)}
        # the accepted commits' offsets, in order: a refused one writes nothing
        accepted: dict[int, int] = {}
        for step, (partition, offset) in (("current", (0, 10)), ("lost", (lost, 20)), ("kept", (kept, 30)),
                                          ("after_leave", (kept, 40))):
            if getattr(want, step) is Errors.NONE:
                accepted[partition] = offset
        for step, answer in answers.items():
            result.checked += 1
            if answer != getattr(want, step).value:
                result.violations += 1
                result.examples.append({"step": step, "kept": kept, "expected": getattr(want, step).value,
                                        "answer": answer})
        result.checked += 1
        if {p: o for p, o in committed.items() if o >= 0} != accepted:
            result.violations += 1
            result.examples.append({"step": "committed", "expected": accepted, "answer": committed})
        return result
    finally:
        for c in consumers:
            c.close()
        producer.flush(5)
