"""Cluster metadata as ``KafkaApis`` answers it: ApiVersions (KIP-511's answer to an unsupported version, v3's
software name and version checks, v5's cluster and node checks, the ``transaction.version`` feature), Metadata
(topics by name or, v12+, by id; auto-creation; invalid names; each partition's leader, replicas and in-sync
replicas from :mod:`.nodes`) and FindCoordinator (v4's batched keys; the coordinator's node from :mod:`.nodes`,
its availability from the implementation).

Assumes the broker state of :class:`~txnspec.serve.broker.WireBroker` (its topics, nodes and configuration).
Left out: authorization, racks (answered null), topic ids in FindCoordinator's answers.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from kafka.protocol.metadata.find_coordinator import FindCoordinatorResponse
from kafka.protocol.metadata.metadata import MetadataResponse

from txnspec.impl.errors import Errors
from txnspec.impl.messages import CoordinatorType, FindCoordinator
from txnspec.serve.broker import CLUSTER_ID, Handler, WireBroker, topic_name_problem
from txnspec.serve.codes import Code
from txnspec.serve.nodes import Nodes
from txnspec.serve.protocol import API_VERSIONS_KEY, APIS, ApiVersionsResponse, Request, advertised

# ApiVersionsRequest.SOFTWARE_NAME_VERSION_PATTERN: ApiVersions v3+ with another name or version is INVALID_REQUEST
_SOFTWARE_NAME_VERSION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def handle_api_versions(wb: WireBroker, request: Request) -> Any:
    """``KafkaApis.handleApiVersionsRequest``: an unsupported version gets ``getErrorResponse`` with
    UNSUPPORTED_VERSION and ApiVersions' own range only (KIP-511); an invalid software name or version, or (v5)
    a cluster id without a node id or the reverse, INVALID_REQUEST with no ranges; a cluster id and node id that
    are not ours REBOOTSTRAP_REQUIRED; otherwise every API's range and, from v3, the features."""
    v = request.version
    if request.unsupported_version:
        own = APIS[API_VERSIONS_KEY]
        keys = [ApiVersionsResponse.ApiVersion(version=0, api_key=own.key, min_version=own.min_version,
                                               max_version=own.max_version)]
        return ApiVersionsResponse(version=0, error_code=Errors.UNSUPPORTED_VERSION.code, api_keys=keys)
    body = request.body
    names_valid = v < 3 or all(_SOFTWARE_NAME_VERSION.fullmatch(str(getattr(body, name) or ""))
                               for name in ("client_software_name", "client_software_version"))
    target_valid = v < 5 or (body.cluster_id is None) == (int(body.node_id) == -1)  # both or neither
    if not (names_valid and target_valid):
        return ApiVersionsResponse(version=v, error_code=Errors.INVALID_REQUEST.code, api_keys=[],
                                   throttle_time_ms=0)
    if v >= 5 and body.cluster_id is not None and (body.cluster_id != CLUSTER_ID
                                                     or int(body.node_id) != request.node_id):
        # KafkaApis.clusterIdOrNodeIdIsInvalid: the client reached another cluster or node than it meant
        return ApiVersionsResponse(version=v, error_code=Code.REBOOTSTRAP_REQUIRED, api_keys=[], throttle_time_ms=0)
    fields: dict[str, Any] = {"error_code": 0, "api_keys": advertised(v, wb.config.unstable_api_versions_enable),
                              "throttle_time_ms": 0}
    if v >= 3:
        R = ApiVersionsResponse
        fields["supported_features"] = [R.SupportedFeatureKey(name="transaction.version", min_version=0,
                                                              max_version=2)]
        level = wb.config.transaction_version
        fields["finalized_features_epoch"] = 1
        fields["finalized_features"] = [R.FinalizedFeatureKey(name="transaction.version", max_version_level=level,
                                                              min_version_level=level)] if level > 0 else []
        fields["zk_migration_ready"] = False
    return ApiVersionsResponse(version=v, **fields)


def _metadata_topic(wb: WireBroker, name: str, error: Errors, v: int) -> Any:
    M = MetadataResponse.MetadataResponseTopic
    topic = wb.topics.get(name) or wb.internal.get(name)
    nodes = wb.nodes
    partitions = [] if topic is None else [_metadata_partition(nodes, M, name, i) for i in range(topic.partitions)]
    return M(error_code=error.code, name=name, topic_id=topic.topic_id if topic else uuid.UUID(int=0),
             is_internal=name in wb.internal, partitions=partitions)


