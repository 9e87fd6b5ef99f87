"""``txnspec serve`` on the wire: what it advertises, what it answers to bad frames (a closed connection or
Kafka's error, never a crash or a hang), record batch checks, many connections, a fuzz of the frame decoder,
and the command's exit status when the port is taken."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.metadata.metadata import MetadataRequest
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatchBuilder

from txnspec.audit.connection import BrokerConnection
from txnspec.impl.log import ControlType, Record, RecordBatch
from txnspec.serve import records as wire_records
from txnspec.serve.dispatch import HANDLERS
from txnspec.serve.protocol import APIS, ApiVersionsRequest, ApiVersionsResponse, FrameError, decode_request
from txnspec.serve.server import ServerThread

pytestmark = pytest.mark.quick  # the whole module is in the quick tier

WAIT = 5.0
CLI = "import sys; from txnspec.cli import main; sys.exit(main())"


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    with ServerThread(transaction_version=2, topics=("t:2",), max_request_bytes=1 << 20) as s:
        yield s


def connect(server: ServerThread) -> socket.socket:
    return socket.create_connection((server.config.host, server.config.port), timeout=WAIT)


def closed_by_server(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes (a bounded wait; a hang fails the test)."""
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


def frame(api_key: int, version: int, correlation_id: int = 1, body: bytes = b"") -> bytes:
    payload = struct.pack(">hhih", api_key, version, correlation_id, 4) + b"test" + body
    return struct.pack(">i", len(payload)) + payload


def still_serves(server: ServerThread) -> None:
    conn = BrokerConnection(server.config.host, server.config.port, timeout=WAIT)
    try:
        assert conn.versions[APIS[18].key] == (0, 5)
    finally:
        conn.close()


def test_api_versions_advertises_exactly_the_table_and_the_transaction_version(server: ServerThread) -> None:
    conn = BrokerConnection(server.config.host, server.config.port, timeout=WAIT)
    try:
        # the unstable latest versions (InitProducerId v6, KIP-939) only with unstable.api.versions.enable
        assert conn.versions == {api.key: (api.min_version, api.highest(False)) for api in APIS.values()}
        assert conn.versions[22] == (0, 5)
        assert conn.features == {"transaction.version": 2}
    finally:
        conn.close()
    assert {api.name for api in APIS.values()} == set(HANDLERS)


def test_init_producer_id_v6_needs_unstable_api_versions() -> None:
    """Kafka 4.4's InitProducerId v6 is ``latestVersionUnstable``: advertised with unstable.api.versions.enable,
    and a v6 request without it closes the connection (docs/kip-939.md)."""
    from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse

    from txnspec.audit.connection import WireError

    with ServerThread(unstable_api_versions_enable=True, transaction_two_phase_commit_enable=True) as unstable:
        conn = BrokerConnection(unstable.config.host, unstable.config.port, timeout=WAIT)
        try:
            assert conn.versions[22] == (0, 6)
            r = conn.call(InitProducerIdRequest, InitProducerIdResponse, 6, transactional_id="t", producer_id=-1,
                          producer_epoch=-1, transaction_timeout_ms=10**9, enable2_pc=True)
            assert (int(r.error_code), int(r.producer_epoch), int(r.ongoing_txn_producer_id)) == (0, 0, -1)
        finally:
            conn.close()
    with ServerThread() as stable:
        conn = BrokerConnection(stable.config.host, stable.config.port, timeout=WAIT)
        try:
            with pytest.raises((WireError, OSError)):
                conn.call(InitProducerIdRequest, InitProducerIdResponse, 6, transactional_id="t", producer_id=-1,
                          producer_epoch=-1, transaction_timeout_ms=1000, enable2_pc=True)
        finally:
            conn.close()


def test_metadata_names_the_internal_topics_as_internal_and_never_creates_them(server: ServerThread) -> None:
    from kafka.protocol.metadata.metadata import MetadataResponse

    conn = BrokerConnection(server.config.host, server.config.port, timeout=WAIT)
    try:
        r = conn.call(MetadataRequest, MetadataResponse, 12, allow_auto_topic_creation=True,
                      include_topic_authorized_operations=False,
                      topics=[MetadataRequest.MetadataRequestTopic(topic_id=None, name="__consumer_offsets"),
                              MetadataRequest.MetadataRequestTopic(topic_id=None, name="auto-created")])
    finally:
        conn.close()
    internal, created = r.topics
    assert (internal.error_code, internal.is_internal, len(internal.partitions)) == (0, True, 50)
    assert (created.error_code, created.is_internal, len(created.partitions)) == (0, False, 1)
    assert "__consumer_offsets" not in server.call(lambda: set(server.server.broker.topics))


def test_an_unknown_api_key_closes_the_connection_and_the_server_goes_on(server: ServerThread) -> None:
    with connect(server) as sock:
        sock.sendall(frame(999, 0))
        assert closed_by_server(sock) == b""
    still_serves(server)


