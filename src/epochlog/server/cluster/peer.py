"""An asyncio Kafka-protocol connection from one epochlog process to another (broker or controller).

Requests are pipelined: each gets a correlation id and a future, and a reader task matches
responses to them. kio encodes and decodes the bodies; ``client/wire.py`` holds the header rules.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import struct
from typing import Any

from epochlog.client.wire import decode_response, encode_request

log = logging.getLogger("epochlog.peer")
_I32 = struct.Struct(">i")
STREAM_LIMIT = 64 * 1024 * 1024


class PeerError(Exception):
    """The peer could not be reached, went away, or did not answer in time."""


class PeerConnection:
    def __init__(self, host: str, port: int, client_id: str) -> None:
        self.host, self.port, self.client_id = host, port, client_id
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, tuple[asyncio.Future[Any], int, int]] = {}
        self._ids = itertools.count(1)
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self.closed = asyncio.Event()

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def connect(self, timeout: float = 5.0) -> None:
        async with self._lock:
            if self.connected:
                return
            try:
                # A large stream limit: with the default 64 KiB the reader pauses and resumes the socket
                # every 128 KiB of a 1 MiB replica fetch response, which more than doubled its latency.
                self._reader, self._writer = await asyncio.wait_for(
                    asyncio.open_connection(self.host, self.port, limit=STREAM_LIMIT), timeout
                )
            except (OSError, TimeoutError) as e:
                raise PeerError(f"cannot connect to {self.host}:{self.port}: {e}") from None
            self.closed = asyncio.Event()
            self._task = asyncio.create_task(self._read_loop(self._reader))

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                size = _I32.unpack(await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                (cid,) = _I32.unpack_from(frame, 0)
                entry = self._pending.pop(cid, None)
                if entry is None:
                    continue
                fut, key, version = entry
                if fut.done():
                    continue
                try:
                    fut.set_result(decode_response(key, version, frame, cid))
                except Exception as e:  # a response we cannot read fails that request only
                    fut.set_exception(PeerError(f"bad response from {self.host}:{self.port}: {e}"))
        except (asyncio.IncompleteReadError, OSError, asyncio.CancelledError):
            pass
        finally:
            self._fail_all(PeerError(f"connection to {self.host}:{self.port} closed"))

    def _fail_all(self, err: Exception) -> None:
        pending, self._pending = self._pending, {}
        for fut, _k, _v in pending.values():
            if not fut.done():
                fut.set_exception(err)
        if self._writer is not None:
            self._writer.close()
        self._writer = None
        self.closed.set()

    async def request(self, body: Any, timeout: float = 10.0) -> Any:
        if not self.connected:
            await self.connect()
        assert self._writer is not None
        cid = next(self._ids) & 0x7FFFFFFF
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[cid] = (fut, int(type(body).__api_key__), int(type(body).__version__))
        try:
            self._writer.write(encode_request(body, cid, self.client_id))
        except (OSError, RuntimeError) as e:
            self._pending.pop(cid, None)
            raise PeerError(str(e)) from None
        try:
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            self._pending.pop(cid, None)
            raise PeerError(f"{self.host}:{self.port} did not answer within {timeout}s") from None

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._writer is not None:
            self._writer.close()
            self._writer = None
