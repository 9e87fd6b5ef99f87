"""Kafka's wire protocol on the broker side: request frames in, response frames out.

The messages are kafka-python's ``kafka.protocol`` structs, generated from Kafka's own JSON schemas: each has
a Request and a Response class that encode and decode every version, flexible versions (compact strings and
arrays, tagged fields) and the request header v1/v2 included. Only the 4-byte size prefix and the choice of
class by API key are written here.

:data:`APIS` is the table of what ``txnspec serve`` answers, with the version range it advertises in
ApiVersions: versions whose requests name topics by id (KIP-516: Produce v13, Fetch v13+, OffsetCommit
v10, OffsetFetch v10) are left out. InitProducerId v6 (KIP-939's ``Enable2Pc``/``KeepPreparedTxn``) is, as in Kafka
4.4, ``latestVersionUnstable``: advertised and accepted only with ``unstable.api.versions.enable``
(``ServeConfig.unstable_api_versions_enable``); otherwise a v6 request closes the connection, as Kafka's
``SocketServer`` does for a version the ``ApiVersionManager`` has not enabled.

ApiVersions of a version we do not support is not an error of the frame: as ``RequestContext.parseRequest``
(KIP-511) its body is left unread and it is answered at v0 (``RequestContext.apiVersion``), with
UNSUPPORTED_VERSION and ApiVersions' own range (``ApiVersionsRequest.getErrorResponse``), on a connection
that stays open for the client's retry. Any other frame that cannot be served raises :class:`FrameError`:
Kafka closes the connection (``InvalidRequestException`` while parsing), and so do we.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin.cluster import DescribeClusterRequest, DescribeClusterResponse
from kafka.protocol.admin.configs import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kafka.protocol.admin.groups import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.admin.topics import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from kafka.protocol.admin.transactions import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kafka.protocol.api_header import ResponseClassRegistry
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata import api_versions as _kafka_api_versions
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

DEFAULT_MAX_REQUEST_BYTES = 100 * 1024 * 1024  # socket.request.max.bytes


class ApiVersionsRequest(ApiMessage):  # type: ignore[misc]
    """ApiVersions v5 (Kafka 4.4, ``ApiVersionsRequestData``): the client may name the cluster and node it means
    to reach (both or neither); kafka-python's schema stops at v4, so v5's two fields are added to it."""

    @classmethod
    def json_patch(cls, json: dict[str, Any]) -> dict[str, Any]:
        json["validVersions"] = "0-5"
        json["fields"] = [*json["fields"],
                          {"name": "ClusterId", "type": "string", "versions": "5+", "nullableVersions": "5+",
                           "default": "null", "about": "The cluster the client means to reach, or null."},
                          {"name": "NodeId", "type": "int32", "versions": "5+", "default": "-1",
                           "about": "The node the client means to reach, or -1."}]
        return json


class ApiVersionsResponse(_kafka_api_versions.ApiVersionsResponse):  # type: ignore[misc]
    """The ApiVersions response up to v5 (the same fields as v4)."""

    @classmethod
    def json_patch(cls, json: dict[str, Any]) -> dict[str, Any]:
        json["validVersions"] = "0-5"
        return json


# defining a response class registers it for its API key: kafka-python's own client keeps its own class
ResponseClassRegistry.register_response_class(_kafka_api_versions.ApiVersionsResponse)


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json="txnspec.serve.schemas"):
    """KIP-848's heartbeat: kafka-python has no schema for API key 68; ``serve/schemas/`` holds Kafka 4.4's."""


class ConsumerGroupHeartbeatResponse(ApiMessage, load_json="txnspec.serve.schemas"):
    pass


@dataclass(frozen=True)
class Api:
    name: str
    request: Any
    response: Any
    min_version: int
    max_version: int
    latest_unstable: bool = False  # the schema's "latestVersionUnstable": max_version needs unstable versions on

    @property
    def key(self) -> int:
        return int(self.request.API_KEY)

    def highest(self, unstable_enabled: bool) -> int:
        """The highest version served: the unstable latest one only with ``unstable.api.versions.enable``."""
        return self.max_version - 1 if self.latest_unstable and not unstable_enabled else self.max_version


APIS: dict[int, Api] = {api.key: api for api in (
    Api("Produce", ProduceRequest, ProduceResponse, 3, 12),
    Api("Fetch", FetchRequest, FetchResponse, 4, 12),
    Api("ListOffsets", ListOffsetsRequest, ListOffsetsResponse, 1, 11),
    Api("Metadata", MetadataRequest, MetadataResponse, 0, 13),
    Api("OffsetCommit", OffsetCommitRequest, OffsetCommitResponse, 2, 9),
    Api("OffsetFetch", OffsetFetchRequest, OffsetFetchResponse, 1, 9),
    Api("FindCoordinator", FindCoordinatorRequest, FindCoordinatorResponse, 0, 6),
    Api("JoinGroup", JoinGroupRequest, JoinGroupResponse, 0, 9),
    Api("Heartbeat", HeartbeatRequest, HeartbeatResponse, 0, 4),
    Api("LeaveGroup", LeaveGroupRequest, LeaveGroupResponse, 0, 5),
    Api("SyncGroup", SyncGroupRequest, SyncGroupResponse, 0, 5),
    Api("ApiVersions", ApiVersionsRequest, ApiVersionsResponse, 0, 5),
    Api("CreateTopics", CreateTopicsRequest, CreateTopicsResponse, 2, 7),
    Api("DeleteTopics", DeleteTopicsRequest, DeleteTopicsResponse, 1, 6),
    Api("CreatePartitions", CreatePartitionsRequest, CreatePartitionsResponse, 0, 3),
    Api("DescribeConfigs", DescribeConfigsRequest, DescribeConfigsResponse, 1, 4),
    Api("AlterConfigs", AlterConfigsRequest, AlterConfigsResponse, 0, 2),
    Api("IncrementalAlterConfigs", IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, 0, 1),
    Api("DescribeCluster", DescribeClusterRequest, DescribeClusterResponse, 0, 2),
    Api("ListGroups", ListGroupsRequest, ListGroupsResponse, 0, 5),
    Api("DescribeGroups", DescribeGroupsRequest, DescribeGroupsResponse, 0, 6),
    Api("DeleteGroups", DeleteGroupsRequest, DeleteGroupsResponse, 0, 2),
    Api("DeleteRecords", DeleteRecordsRequest, DeleteRecordsResponse, 0, 2),
    Api("OffsetDelete", OffsetDeleteRequest, OffsetDeleteResponse, 0, 0),
    Api("WriteTxnMarkers", WriteTxnMarkersRequest, WriteTxnMarkersResponse, 1, 2),
    Api("DescribeProducers", DescribeProducersRequest, DescribeProducersResponse, 0, 0),
    Api("DescribeTransactions", DescribeTransactionsRequest, DescribeTransactionsResponse, 0, 0),
    Api("ListTransactions", ListTransactionsRequest, ListTransactionsResponse, 0, 2),
    Api("InitProducerId", InitProducerIdRequest, InitProducerIdResponse, 0, 6, latest_unstable=True),
    Api("AddPartitionsToTxn", AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, 0, 5),
    Api("AddOffsetsToTxn", AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, 0, 4),
    Api("EndTxn", EndTxnRequest, EndTxnResponse, 0, 5),
    Api("TxnOffsetCommit", TxnOffsetCommitRequest, TxnOffsetCommitResponse, 0, 5),
    Api("ConsumerGroupHeartbeat", ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, 0, 1),
)}
API_VERSIONS_KEY = 18
UNSUPPORTED_VERSION = 35


class FrameError(Exception):
    """A request that cannot be served: the connection is closed."""


@dataclass(frozen=True)
class Request:
    """A decoded request. ``version`` is the one the answer is encoded at; ``header_version`` the one the
    client asked for (they differ only for an ApiVersions of a version we do not support, whose body is None)."""

    api: Api
    version: int
    correlation_id: int
    client_id: str | None
    body: Any
    header_version: int | None = None
    node_id: int = 0  # the node whose port it came in on (txnspec serve --nodes)
    client_host: str = ""  # the peer's address as Kafka prints it (RequestContext.clientAddress: "/127.0.0.1")

    @property
    def unsupported_version(self) -> bool:
        return self.header_version is not None and self.header_version != self.version


def frame_size(prefix: bytes, max_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> int:
    """The size a 4-byte frame prefix announces; :class:`FrameError` if it is negative or too large
    (``NetworkReceive``: InvalidReceiveException, the connection is closed)."""
    size = int(struct.unpack(">i", prefix)[0])
    if size < 0:
        raise FrameError(f"invalid frame size {size}")
    if size > max_bytes:
        raise FrameError(f"frame of {size} bytes is larger than socket.request.max.bytes {max_bytes}")
    return size


def advertised(version: int, unstable_enabled: bool = False) -> list[Any]:
    return [ApiVersionsResponse.ApiVersion(version=version, api_key=api.key, min_version=api.min_version,
                                           max_version=api.highest(unstable_enabled)) for api in APIS.values()]


def decode_request(payload: bytes | bytearray, unstable_enabled: bool = False) -> Request:
    """The request in a frame's payload (header and body), or :class:`FrameError` naming what was wrong."""
    if len(payload) < 8:
        raise FrameError(f"a request of {len(payload)} bytes is shorter than a request header")
    api_key, version, correlation_id = struct.unpack_from(">hhi", payload)
    api = APIS.get(api_key)
    if api is None:
        raise FrameError(f"unknown or unsupported API key {api_key}")
    if not api.min_version <= version <= api.highest(unstable_enabled):
        if api_key == API_VERSIONS_KEY:  # KIP-511: answered at v0, body unread (RequestContext.parseRequest)
            return Request(api, 0, correlation_id, None, None, header_version=version)
        raise FrameError(f"{api.name} v{version} is not supported "
                         f"(versions {api.min_version}..{api.highest(unstable_enabled)})")
    try:
        body = api.request.decode(payload, version=version, header=True)
    except Exception as exc:  # the structs raise whatever a truncated or garbled buffer makes them raise
        raise FrameError(f"cannot decode {api.name} v{version}: {type(exc).__name__}: {exc}") from None
    header = body.header
    return Request(api, version, correlation_id, getattr(header, "client_id", None), body)


def encode_response(request: Request, response: Any) -> bytes:
    """The framed response to ``request`` (header v0 or v1 as the response class says)."""
    response.with_header(correlation_id=request.correlation_id)
    return bytes(response.encode(header=True, framed=True))


__all__ = [
    "APIS",
    "API_VERSIONS_KEY",
    "DEFAULT_MAX_REQUEST_BYTES",
    "Api",
    "FrameError",
    "Request",
    "advertised",
    "decode_request",
    "encode_response",
    "frame_size",
]