def test_an_unsupported_version_closes_the_connection(server: ServerThread) -> None:
    with connect(server) as sock:
        sock.sendall(frame(ProduceRequest.API_KEY, 2))  # Produce v2: below what is advertised
        assert closed_by_server(sock) == b""
    still_serves(server)


def read_answer(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
    return sock.recv(size, socket.MSG_WAITALL)


@pytest.mark.parametrize("version", [6, 99, -1])
def test_api_versions_of_an_unknown_version_is_answered_at_v0_and_the_connection_stays_open(
        server: ServerThread, version: int) -> None:
    """KIP-511 as Kafka does it (RequestContext.parseRequest, ApiVersionsRequest.getErrorResponse): a v0 answer
    with UNSUPPORTED_VERSION and ApiVersions' own range; the client retries on the same connection."""
    with connect(server) as sock:
        sock.sendall(frame(ApiVersionsRequest.API_KEY, version, correlation_id=42, body=b"\x00garbage"))
        response = ApiVersionsResponse.decode(read_answer(sock), version=0, header=True)
        assert response.header.correlation_id == 42
        assert response.error_code == 35
        assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [(18, 0, 5)]
        retry = ApiVersionsRequest(version=3, client_software_name="txnspec-test", client_software_version="1.0")
        retry.with_header(correlation_id=43, client_id="test")
        sock.sendall(bytes(retry.encode(header=True, framed=True)))
        again = ApiVersionsResponse.decode(read_answer(sock), version=3, header=True)
    assert (again.header.correlation_id, again.error_code) == (43, 0)
    assert {k.api_key: (k.min_version, k.max_version) for k in again.api_keys} == {
        api.key: (api.min_version, api.highest(False)) for api in APIS.values()}


def test_api_versions_with_an_invalid_client_software_name_is_invalid_request(server: ServerThread) -> None:
    """ApiVersionsRequest.isValid: v3+ names and versions match [a-zA-Z0-9](?:[a-zA-Z0-9-.]*[a-zA-Z0-9])?."""
    with connect(server) as sock:
        for cid, name in enumerate(("bad name", "-dash", "")):
            bad = ApiVersionsRequest(version=3, client_software_name=name, client_software_version="1")
            bad.with_header(correlation_id=cid, client_id="test")
            sock.sendall(bytes(bad.encode(header=True, framed=True)))
            # at v3, as Kafka encodes it (kafka-python's decoder reads any error as v0, so the bytes are checked):
            # correlation id, INVALID_REQUEST, an empty compact array, throttle 0, no tagged fields
            assert read_answer(sock) == struct.pack(">ihbib", cid, 42, 1, 0, 0)


@pytest.mark.parametrize(("cluster_id", "node_id", "error"), [
    (None, -1, 0), ("txnspec-serve", 0, 0), ("another-cluster", 0, 129), ("txnspec-serve", 3, 129),
    ("txnspec-serve", -1, 42), (None, 0, 42)])
def test_api_versions_v5_checks_the_cluster_and_node_the_client_means(
        server: ServerThread, cluster_id: str | None, node_id: int, error: int) -> None:
    """Kafka 4.4's ApiVersions v5: both or neither of cluster id and node id (isValid, else INVALID_REQUEST);
    another cluster or node is REBOOTSTRAP_REQUIRED (KafkaApis.clusterIdOrNodeIdIsInvalid)."""
    with connect(server) as sock:
        request = ApiVersionsRequest(version=5, client_software_name="t", client_software_version="1",
                                     cluster_id=cluster_id, node_id=node_id)
        request.with_header(correlation_id=7, client_id="test")
        sock.sendall(bytes(request.encode(header=True, framed=True)))
        raw = read_answer(sock)
    if error:  # an error answer at v5 has no ranges (kafka-python's decoder reads errors as v0: bytes checked)
        assert raw == struct.pack(">ihbib", 7, error, 1, 0, 0)
    else:
        answer = ApiVersionsResponse.decode(raw, version=5, header=True)
        assert (answer.header.correlation_id, answer.error_code, len(answer.api_keys)) == (7, 0, len(APIS))


@pytest.mark.parametrize("size", [-1, (1 << 20) + 1])
def test_a_negative_or_oversized_frame_closes_the_connection_unread(server: ServerThread, size: int) -> None:
    with connect(server) as sock:
        sock.sendall(struct.pack(">i", size))
        assert closed_by_server(sock) == b""
    still_serves(server)


def test_a_body_that_does_not_decode_closes_the_connection(server: ServerThread) -> None:
    with connect(server) as sock:
        sock.sendall(frame(MetadataRequest.API_KEY, 12, body=b"\xff\xff\xff"))
        assert closed_by_server(sock) == b""
    still_serves(server)


def test_a_client_vanishing_mid_frame_ends_only_its_connection(server: ServerThread) -> None:
    for cut in (2, 6, 20):
        sock = connect(server)
        sock.sendall(frame(MetadataRequest.API_KEY, 12, body=b"\x00" * 30)[:cut])
        sock.close()
    still_serves(server)


def test_many_concurrent_connections_are_all_answered(server: ServerThread) -> None:
    results: list[bool] = []
    lock = threading.Lock()

    def client() -> None:
        conn = BrokerConnection(server.config.host, server.config.port, timeout=WAIT)
        try:
            ok = bool(conn.versions)
        finally:
            conn.close()
        with lock:
            results.append(ok)

    sockets = [connect(server) for _ in range(100)]  # idle connections held open meanwhile
    threads = [threading.Thread(target=client) for _ in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for s in sockets:
        s.close()
    assert results == [True] * 50


def produce(conn: BrokerConnection, records: bytes, topic: str = "t") -> tuple[int, int]:
    data = ProduceRequest.TopicProduceData(name=topic, partition_data=[
        ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=records)])
    r = conn.call(ProduceRequest, ProduceResponse, 9, transactional_id=None, acks=-1, timeout_ms=1000,
                  topic_data=[data])
    p = r.responses[0].partition_responses[0]
    return int(p.error_code), int(p.base_offset)


def batch(values: list[bytes]) -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    for i, v in enumerate(values):
        builder.append(i, 0, None, v, [])
    return bytes(builder.build())


def test_produce_checks_the_batch_crc_and_takes_exactly_one_batch(server: ServerThread) -> None:
    conn = BrokerConnection(server.config.host, server.config.port, timeout=WAIT)
    try:
        good = batch([b"a", b"b"])
        corrupt = bytearray(good)
        corrupt[-2] ^= 0x01  # the last value byte: still parses, only the CRC tells
        assert produce(conn, bytes(corrupt)) == (2, -1)  # CORRUPT_MESSAGE: the CRC32C does not match
        assert produce(conn, good + batch([b"c"]))[0] == 87  # INVALID_RECORD: one batch per partition
        assert produce(conn, good, topic="no-such-topic")[0] == 3  # UNKNOWN_TOPIC_OR_PARTITION
        error, base = produce(conn, good)
        assert (error, base) == (0, 0)
    finally:
        conn.close()


def test_produce_with_acks_0_gets_no_answer_and_the_next_request_is_answered(server: ServerThread) -> None:
    data = ProduceRequest.TopicProduceData(name="t", partition_data=[
        ProduceRequest.TopicProduceData.PartitionProduceData(index=1, records=batch([b"fire-and-forget"]))])
    produce_request = ProduceRequest(version=9, transactional_id=None, acks=0, timeout_ms=1000, topic_data=[data])
    produce_request.with_header(correlation_id=1, client_id="test")
    versions = ApiVersionsRequest(version=0)
    versions.with_header(correlation_id=2, client_id="test")
    with connect(server) as sock:
        sock.sendall(bytes(produce_request.encode(header=True, framed=True)) + bytes(versions.encode(header=True,
                                                                                                     framed=True)))
        answer = ApiVersionsResponse.decode(read_answer(sock), version=0, header=True)
    assert answer.header.correlation_id == 2
    partition = server.call(lambda: server.server.broker.broker.partition("t-1"))
    assert server.call(lambda: partition.log_end_offset) == 1


def test_a_fetched_batch_is_kafkas_v2_format_with_its_offset_and_a_valid_crc() -> None:
    from kafka.record.default_records import DefaultRecordBatch

    data = wire_records.encode_batch(RecordBatch(7, (Record(b"k", b"v", 5), Record(None, "s", 6)), 3, 1, 0, True))
    decoded = DefaultRecordBatch(data)
    assert decoded.validate_crc()
    assert (decoded.base_offset, decoded.producer_id, decoded.producer_epoch, decoded.is_transactional) == (7, 3, 1,
                                                                                                            True)
    assert [(r.offset, r.key, r.value) for r in DefaultRecordBatch(data)] == [(7, b"k", b"v"), (8, None, b"s")]
    marker = wire_records.encode_batch(RecordBatch(9, (Record(),), 3, 1, -1, True, ControlType.ABORT, 4))
    assert DefaultRecordBatch(marker).validate_crc()
    assert wire_records.control_type_of(marker) is ControlType.ABORT
    assert wire_records.decode_produce(batch([b"x"])).records == (Record(None, b"x", 0),)


valid_requests = [frame(18, 0), frame(3, 1, body=struct.pack(">i", -1))]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.binary(max_size=200),
                 st.tuples(st.sampled_from(valid_requests), st.integers(0, 60), st.binary(min_size=1, max_size=8))
                 .map(lambda t: t[0][4:][:t[1]] + t[2] + t[0][4:][t[1]:])))
def test_the_frame_decoder_answers_a_request_or_a_frame_error_for_any_bytes(payload: bytes) -> None:
    try:
        request = decode_request(payload)
    except FrameError as exc:
        assert str(exc)
        return
    assert request.api.min_version <= request.version <= request.api.max_version


def test_serve_exits_2_naming_the_port_when_it_is_taken() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-c", CLI, "serve", "--port", str(port)],
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert f"127.0.0.1:{port}" in done.stderr and "Traceback" not in done.stderr
