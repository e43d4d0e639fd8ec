"""Fencing a broker whose process is gone, sooner than its session timeout says (beyond Kafka).

Two signs that a broker's process died, and what the active controller does about each:
- the connection it registered or heartbeat on closed, and it holds no other such connection to this
  controller: its kernel closed the socket, so the process is gone and it is fenced at once. A paused or
  partitioned broker keeps its socket and is fenced by the session timeout as in Kafka.
- a new active controller knocks once on each broker it cannot vouch for (``Controller.unheard``: none of
  the previous controller's sessions came with it); a refused connection is a dead process, fenced
  without waiting out the activation grace. Silence proves nothing, so it fences nothing.

Only the active controller fences, and only from its own sessions: a controller that stops being active
forgets them, so the next activation starts with every registered broker on a fresh session (the grace of
``Controller.activate``) and never fences a broker that can reach it because an old controller lost it.
Sans-IO: connections are opaque keys from the caller, which also does the knocking.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from epochlog.controller.controller import Controller


@dataclass(frozen=True)
class ProbeTarget:
    broker: int
    host: str
    port: int


class BrokerSessions:
    def __init__(self) -> None:
        self.broker_of: dict[Hashable, int] = {}  # connection -> the broker registered on it

    def opened(self, conn: Hashable, broker: int) -> None:
        """``broker`` registered or heartbeat on ``conn``."""
        self.broker_of[conn] = broker

    def forget(self) -> None:
        self.broker_of.clear()

    def closed(self, conn: Hashable) -> int | None:
        """The broker whose last session connection ``conn`` was, or None."""
        broker = self.broker_of.pop(conn, None)
        if broker is None or broker in self.broker_of.values():
            return None
        return broker


def fence_on_close(core: Controller, broker: int) -> bool:
    """Fence ``broker``, whose last session connection closed; False if there is nothing to fence."""
    b = core.brokers.get(broker)
    if b is None or b.fenced:
        return False
    core.fence(broker)
    return True


def probe_targets(core: Controller, colocated_broker: int | None = None) -> list[ProbeTarget]:
    """Whom to knock on: the brokers ``core`` cannot vouch for that have a listener to knock on, except
    the broker in this very process (``colocated_broker``), which is starting, not gone."""
    return [
        ProbeTarget(b.broker_id, b.host, b.port)
        for b in core.unheard()
        if b.port > 0 and b.broker_id != colocated_broker
    ]
