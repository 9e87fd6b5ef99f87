"""One connection to a Kafka-protocol broker, as the audit speaks to it: framed requests with correlation ids,
kafka-python's ``kafka.protocol`` structs, API versions negotiated by ``ApiVersions`` (and the finalised features,
such as ``transaction.version``), and Kafka's names of error codes.

Only the 4-byte size prefix of a frame is written here; a broker that closes the connection or answers what the
structs cannot decode raises :class:`WireError`, one that cannot be reached
:class:`~txnspec.audit.report.BrokerUnavailable`.
"""

from __future__ import annotations

import contextlib
import socket
import struct
from typing import Any

from txnspec.audit.report import BrokerUnavailable

MAX_RESPONSE_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes is 100 MB


class WireError(Exception):
    """The broker answered something the protocol structs could not decode, or closed the connection."""


class BrokerConnection:
    """One connection to one broker: framed requests with correlation ids, ApiVersions negotiated."""

    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise BrokerUnavailable(f"cannot connect to {host}:{port}: {exc}") from None
        self.correlation = 0
        self.versions: dict[int, tuple[int, int]] = {}
        from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse

        try:
            response = self.call(ApiVersionsRequest, ApiVersionsResponse, 0)
        except (WireError, OSError) as exc:  # OSError: a timeout, a reset
            self.close()
            raise BrokerUnavailable(f"{host}:{port} does not speak the Kafka protocol: no valid answer to "
                                    f"ApiVersions ({exc or type(exc).__name__})") from None
        self.versions = {v.api_key: (v.min_version, v.max_version) for v in response.api_keys}
        self.features: dict[str, int] = {}  # finalized feature levels (ApiVersions v3+), e.g. transaction.version
        if self.versions.get(ApiVersionsRequest.API_KEY, (0, 0))[1] >= 3:
            response = self.call(ApiVersionsRequest, ApiVersionsResponse, 3, client_software_name="txnspec",
                                 client_software_version="1")
            self.features = {f.name: int(f.max_version_level) for f in response.finalized_features or []}

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def version(self, request_cls: Any, lowest: int, highest: int) -> int:
        low, high = self.versions.get(request_cls.API_KEY, (0, -1))
        chosen = int(min(high, highest, request_cls.max_version))
        if chosen < max(low, lowest):
            raise WireError(f"the broker supports {request_cls.name} versions {low}..{high}, "
                            f"txnspec needs {lowest}..{highest}")
        return chosen

    def call(self, request_cls: Any, response_cls: Any, version: int, **fields: Any) -> Any:
        self.correlation += 1
        request = request_cls(version=version, **fields)
        request.with_header(correlation_id=self.correlation, client_id="txnspec-audit")
        self.sock.sendall(request.encode(header=True, framed=True))
        size = struct.unpack(">i", self._read(4))[0]
        if not 0 <= size <= MAX_RESPONSE_BYTES:
            raise WireError(f"a response frame of {size} bytes is not a Kafka response")
        payload = self._read(size)
        try:
            response = response_cls.decode(payload, version=version, header=True)
        except Exception as exc:
            raise WireError(f"cannot decode the {response_cls.name} v{version}: {exc}") from None
        return response

    def _read(self, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise WireError("the broker closed the connection")
            data.extend(chunk)
        return bytes(data)


def error_name(code: int) -> str:
    """Kafka's name of an error code (``Errors`` in the Java client), from kafka-python's table."""
    import kafka.errors

    name = str(getattr(kafka.errors.for_code(code), "message", f"ERROR_{code}"))
    return KAFKA_ERROR_NAMES.get(name, name)


# kafka-python's names that differ from Kafka's own (org.apache.kafka.common.protocol.Errors): code 6 was
# renamed NOT_LEADER_OR_FOLLOWER in Kafka 2.6 (KIP-392)
KAFKA_ERROR_NAMES = {"NO_ERROR": "NONE", "UNKNOWN": "UNKNOWN_SERVER_ERROR",
                     "NOT_LEADER_FOR_PARTITION": "NOT_LEADER_OR_FOLLOWER"}
