"""Topic and cluster admin as the controller and ``ConfigAdminManager`` answer it: CreateTopics (configs
validated and kept, :mod:`.configs`), DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs and
IncrementalAlterConfigs (topics; the broker's few configs described read-only), DescribeCluster.

Checks follow ``ReplicationControlManager`` / ``ControllerConfigurationValidator`` in their order and Kafka's
messages: an invalid or internal name, an existing topic, assignments with a count or a replication factor, a
replica other than node 0, a count below 1, a replication factor other than 1 (one broker), then the configs
(INVALID_CONFIG). A deleted topic's partitions leave the implementation (their logs, cached batches and the
groups' offsets of them); a marker a transaction still owes a deleted partition is written to an orphan log
that no topic names (Kafka drops it). Left out: topic ids in requests (DeleteTopics v6 by id answers
UNKNOWN_TOPIC_ID for an id it does not know), ACLs (authorized operations are not reported), broker-level
config changes (refused INVALID_REQUEST), configs kept across a ``--durable`` restart.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from kafka.protocol.admin.cluster import DescribeClusterResponse
from kafka.protocol.admin.configs import AlterConfigsResponse, DescribeConfigsResponse, IncrementalAlterConfigsResponse
from kafka.protocol.admin.topics import CreatePartitionsResponse, CreateTopicsResponse, DeleteTopicsResponse

from txnspec.impl.topic_partition import TopicPartition
from txnspec.serve import configs
from txnspec.serve.broker import (
    CLUSTER_ID,
    INTERNAL_TOPICS,
    Handler,
    WireBroker,
    topic_name_problem,
)
from txnspec.serve.codes import Code
from txnspec.serve.configs import ConfigError, ConfigType, Value
from txnspec.serve.protocol import Request

TOPIC, BROKER = 2, 4  # ConfigResource.Type
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3  # AlterConfigOp.OpType


# --- topics -------------------------------------------------------------------------------------------------

def _create_problem(wb: WireBroker, t: Any, count: int) -> tuple[Code, str | None, dict[str, Value]]:
    """Why one topic of a CreateTopics cannot be created, or NONE with its parsed configs."""
    if topic_name_problem(t.name) or t.name in INTERNAL_TOPICS:
        return Code.INVALID_TOPIC_EXCEPTION, topic_name_problem(t.name) or f"{t.name} is internal", {}
    if t.name in wb.topics:
        return Code.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.", {}
    if t.assignments and (t.num_partitions != -1 or t.replication_factor != -1):
        return Code.INVALID_REQUEST, ("Both numPartitions or replicationFactor and replicasAssignments were set. "
                                      "Both cannot be used at the same time."), {}
    nodes = wb.nodes.count
    if t.assignments and any(not a.broker_ids or set(a.broker_ids) - set(range(nodes)) for a in t.assignments):
        return Code.INVALID_REPLICA_ASSIGNMENT, f"The brokers are 0..{nodes - 1}.", {}
    if count < 1:
        return Code.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.", {}
    if not (int(t.replication_factor) == -1 or 1 <= int(t.replication_factor) <= nodes):
        return Code.INVALID_REPLICATION_FACTOR, (f"Unable to replicate the partition {t.replication_factor} time(s): "
                                                 f"The target replication factor of {t.replication_factor} cannot be "
                                                 f"reached because only {nodes} broker(s) are registered or some "
                                                 "brokers have all their log directories cordoned."), {}
    try:
        return Code.NONE, None, configs.parse_all({c.name: c.value for c in t.configs or ()})
    except ConfigError as exc:
        return Code.INVALID_CONFIG, str(exc), {}


def handle_create_topics(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    R = CreateTopicsResponse
    results = []
    for t in body.topics:
        count = len(t.assignments) if t.assignments else (
            wb.config.default_partitions if t.num_partitions == -1 else int(t.num_partitions))
        code, message, given = _create_problem(wb, t, count)
        if code is Code.NONE and not body.validate_only:
            wb.create_topic(t.name, count, given)
        topic = wb.topics.get(t.name)
        described = [] if code is not Code.NONE else [  # v5+: the topic's configs, as DescribeConfigs
            R.CreatableTopicResult.CreatableTopicConfigs(name=c.name, value=c.value, read_only=False,
                                                         config_source=int(c.source), is_sensitive=False)
            for c in configs.describe(given)]
        results.append(R.CreatableTopicResult(
            name=t.name, topic_id=topic.topic_id if topic and code is Code.NONE else uuid.UUID(int=0),
            error_code=int(code), error_message=message, num_partitions=count if code is Code.NONE else -1,
            replication_factor=1 if code is Code.NONE else -1, configs=described if v >= 5 else None))
    return R(version=v, throttle_time_ms=0, topics=results)


def delete_topic(wb: WireBroker, name: str) -> None:
    """Remove a topic: its partitions' logs (and files, durable), the batches cached for Fetch, the groups'
    offsets of its partitions (``GroupCoordinator.onPartitionsDeleted``)."""
    topic = wb.topics.pop(name)
    wb.deleted[name] += 1
    names = {TopicPartition(name, i) for i in range(topic.partitions)}
    for pname in sorted(names):
        wb.broker.delete_partition(pname)
    for cache in (wb.produced, wb._encoded):
        for key in [k for k in cache if k[0] in names]:
            del cache[key]
    wb.save_topics()
    gc = wb.broker.group_coordinator
    for group in sorted({g for (g, tp) in gc.committed if tp in names}):
        gc.delete_offsets(group, sorted(tp for (g, tp) in gc.committed if g == group and tp in names), wb.now())


def handle_delete_topics(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    R = DeleteTopicsResponse
    by_id = {t.topic_id: t for t in wb.topics.values()}
    wanted = [(t.name, t.topic_id) for t in body.topics] if v >= 6 else [(n, None) for n in body.topic_names]
    results = []
    for name, topic_id in wanted:
        if name is None and topic_id is not None:
            known = by_id.get(topic_id)
            if known is None:
                results.append(R.DeletableTopicResult(name=None, topic_id=topic_id, error_code=Code.UNKNOWN_TOPIC_ID,
                                                      error_message="Topic id not found."))
                continue
            name = known.name
        topic = wb.topics.get(name)
        if topic is None:
            code, message = ((Code.INVALID_REQUEST, "Internal topics cannot be deleted.") if name in INTERNAL_TOPICS
                             else (Code.UNKNOWN_TOPIC_OR_PARTITION,
                                   "This server does not host this topic-partition."))
            results.append(R.DeletableTopicResult(name=name, topic_id=uuid.UUID(int=0), error_code=code,
                                                  error_message=message))
            continue
        topic_id = topic.topic_id
        delete_topic(wb, name)
        results.append(R.DeletableTopicResult(name=name, topic_id=topic_id, error_code=0, error_message=None))
    return R(version=v, throttle_time_ms=0, responses=results)


def handle_create_partitions(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    R = CreatePartitionsResponse
    results = []
    names = [t.name for t in body.topics]
    duplicated = {n for n in names if names.count(n) > 1}
    for name in sorted(duplicated):  # ControllerApis.createPartitions: one answer for a name given twice
        results.append(R.CreatePartitionsTopicResult(name=name, error_code=Code.INVALID_REQUEST,
                                                     error_message="Duplicate topic name."))
    for t in body.topics:
        if t.name in duplicated:
            continue
        topic, count = wb.topics.get(t.name), int(t.count)
        code, message = Code.NONE, None
        if topic is None:
            code = Code.UNKNOWN_TOPIC_OR_PARTITION
        elif count < topic.partitions:
            code, message = Code.INVALID_PARTITIONS, (f"The topic {t.name} currently has {topic.partitions} "
                                                      f"partition(s); {count} would not be an increase.")
        elif count == topic.partitions:
            code, message = Code.INVALID_PARTITIONS, f"Topic already has {topic.partitions} partition(s)."
        elif t.assignments is not None and len(t.assignments) != count - topic.partitions:
            code, message = Code.INVALID_REPLICA_ASSIGNMENT, (f"Attempted to add {count - topic.partitions} "
                                                              f"additional partition(s), but only "
                                                              f"{len(t.assignments)} assignment(s) were specified.")
        elif t.assignments is not None and any(not a.broker_ids or set(a.broker_ids) - set(range(wb.nodes.count))
                                               for a in t.assignments):
            code, message = Code.INVALID_REPLICA_ASSIGNMENT, f"The brokers are 0..{wb.nodes.count - 1}."
        if code is Code.NONE and not body.validate_only and topic is not None:
            old = topic.partitions
            topic.partitions = count
            for i in range(old, count):
                wb.partition(t.name, i)
            wb.save_topics()
        results.append(R.CreatePartitionsTopicResult(name=t.name, error_code=int(code), error_message=message))
    return R(version=v, throttle_time_ms=0, results=results)


# --- configs ------------------------------------------------------------------------------------------------

def _broker_configs(wb: WireBroker) -> list[tuple[str, str, ConfigType]]:
    """The broker configs serve has (read-only: ``STATIC_BROKER_CONFIG``)."""
    c = wb.broker.config
    return sorted([
        ("auto.create.topics.enable", "true" if wb.config.auto_create_topics else "false", ConfigType.BOOLEAN),
        ("message.max.bytes", str(c.max_message_bytes), ConfigType.INT),
        ("num.partitions", str(wb.config.default_partitions), ConfigType.INT),
        ("offsets.topic.num.partitions", str(c.num_offsets_partitions), ConfigType.INT),
        ("socket.request.max.bytes", str(wb.config.max_request_bytes), ConfigType.INT),
        ("queued.max.request.bytes", str(wb.config.queued_max_request_bytes), ConfigType.LONG),
        ("transaction.max.timeout.ms", str(c.txn_max_timeout_ms), ConfigType.INT),
        ("transaction.state.log.num.partitions", str(c.num_txn_log_partitions), ConfigType.INT),
        ("transactional.id.expiration.ms", str(c.transactional_id_expiration_ms), ConfigType.INT),
        ("producer.id.expiration.ms", str(c.producer_id_expiration_ms), ConfigType.INT),
    ])


STATIC_BROKER_CONFIG = 4


def handle_describe_configs(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    R = DescribeConfigsResponse.DescribeConfigsResult
    C = R.DescribeConfigsResourceResult
    synonyms = v >= 1 and bool(body.include_synonyms)
    results = []
    for res in body.resources:
        keys = None if res.configuration_keys is None else list(res.configuration_keys)
        code, message, found = Code.NONE, None, []
        if res.resource_type == TOPIC:
            topic = wb.topics.get(res.resource_name)
            if topic is None:
                code, message = Code.UNKNOWN_TOPIC_OR_PARTITION, ""  # ConfigHelper: an empty message
            else:
                for d in configs.describe(topic.configs, keys):
                    own = synonyms and d.source is configs.ConfigSource.DYNAMIC_TOPIC_CONFIG  # no log.* synonyms
                    syn = [C.DescribeConfigsSynonym(name=d.name, value=d.value, source=int(d.source))] if own else []
                    found.append(C(name=d.name, value=d.value, read_only=False, config_source=int(d.source),
                                   is_default=d.source is not configs.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                                   is_sensitive=False,
                                   synonyms=syn, config_type=int(d.type), documentation=None))
        elif res.resource_type == BROKER and res.resource_name in ("", str(request.node_id)):
            for name, value, kind in _broker_configs(wb):
                if keys is None or name in keys:
                    found.append(C(name=name, value=value, read_only=True, config_source=STATIC_BROKER_CONFIG,
                                   is_default=False, is_sensitive=False, synonyms=[], config_type=int(kind),
                                   documentation=None))
        elif res.resource_type == BROKER:
            code, message = Code.INVALID_REQUEST, (f"Unexpected broker id, expected {request.node_id} or empty string, "
                                                   f"but received {res.resource_name}")
        else:
            code, message = Code.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}"
        results.append(R(error_code=int(code), error_message=message or "", resource_type=res.resource_type,
                         resource_name=res.resource_name, configs=found))
    return DescribeConfigsResponse(version=v, throttle_time_ms=0, results=results)


def _alter(wb: WireBroker, res: Any, change: Callable[[dict[str, Value]], dict[str, Value]],
           validate_only: bool) -> tuple[Code, str | None]:
    """One resource of an (Incremental)AlterConfigs: the topic's new overrides, validated as a whole."""
    if res.resource_type == BROKER:
        return Code.INVALID_REQUEST, "txnspec serve's broker configs are static"
    if res.resource_type != TOPIC:
        return Code.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}"
    topic = wb.topics.get(res.resource_name)
    if topic is None:
        return Code.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{res.resource_name}' does not exist."
    names = [c.name for c in res.configs]
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        return Code.INVALID_REQUEST, f"Error due to duplicate config keys: {twice}"
    try:
        new = change(dict(topic.configs))
    except ConfigError as exc:
        return Code.INVALID_CONFIG, str(exc)
    if not validate_only:
        topic.configs = new
        wb.save_topics()
    return Code.NONE, None


