"""A minimal blocking Kafka-protocol connection for the few requests confluent-kafka does not expose.

librdkafka validates positions with OffsetForLeaderEpoch internally but offers no public call for it, and
its metadata objects hide the partition leader epoch. Both are one request each, so a blocking socket and
kio's generated codec are enough; this is not a general client (no pipelining). A ClientSecurity adds TLS
and SASL (PLAIN, SCRAM) to a connection, authenticated once right after it connects.
"""

from __future__ import annotations

import io
import socket
import struct
import threading
import time
from functools import cache
from typing import TYPE_CHECKING, Any

from kio.serial import entity_reader, entity_writer
from kio.static.protocol import RequestPayload

from epochlog.protocol.codec import response_class
from epochlog.security.sasl_client import SaslClientSession
from epochlog.security.sasl_errors import SaslClientError

if TYPE_CHECKING:
    import ssl

    from epochlog.client.security import ClientSecurity

_I32 = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")


class WireError(Exception):
    """The broker could not be reached or answered something we cannot read."""


@cache
def _writer(cls: type) -> Any:
    return entity_writer(cls)


@cache
def _reader(cls: type) -> Any:
    return entity_reader(cls)


def encode_request(obj: RequestPayload, correlation_id: int, client_id: str) -> bytes:
    """A whole request frame. The header is written by hand: its client_id stays a non-compact string
    even in header v2, which is easy to get wrong through a generic codec."""
    cls = type(obj)
    cid = client_id.encode()
    out = io.BytesIO()
    out.write(b"\x00\x00\x00\x00")
    out.write(_HEADER.pack(cls.__api_key__, cls.__version__, correlation_id))
    out.write(struct.pack(">h", len(cid)) + cid)
    if cls.__flexible__:
        out.write(b"\x00")  # no tagged fields in the header
    _writer(cls)(out, obj)
    buf = out.getbuffer()
    _I32.pack_into(buf, 0, len(buf) - 4)
    del buf
    return out.getvalue()


def decode_response(api_key: int, version: int, frame: bytes | memoryview, correlation_id: int) -> Any:
    cls = response_class(api_key, version)
    (got,) = _I32.unpack_from(frame, 0)
    if got != correlation_id:
        raise WireError(f"correlation id {got} does not match {correlation_id}")
    pos = 4
    # ApiVersions always answers with header v0; every other flexible response has a tag buffer.
    if cls.__flexible__ and api_key != 18:
        if frame[pos] != 0:
            raise WireError("tagged fields in a response header are not expected")
        pos += 1
    obj, _ = _reader(cls)(memoryview(frame)[pos:].toreadonly(), 0)
    return obj


class Connection:
    """One blocking connection to one broker; thread-safe by a lock, one request in flight."""

    def __init__(
        self,
        host: str,
        port: int,
        timeout: float = 10.0,
        client_id: str = "epochlog-spark",
        security: ClientSecurity | None = None,
    ) -> None:
        self.host, self.port, self.timeout, self.client_id = host, port, timeout, client_id
        self.security = security
        self._ssl: ssl.SSLContext | None = None
        self._sock: socket.socket | None = None
        self._corr = 0
        self._lock = threading.Lock()
        self._session_deadline: float | None = None  # monotonic; KIP-368 session end, reconnect before

    def _connect(self) -> socket.socket:
        if self._sock is not None and self._session_deadline is not None and time.monotonic() >= self._session_deadline:
            # The broker closes a connection whose SASL session expired; a fresh connection
            # re-authenticates, which is simpler than KIP-368's in-place re-authentication.
            self.close()
        if self._sock is None:
            try:
                s = socket.create_connection((self.host, self.port), timeout=self.timeout)
            except OSError as e:
                raise WireError(f"cannot connect to {self.host}:{self.port}: {e}") from e
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.security is not None:
                s = self._secure(s)
            self._sock = s
        return self._sock

    def _secure(self, s: socket.socket) -> socket.socket:
        sec = self.security
        assert sec is not None
        if sec.uses_tls:
            try:
                if self._ssl is None:
                    self._ssl = sec.ssl_context()
                assert self._ssl is not None
                s = self._ssl.wrap_socket(s, server_hostname=self.host)
            except (OSError, ValueError) as e:
                s.close()
                raise WireError(f"TLS handshake with {self.host}:{self.port} failed: {e}") from e
        if sec.uses_sasl:
            try:
                self._authenticate(s, sec)
            except (OSError, WireError, SaslClientError) as e:
                s.close()
                raise WireError(
                    f"SASL {sec.mechanism} authentication to {self.host}:{self.port} as {sec.username!r} failed: {e}"
                ) from e
        return s

    def _authenticate(self, s: socket.socket, sec: ClientSecurity) -> None:
        assert sec.mechanism is not None and sec.username is not None and sec.password is not None
        session = SaslClientSession(sec.mechanism, sec.username, sec.password)
        started = time.monotonic()
        session.handshake_response(self._exchange(s, session.handshake_request()))
        request = session.first_authenticate_request()
        while request is not None:
            request = session.authenticate_response(self._exchange(s, request))
        lifetime = session.session_lifetime_ms
        # Kafka's clients re-authenticate at 85-95 % of the lifetime; reconnect at 85 %.
        self._session_deadline = started + lifetime * 0.85 / 1000 if lifetime > 0 else None

    def _exchange(self, s: socket.socket, obj: Any) -> Any:
        cls = type(obj)
        self._corr = (self._corr + 1) & 0x7FFFFFFF
        corr = self._corr
        s.sendall(encode_request(obj, corr, self.client_id))
        (size,) = _I32.unpack(self._recv_exactly(s, 4))
        return decode_response(int(cls.__api_key__), int(cls.__version__), self._recv_exactly(s, size), corr)

    def _recv_exactly(self, s: socket.socket, n: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            part = s.recv(n - len(chunks))
            if not part:
                raise WireError(f"{self.host}:{self.port} closed the connection")
            chunks += part
        return bytes(chunks)

    def request(self, obj: Any) -> Any:
        cls = type(obj)
        frame, corr = self.request_frame(obj)
        return decode_response(int(cls.__api_key__), int(cls.__version__), frame, corr)

    def request_frame(self, obj: Any) -> tuple[bytes, int]:
        """The response frame undecoded (after the size) and its expected correlation id, for the rare
        response kio cannot read (a -1 timestamp in a field it reads as a datetime)."""
        cls = type(obj)
        with self._lock:
            self._corr = (self._corr + 1) & 0x7FFFFFFF
            corr = self._corr
            try:
                s = self._connect()
                s.sendall(encode_request(obj, corr, self.client_id))
                (size,) = _I32.unpack(self._recv_exactly(s, 4))
                frame = self._recv_exactly(s, size)
            except (OSError, WireError) as e:
                self.close()
                raise WireError(f"{cls.__name__} to {self.host}:{self.port} failed: {e}") from e
        return frame, corr

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ConnectionPool:
    """One Connection per broker address, opened on first use and kept for the next request."""

    def __init__(self, timeout: float, client_id: str = "epochlog", security: ClientSecurity | None = None) -> None:
        self.timeout, self.client_id, self.security = timeout, client_id, security
        self._conns: dict[tuple[str, int], Connection] = {}

    def get(self, addr: tuple[str, int]) -> Connection:
        c = self._conns.get(addr)
        if c is None:
            c = self._conns[addr] = Connection(addr[0], addr[1], self.timeout, self.client_id, self.security)
        return c

    def close(self) -> None:
        for c in self._conns.values():
            c.close()
        self._conns.clear()
