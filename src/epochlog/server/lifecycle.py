"""Run one server object (a broker or the controller) in the foreground until SIGINT or SIGTERM."""

from __future__ import annotations

import asyncio
import ctypes
import gc
import signal
import sys
from collections.abc import Callable
from typing import Any, Protocol


class Server(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...


def tune_allocator() -> None:
    """Keep glibc from handing megabyte buffers back to the kernel after every request.

    Produce requests and replica fetches move ~1 MiB buffers. By default glibc serves each from a fresh
    mmap (or trims the heap after it), so every one costs ~256 page faults and zeroing: measured ~900
    faults and ~1 ms of CPU per MiB on an RF=3 leader. Raising both thresholds keeps that memory in the
    heap for reuse. No-op where the C library is not glibc.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    mallopt(m_mmap_threshold, 32 << 20)
    mallopt(m_trim_threshold, 256 << 20)


def settle_heap() -> None:
    """Move everything alive after start-up (modules, schema classes, the metadata image) out of the
    collector's reach. A full collection walks every tracked object, and with ~64k of them from start-up
    it paused a broker's event loop for 40-85 ms, most often right after a leadership change (whose new
    objects tip the full-collection threshold): a gap in acks=all writes exactly when a failover should
    be quick. Frozen objects are left out of cycle collection (reference counting still frees them), which
    suits objects that live as long as the process; what is created later is collected as usual."""
    gc.collect()
    gc.freeze()


def run_until_signal(make: Callable[[], Server], on_ready: Callable[[Any], None] | None = None) -> None:
    """Start the server on uvloop (when installed), wait for SIGINT/SIGTERM, then stop it cleanly."""
    tune_allocator()
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover
        pass

    async def main() -> int:
        server = make()
        await server.start()
        settle_heap()
        if on_ready is not None:
            on_ready(server)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        # A server may also decide to stop by itself (a broker whose every log directory failed).
        must_stop: asyncio.Event | None = getattr(server, "must_stop", None)
        waits = [asyncio.ensure_future(stop.wait())]
        if must_stop is not None:
            waits.append(asyncio.ensure_future(must_stop.wait()))
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for w in waits:
            w.cancel()
        await server.stop()
        return int(getattr(server, "exit_code", 0))

    code = asyncio.run(main())
    if code:
        sys.exit(code)
