"""KIP-848's ConsumerGroupHeartbeat (API key 68, versions 0-1 as Kafka 4.4 advertises them) on
:class:`txnspec.impl.consumer_groups.ConsumerGroups`: a consumer with ``group.protocol=consumer`` joins, is
assigned partitions and reconciles through it; its offset commits (``TxnOffsetCommit``'s generation id is its
member epoch) are checked by member epoch in the implementation's group coordinator.

The request as ``GroupMetadataManager.consumerGroupHeartbeat`` reads it: topics by name in
``SubscribedTopicNames`` (null: unchanged), owned partitions by topic id in ``TopicPartitions`` (null: unchanged);
the answer names topics by id (``Metadata`` v10+ gives the ids: ``Topic.topic_id``). The request checks of
``throwIfConsumerGroupHeartbeatRequestIsInvalid`` that matter here: a group id, a member id from v1 on (KIP-1082:
the consumer generates it; v0 gets one from the coordinator at epoch 0), a subscription and a rebalance timeout
to join. Every heartbeat reads the subscribed topics' current partition counts, so a topic created or grown
later is assigned (``hasMetadataExpired``'s refresh, here on every heartbeat).

The message classes (:mod:`txnspec.serve.protocol`) are kafka-python's, loaded from ``serve/schemas/`` (Kafka
4.4's ``ConsumerGroupHeartbeatRequest.json`` and ``ConsumerGroupHeartbeatResponse.json``): kafka-python ships
no schema for API key 68.

Left out: regular-expression subscriptions (``SubscribedTopicRegex``: INVALID_REQUEST), static membership
beyond passing the instance id, server assignors (one uniform round robin), rack ids,
ConsumerGroupDescribe (API key 69).
"""

from __future__ import annotations

from typing import Any

from txnspec.impl.errors import Errors
from txnspec.impl.topic_partition import TopicPartition
from txnspec.serve.broker import Handler, WireBroker
from txnspec.serve.protocol import ConsumerGroupHeartbeatResponse, Request

R = ConsumerGroupHeartbeatResponse


def _answer(v: int, error: Errors, member_id: str | None = None, member_epoch: int = -1,
            message: str | None = None, interval_ms: int = 0, assignment: Any = None) -> Any:
    return R(version=v, throttle_time_ms=0, error_code=error.code, error_message=message, member_id=member_id,
             member_epoch=member_epoch, heartbeat_interval_ms=interval_ms, assignment=assignment)


def _invalid(body: Any, v: int) -> str | None:
    """``throwIfConsumerGroupHeartbeatRequestIsInvalid``'s checks that apply here: the reason, or None."""
    if not body.group_id:
        return "GroupId can't be empty."
    if v >= 1 and not body.member_id:
        return "MemberId can't be empty."
    if getattr(body, "subscribed_topic_regex", None):
        return "SubscribedTopicRegex is not supported by txnspec serve."
    if body.member_epoch == 0:
        if body.rebalance_timeout_ms == -1:
            return "RebalanceTimeoutMs must be provided in first request."
        if body.topic_partitions is None or body.topic_partitions:
            return "TopicPartitions must be empty when (re-)joining."
        if body.subscribed_topic_names is None:
            return "SubscribedTopicNames must be set in first request."
    elif body.member_epoch < -2:
        return f"MemberEpoch is {body.member_epoch}, but must be greater than or equal to -2."
    return None


def handle_consumer_group_heartbeat(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    if not wb.coordinates_group(request, body.group_id):
        return _answer(v, Errors.NOT_COORDINATOR)
    reason = _invalid(body, v)
    if reason is not None:
        return _answer(v, Errors.INVALID_REQUEST, message=reason)
    groups = wb.broker.consumer_groups
    if body.group_id in wb.broker.membership.groups:  # a classic group of that id: no consumer member joins it
        return _answer(v, Errors.GROUP_ID_NOT_FOUND, message=f"Group {body.group_id} is not a consumer group.")
    names = {t.topic_id: name for name, t in wb.topics.items()}
    owned = None
    if body.topic_partitions is not None:
        owned = tuple(TopicPartition(names[t.topic_id], int(p)) for t in body.topic_partitions
                      if t.topic_id in names for p in t.partitions)
    subscribed = None if body.subscribed_topic_names is None else tuple(body.subscribed_topic_names)
    group = groups.groups.get(body.group_id)
    member = group.members.get(body.member_id) if group is not None else None
    topics = subscribed if subscribed is not None else (member.subscribed if member is not None else ())
    partitions = {t: tuple(TopicPartition(t, i) for i in range(wb.topics[t].partitions))
                  for t in topics if t in wb.topics}
    result = groups.heartbeat(body.group_id, body.member_id, int(body.member_epoch), subscribed, owned, wb.now(),
                              instance_id=body.instance_id, subscribed_partitions=partitions)
    wb.changes += 1
    if result.error is not Errors.NONE:
        return _answer(v, result.error, body.member_id)
    assignment = None
    if result.assignment is not None:
        by_topic: dict[str, list[int]] = {}
        for tp in result.assignment:
            p = TopicPartition.of(tp)
            by_topic.setdefault(p.topic, []).append(p.partition)
        assignment = R.Assignment(topic_partitions=[
            R.Assignment.TopicPartitions(topic_id=wb.topics[t].topic_id, partitions=sorted(ps))
            for t, ps in sorted(by_topic.items()) if t in wb.topics])
    return _answer(v, Errors.NONE, result.member_id, result.member_epoch,
                   interval_ms=result.heartbeat_interval_ms, assignment=assignment)


HANDLERS: dict[str, Handler] = {"ConsumerGroupHeartbeat": handle_consumer_group_heartbeat}