def _metadata_partition(nodes: Nodes, M: Any, topic: str, index: int) -> Any:
    """One partition: its leader (the first live replica), every node a replica, the live ones in sync."""
    replicas = nodes.replicas(topic, index)
    leader = nodes.leader(topic, index)
    return M.MetadataResponsePartition(
        error_code=0 if leader is not None else Code.LEADER_NOT_AVAILABLE, partition_index=index,
        leader_id=-1 if leader is None else leader, leader_epoch=nodes.leader_epoch, replica_nodes=replicas,
        isr_nodes=[n for n in replicas if n in nodes.live], offline_replicas=[n for n in replicas
                                                                             if n not in nodes.live])


def handle_metadata(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    requested = body.topics
    if requested is None or (v == 0 and not requested):
        names = sorted(wb.topics)
        topics = [_metadata_topic(wb, n, Errors.NONE, v) for n in names]
    else:
        topics = []
        auto = wb.config.auto_create_topics and (v < 4 or bool(body.allow_auto_topic_creation))
        by_id = {topic.topic_id: n for n, topic in wb.topics.items()} if v >= 12 else {}
        for t in requested:
            name = t.name
            if name is None and v >= 12 and getattr(t, "topic_id", None) not in (None, uuid.UUID(int=0)):
                # a lookup by id (KafkaApis.handleTopicMetadataRequest, v12+): what a KIP-848 consumer does with
                # the topic ids of its assignment; an unknown id is UNKNOWN_TOPIC_ID
                known = by_id.get(t.topic_id)
                topics.append(_metadata_topic(wb, known, Errors.NONE, v) if known is not None else
                              MetadataResponse.MetadataResponseTopic(
                                  error_code=Code.UNKNOWN_TOPIC_ID, name=None, topic_id=t.topic_id, is_internal=False,
                                  partitions=[]))
            elif topic_name_problem(name):
                topics.append(_metadata_topic(wb, str(name), Errors.INVALID_REQUEST, v)
                              if name is None else _invalid_topic(str(name)))
            elif name in wb.topics or name in wb.internal:
                topics.append(_metadata_topic(wb, name, Errors.NONE, v))
            elif auto:
                wb.create_topic(name, wb.config.default_partitions)
                topics.append(_metadata_topic(wb, name, Errors.NONE, v))
            else:
                topics.append(_metadata_topic(wb, name, Errors.UNKNOWN_TOPIC_OR_PARTITION, v))
    brokers = [MetadataResponse.MetadataResponseBroker(node_id=n, host=wb.address(n)[0], port=wb.address(n)[1],
                                                       rack=None) for n in sorted(wb.nodes.live)]
    return MetadataResponse(version=v, throttle_time_ms=0, brokers=brokers, cluster_id=CLUSTER_ID,
                            controller_id=wb.nodes.controller, topics=topics, error_code=0)


INVALID_TOPIC_EXCEPTION = Code.INVALID_TOPIC_EXCEPTION


def _invalid_topic(name: str) -> Any:
    return MetadataResponse.MetadataResponseTopic(error_code=INVALID_TOPIC_EXCEPTION, name=name,
                                                  topic_id=uuid.UUID(int=0), is_internal=False, partitions=[])


def handle_find_coordinator(wb: WireBroker, request: Request) -> Any:
    body, v = request.body, request.version
    key_type = int(body.key_type) if v >= 1 else 0
    keys = list(body.coordinator_keys or []) if v >= 4 else [body.key]

    def answer(key: str) -> tuple[int, str | None, int, str, int]:
        """(error, message, node, host, port) of the key's coordinator (serve.nodes)."""
        if key_type not in (0, 1):
            return Errors.INVALID_REQUEST.code, f"unknown coordinator type {key_type}", -1, "", -1
        kind = CoordinatorType.TRANSACTION if key_type == 1 else CoordinatorType.GROUP
        r = wb.broker.handle(FindCoordinator(kind, key or ""), wb.now())
        node = wb.nodes.txn_coordinator(key or "") if key_type == 1 else wb.nodes.group_coordinator(key or "")
        if r.error is not Errors.NONE or node is None:
            code = r.error.code if r.error is not Errors.NONE else Errors.COORDINATOR_NOT_AVAILABLE.code
            return code, None, -1, "", -1
        host, port = wb.address(node)
        return 0, None, node, host, port

    R = FindCoordinatorResponse
    if v >= 4:
        coordinators = []
        for key in keys:
            code, message, node, host, port = answer(key)
            coordinators.append(R.Coordinator(key=key, node_id=node, host=host, port=port, error_code=code,
                                              error_message=message))
        return R(version=v, throttle_time_ms=0, coordinators=coordinators)
    code, message, node, host, port = answer(keys[0])
    return R(version=v, throttle_time_ms=0, error_code=code, error_message=message, node_id=node, host=host,
             port=port)


# the cluster-metadata requests this module answers; the others are in transactions, leader and groups
HANDLERS: dict[str, Handler] = {"ApiVersions": handle_api_versions, "Metadata": handle_metadata,
                                "FindCoordinator": handle_find_coordinator}