def handle_incremental_alter_configs(wb: WireBroker, request: Request) -> Any:
    """IncrementalAlterConfigs: each config SET, DELETEd, or APPENDed to / SUBTRACTed from a LIST."""
    def changes(res: Any) -> Callable[[dict[str, Value]], dict[str, Value]]:
        def apply(overrides: dict[str, Value]) -> dict[str, Value]:
            for c in res.configs:
                key = configs.TOPIC_CONFIGS.get(c.name)
                if key is None:
                    raise ConfigError(f"Unknown topic config name: {c.name}")
                op = int(c.config_operation)
                if op == SET:
                    overrides[c.name] = configs.parse(c.name, c.value)
                elif op == DELETE:
                    overrides.pop(c.name, None)
                elif op in (APPEND, SUBTRACT):
                    if key.type is not ConfigType.LIST:
                        raise ConfigError(f"Can't {'APPEND' if op == APPEND else 'SUBTRACT'} to key {c.name} "
                                          "because its type is not LIST.")
                    now = list(configs.value_of(overrides, c.name))
                    given = [x.strip() for x in (c.value or "").split(",") if x.strip()]
                    now = now + [x for x in given if x not in now] if op == APPEND else [x for x in now
                                                                                          if x not in given]
                    overrides[c.name] = configs.parse(c.name, ",".join(now))
                else:
                    raise ConfigError(f"Unknown alter config operation {op}")
            return overrides
        return apply

    return _alter_each(wb, request, IncrementalAlterConfigsResponse, changes)


