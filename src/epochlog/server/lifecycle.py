"""Run one server object (a broker or the controller) in the foreground until SIGINT or SIGTERM."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from typing import Any, Protocol


class Server(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...


def run_until_signal(make: Callable[[], Server], on_ready: Callable[[Any], None] | None = None) -> None:
    """Start the server on uvloop (when installed), wait for SIGINT/SIGTERM, then stop it cleanly."""
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover
        pass

    async def main() -> None:
        server = make()
        await server.start()
        if on_ready is not None:
            on_ready(server)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await server.stop()

    asyncio.run(main())
