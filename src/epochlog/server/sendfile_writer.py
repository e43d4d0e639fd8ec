"""Writing answers that hold file regions (storage/file_region.py): a consumer's records go from the segment
file to the socket with os.sendfile, without passing through Python.

uvloop has no loop.sendfile, so this writes to the socket itself, and only while the transport's own
write buffer is empty: then nothing the transport holds can be overtaken. Once it has begun, everything
the connection answers after it waits here in order, and is written here, until the queue is empty; then
the transport writes again. When the socket is full this waits for it to become writable (add_writer)
and carries on where it stopped.

Writes made within the call that queued the answer use the transport's descriptor (nothing can close it
meanwhile); once this has to wait for the socket, it writes through a duplicate of it until the queue is
empty: the transport closes its own when the connection ends, and a descriptor number the kernel may have
handed to some other file (a segment) must never be written to.

Where sendfile cannot be used (TLS, a transport with data queued, no socket) the regions are read into
bytes here and the pieces go to the transport as before.

A region whose file shrank under it (a follower truncating its log; retention and compaction delete or
replace whole files, which the region's own descriptor keeps readable) cannot be sent whole: its size is
already in the frame's header, maybe already sent. Like Kafka (a FileRecords truncated during the write
fails the send), the connection is closed rather than a frame sent short, padded or with other bytes.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import deque
from typing import TYPE_CHECKING, Any

from epochlog.storage.file_region import FileRegion, RegionTruncated

if TYPE_CHECKING:
    from epochlog.server.connection import KafkaConnection

log = logging.getLogger("epochlog.connection")

MAX_IOV = 512  # pieces per writev (the kernel's IOV_MAX is 1024)


class _RegionBytes:
    """The process's region bytes: sent with sendfile, or read into memory (TLS, a busy transport)."""

    sent = 0
    read = 0


REGION_BYTES = _RegionBytes()


def has_region(pieces: list[Any]) -> bool:
    return any(type(p) is FileRegion for p in pieces)


def read_regions(pieces: list[Any]) -> list[Any]:
    """The pieces with every region read into bytes (RegionTruncated when a file shrank under one); the
    regions are closed whatever happens."""
    out: list[Any] = []
    for i, p in enumerate(pieces):
        if type(p) is FileRegion:
            REGION_BYTES.read += len(p)
            try:
                p = p.read()  # closes it
            except BaseException:
                close_regions(pieces[i + 1 :])
                raise
        out.append(p)
    return out


def close_regions(pieces: Any) -> None:
    for p in pieces:
        if type(p) is FileRegion:
            p.close()


class SendfileWriter:
    """One connection's direct writes. ``queue`` holds what is still to be written, in order; ``done`` is
    how much of its first piece has been."""

    def __init__(self, conn: KafkaConnection, transport: asyncio.Transport, sock_fd: int) -> None:
        self.conn = conn
        self.transport = transport
        self.sock_fd = sock_fd
        self.fd = -1  # our duplicate of sock_fd while waiting for the socket
        self.queue: deque[Any] = deque()
        self.done = 0
        self.left = 0  # bytes still queued, for backpressure (connection.HIGH_WATER)
        self.waiting = False
        self.sent_direct = 0  # responses' bytes written here rather than by the transport (tests, metrics)

    @property
    def busy(self) -> bool:
        return bool(self.queue)

    def write(self, pieces: list[Any]) -> None:
        """Write an answer's pieces (bytes and regions) after everything written before."""
        if self.queue:
            self.queue.extend(pieces)
            self.left += sum(len(p) for p in pieces)
            return
        if self.transport.get_write_buffer_size() or self.transport.is_closing():
            try:
                self.conn.write_to_transport(read_regions(pieces))
            except RegionTruncated as e:
                log.warning("closing %s: a segment file shrank under a fetch answer: %s", self.conn.peer, e)
                self.conn.close()
            return
        self.queue.extend(pieces)
        self.left = sum(len(p) for p in pieces)
        self.done = 0
        self._pump()

    def _pump(self) -> None:
        queue = self.queue
        fd = self.fd if self.fd >= 0 else self.sock_fd
        try:
            while queue:
                first = queue[0]
                if type(first) is FileRegion:
                    n = os.sendfile(fd, first.fd, first.position + self.done, first.length - self.done)
                    if n == 0:
                        raise RegionTruncated(f"{first.path}: ends before {first.position + first.length}")
                    REGION_BYTES.sent += n
                else:
                    n = self._writev(fd, first)
                self.sent_direct += n
                self.left -= n
                self._advance(n)
        except (BlockingIOError, InterruptedError):
            self._wait()
            return
        except RegionTruncated as e:
            log.warning("closing %s: a segment file shrank while its records were being sent: %s", self.conn.peer, e)
            self.conn.close()
            return
        except OSError as e:  # the peer went away: the transport will see it and close the connection
            log.debug("closing %s: direct write failed: %s", self.conn.peer, e)
            self.conn.close()
            return
        self._stop_waiting()
        self.conn.direct_writes_done()

    def _writev(self, fd: int, first: Any) -> int:
        """The bytes pieces at the head of the queue (up to the next region) with one writev."""
        bufs = [memoryview(first)[self.done :] if self.done else first]
        for p in self.queue:
            if p is first:
                continue
            if type(p) is FileRegion or len(bufs) >= MAX_IOV:
                break
            bufs.append(p)
        return os.writev(fd, bufs)

    def _advance(self, n: int) -> None:
        """``n`` more bytes written from the head of the queue."""
        queue = self.queue
        done = self.done + n
        while queue and done >= len(queue[0]):
            done -= len(queue[0])
            p = queue.popleft()
            if type(p) is FileRegion:
                p.close()
        self.done = done

    def _wait(self) -> None:
        if not self.waiting:
            if self.fd < 0:
                self.fd = os.dup(self.sock_fd)
            self.waiting = True
            asyncio.get_running_loop().add_writer(self.fd, self._pump)

    def _stop_waiting(self) -> None:
        if self.waiting:
            self.waiting = False
            asyncio.get_running_loop().remove_writer(self.fd)
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def close(self) -> None:
        """The connection is closing: drop what is queued (closing its regions) and our descriptor."""
        close_regions(self.queue)
        self.queue.clear()
        self.left = 0
        if self.fd >= 0:
            if self.waiting:
                self.waiting = False
                try:
                    asyncio.get_running_loop().remove_writer(self.fd)
                except RuntimeError:  # no running loop: the loop is gone with its watchers
                    pass
            os.close(self.fd)
            self.fd = -1
