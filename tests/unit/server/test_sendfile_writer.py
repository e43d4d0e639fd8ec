"""SendfileWriter over a real socket pair: order across a full socket, the transport fallback, truncation."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest
import uvloop

from epochlog.server.sendfile_writer import REGION_BYTES, SendfileWriter
from epochlog.storage.file_region import FileRegion


class FakeTransport:
    def __init__(self) -> None:
        self.buffered = 0

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def is_closing(self) -> bool:
        return False


class FakeConn:
    peer = "test"

    def __init__(self) -> None:
        self.closed = False
        self.done = 0
        self.transport_writes: list[list[Any]] = []

    def close(self) -> None:
        self.closed = True

    def direct_writes_done(self) -> None:
        self.done += 1

    def write_to_transport(self, out: list[Any]) -> None:
        self.transport_writes.append(out)


def region(path: Path, position: int, length: int) -> FileRegion:
    return FileRegion(os.open(path, os.O_RDONLY), path, position, length)


def pair() -> tuple[socket.socket, socket.socket]:
    a, b = socket.socketpair()
    for s in (a, b):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    a.setblocking(False)
    b.setblocking(False)
    return a, b


async def drain(sock: socket.socket, n: int, conn: FakeConn, slow: bool = True) -> bytes:
    """Read ``n`` bytes, slowly (small reads, yielding to the loop between them), as a slow consumer does."""
    out = bytearray()
    deadline = time.monotonic() + 30
    while len(out) < n and not conn.closed:
        assert time.monotonic() < deadline, f"{len(out)} of {n} bytes"
        try:
            out += sock.recv(1024 if slow else 1 << 20)
        except BlockingIOError:
            await asyncio.sleep(0)
            continue
        await asyncio.sleep(0)
    return bytes(out)


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request: pytest.FixtureRequest) -> Any:
    def runner(coro: Any) -> Any:
        if request.param == "uvloop":
            return uvloop.run(coro)
        return asyncio.run(coro)

    return runner


@pytest.fixture
def segment(tmp_path: Path) -> Path:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(os.urandom(3 << 20))
    return path


def test_answers_stay_in_order_across_a_full_socket(run: Any, segment: Path) -> None:
    data = segment.read_bytes()

    async def main() -> None:
        a, b = pair()
        conn, transport = FakeConn(), FakeTransport()
        w = SendfileWriter(conn, transport, a.fileno())  # type: ignore[arg-type]
        before = REGION_BYTES.sent
        w.write([b"head1", region(segment, 100, 1 << 20), b"mid", region(segment, 5, 7), b"end1"])
        assert w.busy and w.waiting  # the socket filled: the rest waits for it
        w.write([b"second answer"])  # queued behind, not written around the first
        big = os.urandom(700_000)  # a bytes piece the socket takes in parts too
        w.write([region(segment, 2 << 20, 300_000), big, b"third"])
        expected = (
            b"head1"
            + data[100 : 100 + (1 << 20)]
            + b"mid"
            + data[5:12]
            + b"end1"
            + b"second answer"
            + data[2 << 20 : (2 << 20) + 300_000]
            + big
            + b"third"
        )
        got = await drain(b, len(expected), conn)
        assert got == expected
        deadline = time.monotonic() + 10
        while w.busy and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert not w.busy and not w.waiting and w.fd == -1 and conn.done >= 1
        assert REGION_BYTES.sent - before == (1 << 20) + 7 + 300_000
        assert not conn.closed and not conn.transport_writes
        a.close()
        b.close()

    run(main())


def test_a_busy_transport_gets_the_regions_as_bytes(run: Any, segment: Path) -> None:
    data = segment.read_bytes()

    async def main() -> None:
        a, b = pair()
        conn, transport = FakeConn(), FakeTransport()
        transport.buffered = 10  # the transport holds bytes not yet sent: writing around them would reorder
        w = SendfileWriter(conn, transport, a.fileno())  # type: ignore[arg-type]
        r = region(segment, 10, 1000)
        w.write([b"h", r])
        assert conn.transport_writes == [[b"h", data[10:1010]]]
        assert r.fd == -1 and not w.busy
        a.close()
        b.close()

    run(main())


def test_a_file_that_shrinks_mid_answer_closes_the_connection(run: Any, segment: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy.log"
    copy.write_bytes(segment.read_bytes())

    async def main() -> None:
        a, b = pair()
        conn, transport = FakeConn(), FakeTransport()
        w = SendfileWriter(conn, transport, a.fileno())  # type: ignore[arg-type]
        w.write([b"head", region(copy, 0, 2 << 20)])
        assert w.waiting
        os.truncate(copy, 1 << 20)  # a follower truncating its log under the answer
        got = await drain(b, 4 + (2 << 20), conn, slow=False)
        assert conn.closed  # never a short or padded frame: the client sees the connection end
        assert len(got) <= 4 + (1 << 20)
        w.close()  # what the connection does when it closes
        assert w.fd == -1 and not w.busy
        a.close()
        b.close()

    run(main())


def test_closing_drops_the_queue_and_its_descriptors(run: Any, segment: Path) -> None:
    async def main() -> None:
        a, b = pair()
        conn, transport = FakeConn(), FakeTransport()
        w = SendfileWriter(conn, transport, a.fileno())  # type: ignore[arg-type]
        r1, r2 = region(segment, 0, 2 << 20), region(segment, 0, 10)
        w.write([b"x", r1, r2])
        assert w.waiting
        dup = w.fd
        w.close()
        assert r1.fd == -1 and r2.fd == -1 and w.fd == -1 and not w.busy
        with pytest.raises(OSError):
            os.fstat(dup)
        a.close()
        b.close()

    run(main())
