"""An asyncio Kafka-protocol connection from one epochlog process to another (broker or controller).

Requests are pipelined: each gets a correlation id and a future, and the connection's protocol
matches responses to them. kio encodes and decodes the bodies; ``client/wire.py`` holds the header rules.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import struct
from typing import Any

from epochlog.client.wire import decode_response, encode_request
from epochlog.server.connection import BIG_FRAME  # the same threshold for responses as for requests

log = logging.getLogger("epochlog.peer")
_I32 = struct.Struct(">i")


class PeerError(Exception):
    """The peer could not be reached, went away, or did not answer in time."""


class PeerConnection:
    def __init__(self, host: str, port: int, client_id: str) -> None:
        self.host, self.port, self.client_id = host, port, client_id
        self._transport: asyncio.Transport | None = None
        self._pending: dict[int, tuple[asyncio.Future[Any], int, int]] = {}
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
            try:
                transport, _ = await asyncio.wait_for(
                    loop.create_connection(lambda: _Framer(self), self.host, self.port), timeout
                )
            except (OSError, TimeoutError) as e:
                raise PeerError(f"cannot connect to {self.host}:{self.port}: {e}") from None
            self.closed = asyncio.Event()
            self._transport = transport

    def _on_frame(self, frame: bytes | bytearray) -> None:
        (cid,) = _I32.unpack_from(frame, 0)
        entry = self._pending.pop(cid, None)
        if entry is None:
            return
        fut, key, version = entry
        if fut.done():
            return
        try:
            fut.set_result(decode_response(key, version, frame, cid))
        except Exception as e:  # a response we cannot read fails that request only
            fut.set_exception(PeerError(f"bad response from {self.host}:{self.port}: {e}"))

    def _fail_all(self, err: Exception) -> None:
        pending, self._pending = self._pending, {}
        for fut, _k, _v in pending.values():
            if not fut.done():
                fut.set_exception(err)
        if self._transport is not None:
            self._transport.close()
        self._transport = None
        self.closed.set()

    async def request(self, body: Any, timeout: float = 10.0) -> Any:
        if not self.connected:
            await self.connect()
        assert self._transport is not None
        cid = next(self._ids) & 0x7FFFFFFF
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[cid] = (fut, int(type(body).__api_key__), int(type(body).__version__))
        try:
            self._transport.write(encode_request(body, cid, self.client_id))
        except (OSError, RuntimeError) as e:
            self._pending.pop(cid, None)
            raise PeerError(str(e)) from None
        try:
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            self._pending.pop(cid, None)
            raise PeerError(f"{self.host}:{self.port} did not answer within {timeout}s") from None

    def close(self) -> None:
        # Requests in flight went out on this transport and will get no answer: fail them now (a later
        # connection_lost of this transport must not touch a newer connection's requests).
        self._fail_all(PeerError(f"connection to {self.host}:{self.port} closed"))


class _Framer(asyncio.Protocol):
    """Cuts the byte stream into response frames. A large frame (a replica fetch answer of a megabyte)
    is gathered straight into a buffer of its own size and handed over as it is: no stream buffer to
    grow, and no second copy to slice it out (measured on RF=3 followers: StreamReader.readexactly
    cost a copy per fetch and a wakeup per 64 KiB)."""

    def __init__(self, conn: PeerConnection) -> None:
        self.conn = conn
        self.transport: asyncio.BaseTransport | None = None
        self.buf = bytearray()
        self.big: bytearray | None = None
        self.fill = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if self.conn._transport is self.transport:
            self.conn._fail_all(PeerError(f"connection to {self.conn.host}:{self.conn.port} closed"))

    def data_received(self, data: bytes) -> None:
        view = memoryview(data)
        if self.big is not None:
            take = min(len(view), len(self.big) - self.fill)
            self.big[self.fill : self.fill + take] = view[:take]
            self.fill += take
            if self.fill < len(self.big):
                return
            frame, self.big = self.big, None
            self.conn._on_frame(frame)
            view = view[take:]
        buf = self.buf
        buf += view
        pos = 0
        while len(buf) - pos >= 4:
            (size,) = _I32.unpack_from(buf, pos)
            if len(buf) - pos - 4 < size:
                if size >= BIG_FRAME:
                    self.big = bytearray(size)
                    self.fill = len(buf) - pos - 4
                    self.big[: self.fill] = buf[pos + 4 :]
                    pos = len(buf)
                break
            frame = bytes(buf[pos + 4 : pos + 4 + size])
            pos += 4 + size
            self.conn._on_frame(frame)
        del buf[:pos]
