"""Framing (server/framing.py) as both ends use it: frames split across reads arrive whole and in order,
large frames are read straight into buffers they own, bad sizes stop the stream."""

from __future__ import annotations

import struct
from types import SimpleNamespace
from typing import Any

import pytest

from epochlog.server.connection import KafkaConnection
from epochlog.server.framing import BIG_FRAME, SCRATCH_BYTES, FramedProtocol, frame_buffer


def _conn(frames: list[Any]) -> KafkaConnection:
    broker = SimpleNamespace(config=SimpleNamespace(socket_request_max_bytes=100 << 20), connections=set(), limits=None)
    conn = KafkaConnection(broker)  # type: ignore[arg-type]
    conn._handle_frame = frames.append  # type: ignore[method-assign]
    return conn


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def feed(proto: FramedProtocol, data: bytes) -> None:
    """What the event loop does with one read of ``data``: fill the buffer the protocol offers, report it,
    and repeat while bytes are left (a read never exceeds the buffer offered)."""
    view = memoryview(data)
    while view:
        buf = proto.get_buffer(-1)
        assert len(buf) > 0
        n = min(len(buf), len(view))
        buf[:n] = view[:n]
        proto.buffer_updated(n)
        view = view[n:]


@pytest.mark.parametrize("cut", [1, 3, 4, 5, 1000, 70_000, 199_999])
def test_frames_split_anywhere_arrive_whole_and_in_order(cut: int) -> None:
    big = bytes(range(256)) * 800  # 204,800 bytes: above BIG_FRAME
    assert len(big) > BIG_FRAME
    small1, small2 = b"a" * 10, b"b" * 300
    stream = _frame(big) + _frame(small1) + _frame(small2) + _frame(big[:5000])
    frames: list[Any] = []
    conn = _conn(frames)
    for i in range(0, len(stream), cut):
        feed(conn, stream[i : i + cut])
    assert [bytes(f) for f in frames] == [big, small1, small2, big[:5000]]
    assert not conn._fr_partial and conn._fr_big_view is None


def test_a_large_frame_that_arrived_in_pieces_is_a_writable_buffer_of_its_own() -> None:
    body = b"x" * (BIG_FRAME * 3)
    stream = _frame(body) + _frame(b"tail")
    frames: list[Any] = []
    conn = _conn(frames)
    feed(conn, stream[:1000])
    feed(conn, stream[1000:])
    first = frames[0]
    assert isinstance(first, memoryview) and not first.readonly  # a Produce may patch offsets in place
    first[0:1] = b"y"
    assert bytes(frames[1]) == b"tail"


@pytest.mark.parametrize("cut", [1, 4, 7, 65_536, 150_000])
def test_peer_responses_split_anywhere_arrive_whole_and_in_order(cut: int) -> None:
    from epochlog.server.cluster.peer import _Framer

    got: list[bytes] = []
    framer = _Framer(SimpleNamespace(_on_frame=lambda f: got.append(bytes(f))))  # type: ignore[arg-type]
    bodies = [b"\x00\x00\x00\x01" + bytes(range(256)) * 600, b"\x00\x00\x00\x02ok", b"\x00\x00\x00\x03" * 50_000]
    stream = b"".join(_frame(b) for b in bodies)
    for i in range(0, len(stream), cut):
        feed(framer, stream[i : i + cut])
    assert got == bodies
    assert not framer._fr_partial and framer._fr_big_view is None


def test_a_large_frame_is_read_into_its_own_buffer_without_passing_through_scratch() -> None:
    body = bytes(range(256)) * 4096  # 1 MiB
    frames: list[Any] = []
    conn = _conn(frames)
    stream = _frame(body)
    feed(conn, stream[:1000])
    target = conn.get_buffer(-1)
    assert len(target) == len(body) - 996  # exactly the rest of this frame: nothing after it is read into it
    feed(conn, stream[1000:])
    assert len(frames) == 1 and bytes(frames[0]) == body


def test_frames_around_the_scratch_size_arrive_whole() -> None:
    bodies = [b"s" * (BIG_FRAME - 1), b"t" * 3, b"u" * (SCRATCH_BYTES + 7), b"v" * (BIG_FRAME - 5)]
    frames: list[Any] = []
    conn = _conn(frames)
    feed(conn, b"".join(_frame(b) for b in bodies))
    assert [bytes(f) for f in frames] == bodies


@pytest.mark.parametrize("size", [-1, (100 << 20) + 1])
def test_a_frame_size_out_of_bounds_closes_the_connection_and_stops_framing(size: int) -> None:
    frames: list[Any] = []
    conn = _conn(frames)
    closed: list[bool] = []
    conn.close = lambda: (closed.append(True), conn.stop_framing())  # type: ignore[method-assign]
    feed(conn, _frame(b"ok") + struct.pack(">i", size) + _frame(b"never"))
    assert [bytes(f) for f in frames] == [b"ok"] and closed == [True]


def test_frame_buffer_is_a_writable_bytearray_of_the_size_asked() -> None:
    buf = frame_buffer(3 << 20)
    assert isinstance(buf, bytearray) and len(buf) == 3 << 20
    buf[-1:] = b"z"
    assert buf[-1:] == b"z"


def test_connections_on_different_threads_do_not_share_a_scratch_buffer() -> None:
    import threading

    seen: list[object] = []

    def grab() -> None:
        seen.append(_conn([]).get_buffer(-1).obj)  # kept alive, so no id is reused

    threads = [threading.Thread(target=grab) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    here = _conn([]).get_buffer(-1).obj
    assert len({id(o) for o in (*seen, here)}) == 3


def test_a_peer_answer_with_a_negative_size_fails_the_connection_not_the_process() -> None:
    from epochlog.server.cluster.peer import PeerConnection, PeerError, _Framer

    failed: list[Exception] = []
    conn = PeerConnection("127.0.0.1", 1, "t")
    conn._fail_all = failed.append  # type: ignore[method-assign]
    framer = _Framer(conn)
    got: list[bytes] = []
    conn._on_frame = lambda f: got.append(bytes(f))  # type: ignore[method-assign]
    feed(framer, _frame(b"\x00\x00\x00\x01ok") + struct.pack(">i", -5) + _frame(b"\x00\x00\x00\x02no"))
    assert got == [b"\x00\x00\x00\x01ok"]
    assert len(failed) == 1 and isinstance(failed[0], PeerError)
