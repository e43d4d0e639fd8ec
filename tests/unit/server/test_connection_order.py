"""A connection handles its requests in the order they came (connection.py): a handler answering with a
coroutine holds the frames behind it until it is done, one answering ``Waiting`` does not, and the held
frames count against reading and the request memory pool."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from epochlog.server.connection import KafkaConnection
from epochlog.server.limits import ConnectionLimits
from epochlog.server.responses import Waiting

pytestmark = pytest.mark.unit


class _Transport:
    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.reading = True
        self.closed = False

    def get_extra_info(self, name: str) -> Any:
        return None

    def set_write_buffer_limits(self, high: int) -> None:
        pass

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def close(self) -> None:
        self.closed = True


def _request(corr: int) -> bytes:
    """A Metadata v0 request frame (size prefix included); only its header is read here."""
    body = struct.pack(">hhih", 3, 0, corr, 1) + b"c" + struct.pack(">i", 0)
    return struct.pack(">i", len(body)) + body


def _connect(handler: Callable[[int], Any], limits: ConnectionLimits | None = None) -> tuple[KafkaConnection, Any]:
    """A connection whose broker answers request ``corr`` with ``handler(corr)``."""
    broker = SimpleNamespace(
        config=SimpleNamespace(socket_request_max_bytes=1 << 20),
        connections=set(),
        is_supported=lambda key, version: True,
        dispatch_from=lambda conn, header, frame: handler(header.correlation_id),
        limits=limits,
        observe_request=lambda request, started: None,
        on_connection_lost=lambda conn: None,
    )
    conn = KafkaConnection(broker)  # type: ignore[arg-type]
    transport = _Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn, transport


def _feed(conn: KafkaConnection, data: bytes) -> None:
    """One read of ``data``, as the event loop reports it."""
    buf = conn.get_buffer(-1)
    buf[: len(data)] = data
    conn.buffer_updated(len(data))


async def _until(cond: Callable[[], bool]) -> None:
    for _ in range(1000):
        if cond():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


def test_frames_behind_a_coroutine_wait_until_it_has_taken_effect() -> None:
    async def run() -> None:
        applied: list[int] = []
        gate = asyncio.Event()

        async def slow() -> bytes:
            await gate.wait()
            applied.append(1)
            return b"r1"

        def handler(corr: int) -> Any:
            if corr == 1:
                return slow()
            applied.append(corr)
            return f"r{corr}".encode()

        limits = ConnectionLimits()
        conn, transport = _connect(handler, limits)
        frames = _request(1) + _request(2) + _request(3)
        _feed(conn, frames)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert applied == []  # 2 and 3 came in the same read as 1, and wait for it
        assert not transport.reading and conn.busy
        assert limits.queued_bytes == len(frames) - 3 * 4  # every request's bytes, held ones included
        gate.set()
        await _until(lambda: applied == [1, 2, 3])
        await _until(lambda: b"".join(transport.written) == b"r1r2r3")
        assert transport.reading and not conn.busy and limits.queued_bytes == 0

    asyncio.run(run())


def test_a_waiting_answer_lets_the_next_requests_go_on_and_answers_stay_in_order() -> None:
    async def run() -> None:
        applied: list[int] = []
        gate = asyncio.Event()

        async def wait_then_answer() -> bytes:
            await gate.wait()
            return b"r1"

        async def verify_then_append() -> Any:
            await asyncio.sleep(0)  # e.g. asking the transaction coordinator
            applied.append(4)
            return Waiting(wait_then_answer())

        def handler(corr: int) -> Any:
            if corr == 1:
                applied.append(1)  # took effect at once; only the answer waits (acks=all)
                return Waiting(wait_then_answer())
            if corr == 4:
                return verify_then_append()
            applied.append(corr)
            return f"r{corr}".encode()

        conn, transport = _connect(handler)
        _feed(conn, _request(1) + _request(2))
        assert applied == [1, 2]  # 2 did not wait for 1's answer
        _feed(conn, _request(4) + _request(5))
        assert applied == [1, 2]
        # 4 holds 5 back only until its coroutine answers Waiting: 1's answer is still pending then.
        await _until(lambda: applied == [1, 2, 4, 5])
        assert transport.written == [] and transport.reading
        gate.set()
        await _until(lambda: b"".join(transport.written) == b"r1r2r1r5")
        assert not conn.busy

    asyncio.run(run())


def test_closing_drops_the_held_frames_and_gives_their_bytes_back() -> None:
    async def run() -> None:
        applied: list[int] = []
        gate = asyncio.Event()

        async def slow() -> bytes:
            await gate.wait()
            return b"r1"

        def handler(corr: int) -> Any:
            applied.append(corr)
            return slow() if corr == 1 else b"r"

        limits = ConnectionLimits()
        conn, transport = _connect(handler, limits)
        _feed(conn, _request(1) + _request(2))
        assert limits.queued_bytes > 0
        conn.close()
        conn.connection_lost(None)
        gate.set()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert applied == [1] and transport.written == [] and limits.queued_bytes == 0

    asyncio.run(run())


def test_a_coroutine_that_sends_no_answer_does_not_stall_the_answers_behind_it() -> None:
    from epochlog.server.responses import NO_RESPONSE

    async def run() -> None:
        async def acks_zero() -> Any:
            await asyncio.sleep(0)
            return NO_RESPONSE

        conn, transport = _connect(lambda corr: acks_zero() if corr == 1 else b"r2")
        _feed(conn, _request(1) + _request(2))
        await _until(lambda: b"".join(transport.written) == b"r2")
        assert not transport.closed and not conn.busy

    asyncio.run(run())


def test_requests_beyond_max_in_flight_wait_for_answers_to_go_out() -> None:
    # A client can pipeline a thousand small Fetch requests in one socket read and never read the
    # answers; unless the frames behind MAX_IN_FLIGHT wait, the broker builds every answer.
    from epochlog.server.connection import MAX_IN_FLIGHT

    async def run() -> None:
        applied: list[int] = []
        first, rest = asyncio.Event(), asyncio.Event()

        async def answer_when_let(corr: int) -> bytes:
            await (first if corr == 1 else rest).wait()
            return f"r{corr},".encode()

        def handler(corr: int) -> Any:
            applied.append(corr)
            return Waiting(answer_when_let(corr))  # a long-polling Fetch: took effect, answer pending

        limits = ConnectionLimits()
        conn, transport = _connect(handler, limits)
        total = MAX_IN_FLIGHT + 36
        _feed(conn, b"".join(_request(c) for c in range(1, total + 1)))
        assert applied == list(range(1, MAX_IN_FLIGHT + 1))
        assert not transport.reading
        first.set()
        await _until(lambda: len(applied) == MAX_IN_FLIGHT + 1)  # one answer out, one more request in
        assert transport.written == [b"r1,"]
        rest.set()
        await _until(lambda: b"".join(transport.written).count(b",") == total)
        assert applied == list(range(1, total + 1))
        assert b"".join(transport.written) == b"".join(f"r{c},".encode() for c in range(1, total + 1))
        assert transport.reading and not conn.busy and limits.queued_bytes == 0

    asyncio.run(run())


def test_a_client_not_reading_its_answers_holds_the_requests_behind() -> None:
    async def run() -> None:
        applied: list[int] = []

        def handler(corr: int) -> Any:
            applied.append(corr)
            return f"r{corr}".encode()

        conn, transport = _connect(handler)
        _feed(conn, _request(1))
        conn.pause_writing()  # the transport's buffer went over its high-water mark
        _feed(conn, _request(2) + _request(3))
        assert applied == [1] and not transport.reading
        conn.resume_writing()
        assert applied == [1, 2, 3] and transport.reading
        assert b"".join(transport.written) == b"r1r2r3"

    asyncio.run(run())
