"""What one client may take of a broker, with Kafka's names and defaults (SocketServerConfigs):

- ``max.connections`` and ``max.connections.per.ip`` (+ ``max.connections.per.ip.overrides``,
  ``host:100,ip:200``): a connection past either is closed at once, with a log line;
- ``queued.max.request.bytes``: the bytes of requests read but not yet answered, across connections; at
  the limit every connection stops reading until answers free room (-1, the default: no limit);
- ``connections.max.idle.ms``: a connection with no request or answer for that long is closed.

The size of a Fetch answer (``fetch.max.bytes``) is capped in handlers/fetch.py and a frame's size
(``socket.request.max.bytes``) in connection.py.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("epochlog.connection")

INT_MAX = 2**31 - 1


@dataclass
class ConnectionLimits:
    max_connections: int = INT_MAX
    max_per_ip: int = INT_MAX
    per_ip_overrides: dict[str, int] = field(default_factory=dict)
    queued_max_request_bytes: int = -1
    idle_ms: int = 600_000
    open_by_ip: Counter[str] = field(default_factory=Counter)
    queued_bytes: int = 0
    paused: set[Any] = field(default_factory=set)  # connections that stopped reading for the memory pool

    # -- connection counts --------------------------------------------------------------------
    def admit(self, ip: str) -> str | None:
        """Count a new connection from ``ip``; the reason it may not stay, or None."""
        total = sum(self.open_by_ip.values())
        if total >= self.max_connections:
            return f"max.connections={self.max_connections} reached"
        limit = self.per_ip_overrides.get(ip, self.max_per_ip)
        if self.open_by_ip[ip] >= limit:
            return f"max.connections.per.ip={limit} reached for {ip}"
        self.open_by_ip[ip] += 1
        return None

    def release(self, ip: str) -> None:
        self.open_by_ip[ip] -= 1
        if self.open_by_ip[ip] <= 0:
            del self.open_by_ip[ip]

    # -- the request memory pool -----------------------------------------------------------------
    @property
    def pool_full(self) -> bool:
        return 0 <= self.queued_max_request_bytes <= self.queued_bytes

    def take(self, n: int) -> None:
        self.queued_bytes += n

    def give_back(self, n: int) -> None:
        self.queued_bytes -= n
        if self.paused and not self.pool_full:
            waiting, self.paused = self.paused, set()
            for conn in waiting:
                conn.pool_has_room()


def parse_overrides(raw: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: 'host:100,ip:200' (the count after the last colon)."""
    out: dict[str, int] = {}
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        if not sep or not host:
            raise ValueError(f"max.connections.per.ip.overrides: {item!r} is not host:count")
        out[host] = int(count)
    return out
