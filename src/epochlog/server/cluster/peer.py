"""An asyncio Kafka-protocol connection from one epochlog process to another (broker or controller).

Requests are pipelined: each gets a correlation id and a future, and the connection's protocol
matches responses to them. kio encodes and decodes the bodies; ``client/wire.py`` holds the header rules.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
import struct
from collections.abc import Callable
from typing import Any

from epochlog.client.wire import decode_response, encode_request
from epochlog.server.framing import FramedProtocol
from epochlog.server.peer_security import PeerSecurity

log = logging.getLogger("epochlog.peer")
_I32 = struct.Struct(">i")


class PeerError(Exception):
    """The peer could not be reached, went away, or did not answer in time."""


class PeerBadResponse(PeerError):
    """The peer answered, with bytes that cannot be read as the response asked for."""


class PeerConnection:
    def __init__(self, host: str, port: int, client_id: str, security: PeerSecurity | None = None) -> None:
        self.host, self.port, self.client_id = host, port, client_id
        # TLS and SASL for a secured listener of the peer (inter-broker or controller listener).
        self.security = security
        self._transport: asyncio.Transport | None = None
        self._pending: dict[int, tuple[asyncio.Future[Any], int, int, Callable[[memoryview], Any] | None]] = {}
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()
        self.closed = asyncio.Event()

    @property
    def connected(self) -> bool:
        return self._transport is not None and not self._transport.is_closing()

    async def connect(self, timeout: float = 5.0) -> None:
        async with self._lock:
            if self.connected:
                return
            loop = asyncio.get_running_loop()
            ctx = self.security.ssl_context if self.security is not None else None
            try:
                transport, _ = await asyncio.wait_for(
                    loop.create_connection(
                        lambda: _Framer(self),
                        self.host,
                        self.port,
                        ssl=ctx,
                        server_hostname=self.host if ctx is not None else None,
                    ),
                    timeout,
                )
            except (OSError, TimeoutError, ssl.SSLError) as e:
                raise PeerError(f"cannot connect to {self.host}:{self.port}: {e}") from None
            self.closed = asyncio.Event()
            self._transport = transport
            if self.security is not None and self.security.sasl_mechanism:
                try:
                    await self._authenticate(timeout)
                except PeerError:
                    self.close()
                    raise

    async def _authenticate(self, timeout: float) -> None:
        """SaslHandshake then SaslAuthenticate until the peer accepts us (or refuses: PeerError)."""
        assert self.security is not None
        session = self.security.sasl_client()
        try:
            session.handshake_response(await self._send_now(session.handshake_request(), timeout))
            body = session.first_authenticate_request()
            while body is not None:
                body = session.authenticate_response(await self._send_now(body, timeout))
        except PeerError:
            raise
        except Exception as e:  # the peer refused the mechanism or the credentials
            raise PeerError(f"SASL authentication to {self.host}:{self.port} failed: {e}") from None

    async def _send_now(self, body: Any, timeout: float) -> Any:
        """A request on the connection as it is, not (re)connecting: the SASL exchange inside connect()."""
        key, version = int(type(body).__api_key__), int(type(body).__version__)
        return await self._exchange(key, version, lambda cid: encode_request(body, cid, self.client_id), timeout, None)

    def _on_frame(self, frame: bytes | memoryview) -> None:
        (cid,) = _I32.unpack_from(frame, 0)
        entry = self._pending.pop(cid, None)
        if entry is None:
            return
        fut, key, version, parse = entry
        if fut.done():
            return
        try:
            if parse is not None:
                fut.set_result(parse(memoryview(frame)[4:]))
            else:
                fut.set_result(decode_response(key, version, frame, cid))
        except Exception as e:  # a response we cannot read fails that request only
            fut.set_exception(PeerBadResponse(f"bad response from {self.host}:{self.port}: {e}"))

    def _fail_all(self, err: Exception) -> None:
        pending, self._pending = self._pending, {}
        for fut, _k, _v, _p in pending.values():
            if not fut.done():
                fut.set_exception(err)
        if self._transport is not None:
            self._transport.close()
        self._transport = None
        self.closed.set()

    async def request(self, body: Any, timeout: float = 10.0, parse: Callable[[memoryview], Any] | None = None) -> Any:
        """Send ``body`` and await its answer: decoded by kio, or by ``parse`` (given the frame after its
        correlation id) where a hand-written parser saves copying the records."""
        return await self.request_frame(
            int(type(body).__api_key__),
            int(type(body).__version__),
            lambda cid: encode_request(body, cid, self.client_id),
            timeout,
            parse,
        )

    async def request_frame(
        self,
        api_key: int,
        version: int,
        frame: Callable[[int], bytes],
        timeout: float = 10.0,
        parse: Callable[[memoryview], Any] | None = None,
    ) -> Any:
        """As ``request``, for a request the caller encodes itself: ``frame(correlation_id)`` returns it
        whole, size prefix included."""
        if not self.connected:
            await self.connect()
        return await self._exchange(api_key, version, frame, timeout, parse)

    async def _exchange(
        self,
        api_key: int,
        version: int,
        frame: Callable[[int], bytes],
        timeout: float,
        parse: Callable[[memoryview], Any] | None,
    ) -> Any:
        assert self._transport is not None
        cid = next(self._ids) & 0x7FFFFFFF
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[cid] = (fut, api_key, version, parse)
        try:
            self._transport.write(frame(cid))
        except (OSError, RuntimeError) as e:
            self._pending.pop(cid, None)
            raise PeerError(str(e)) from None
        # asyncio.timeout rather than wait_for: the answer wakes this task directly, one event-loop turn
        # sooner (a replica fetch round and an acks=all produce wait on each of these).
        try:
            async with asyncio.timeout(timeout):
                return await fut
        except TimeoutError:
            self._pending.pop(cid, None)
            raise PeerError(f"{self.host}:{self.port} did not answer within {timeout}s") from None

    def close(self) -> None:
        # Requests in flight went out on this transport and will get no answer: fail them now (a later
        # connection_lost of this transport must not touch a newer connection's requests).
        self._fail_all(PeerError(f"connection to {self.host}:{self.port} closed"))


class _Framer(FramedProtocol):
    """Cuts the byte stream into response frames (framing.py): a replica fetch answer of a megabyte is
    read straight into a buffer of its own and handed over as it is."""

    def __init__(self, conn: PeerConnection) -> None:
        super().__init__()
        self.conn = conn
        self.transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if self.conn._transport is self.transport:
            self.conn._fail_all(PeerError(f"connection to {self.conn.host}:{self.conn.port} closed"))

    def frame_received(self, frame: bytes | memoryview) -> None:
        self.conn._on_frame(frame)

    def bad_frame_size(self, size: int) -> None:
        if self.conn._transport is self.transport:
            self.conn._fail_all(PeerError(f"{self.conn.host}:{self.conn.port} sent a frame of size {size}"))