def handle_alter_configs(wb: WireBroker, request: Request) -> Any:
    """The legacy AlterConfigs: the resource's overrides replaced by exactly those given."""
    def replace_all(res: Any) -> Callable[[dict[str, Value]], dict[str, Value]]:
        return lambda _: configs.parse_all({c.name: c.value for c in res.configs})

    return _alter_each(wb, request, AlterConfigsResponse, replace_all)


def _alter_each(wb: WireBroker, request: Request, response: Any,
                change_of: Callable[[Any], Callable[[dict[str, Value]], dict[str, Value]]]) -> Any:
    """Both AlterConfigs: each resource altered by its change (:func:`_alter`), one answer per resource."""
    body, R = request.body, response
    answers = []
    for res in body.resources:
        code, message = _alter(wb, res, change_of(res), bool(body.validate_only))
        answers.append(R.AlterConfigsResourceResponse(error_code=int(code), error_message=message,
                                                      resource_type=res.resource_type,
                                                      resource_name=res.resource_name))
    return R(version=request.version, throttle_time_ms=0, responses=answers)


# --- cluster ------------------------------------------------------------------------------------------------

def handle_describe_cluster(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    R = DescribeClusterResponse
    wanted = int(body.endpoint_type) if v >= 1 else 1
    if wanted != 1:  # EndpointType: 1 BROKER, 2 CONTROLLER (controllers are not served)
        code, message = ((Code.MISMATCHED_ENDPOINT_TYPE, "The request was sent to an endpoint of type BROKER, but "
                          "we wanted an endpoint of type CONTROLLER") if wanted == 2 else
                         (Code.UNSUPPORTED_ENDPOINT_TYPE, f"Unsupported endpoint type {wanted}"))
        return R(version=v, throttle_time_ms=0, error_code=code, error_message=message, endpoint_type=1,
                 cluster_id=CLUSTER_ID, controller_id=-1, brokers=[], authorized_operations=None)
    brokers = [R.DescribeClusterBroker(broker_id=n, host=wb.address(n)[0], port=wb.address(n)[1], rack=None,
                                       is_fenced=False) for n in sorted(wb.nodes.live)]
    return R(version=v, throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=1, cluster_id=CLUSTER_ID,
             controller_id=wb.nodes.controller, brokers=brokers, authorized_operations=None)


HANDLERS: dict[str, Handler] = {
    "CreateTopics": handle_create_topics, "DeleteTopics": handle_delete_topics,
    "CreatePartitions": handle_create_partitions, "DescribeConfigs": handle_describe_configs,
    "AlterConfigs": handle_alter_configs, "IncrementalAlterConfigs": handle_incremental_alter_configs,
    "DescribeCluster": handle_describe_cluster,
}

__all__ = ["HANDLERS", "delete_topic"]
