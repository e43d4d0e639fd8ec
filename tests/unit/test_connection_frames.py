"""KafkaConnection framing: frames split across reads, large frames gathered into buffers they own."""

from __future__ import annotations

import struct
from types import SimpleNamespace
from typing import Any

import pytest

from epochlog.server.connection import BIG_FRAME, KafkaConnection


def _conn(frames: list[Any]) -> KafkaConnection:
    broker = SimpleNamespace(config=SimpleNamespace(socket_request_max_bytes=100 << 20), connections=set())
    conn = KafkaConnection(broker)  # type: ignore[arg-type]
    conn._handle_frame = frames.append  # type: ignore[method-assign]
    return conn


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


@pytest.mark.parametrize("cut", [1, 3, 4, 5, 1000, 70_000, 199_999])
def test_frames_split_anywhere_arrive_whole_and_in_order(cut: int) -> None:
    big = bytes(range(256)) * 800  # 204,800 bytes: above BIG_FRAME
    assert len(big) > BIG_FRAME
    small1, small2 = b"a" * 10, b"b" * 300
    stream = _frame(big) + _frame(small1) + _frame(small2) + _frame(big[:5000])
    frames: list[Any] = []
    conn = _conn(frames)
    for i in range(0, len(stream), cut):
        conn.data_received(stream[i : i + cut])
    assert [bytes(f) for f in frames] == [big, small1, small2, big[:5000]]
    assert not conn.buf and conn.big is None


def test_a_large_frame_that_arrived_in_pieces_is_a_writable_buffer_of_its_own() -> None:
    body = b"x" * (BIG_FRAME * 3)
    stream = _frame(body) + _frame(b"tail")
    frames: list[Any] = []
    conn = _conn(frames)
    conn.data_received(stream[:1000])
    conn.data_received(stream[1000:])
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
        framer.data_received(stream[i : i + cut])
    assert got == bodies
    assert not framer.buf and framer.big is None
