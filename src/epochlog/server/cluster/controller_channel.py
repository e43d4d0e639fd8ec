"""A broker's way to the active controller, whichever of the quorum's controllers that is.

The broker knows the controllers from ``controller.quorum.voters`` (or the bootstrap servers). It
learns which one leads from its metadata fetches (the quorum answers every fetch with the current
leader and epoch) and sends registrations, heartbeats, ISR changes and forwarded admin requests there.
A controller that answers NOT_CONTROLLER, or cannot be reached, sends the request on to the next one:
a failover costs a client a delay, not an error.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from epochlog.protocol.errors import Err
from epochlog.server.cluster.backoff import ExponentialBackoff
from epochlog.server.cluster.peer import PeerConnection, PeerError
from epochlog.server.peer_security import PeerSecurity

log = logging.getLogger("epochlog.broker")
PURPOSES = ("session", "rpc", "metadata")
# How long one controller gets to answer before the next is tried: a paused or cut-off controller keeps
# its connections open and never answers, so only a clock finds it out.
ATTEMPT_S = 2.5


def says_not_controller(resp: Any) -> bool:
    """True if the answer (at the top or in any of its per-item rows) is NOT_CONTROLLER."""
    if int(getattr(resp, "error_code", 0) or 0) == Err.NOT_CONTROLLER:
        return True
    for name in ("topics", "responses", "results", "filter_results"):
        for row in getattr(resp, name, None) or ():
            if int(getattr(row, "error_code", 0) or 0) == Err.NOT_CONTROLLER:
                return True
    return False


class ControllerChannel:
    def __init__(self, node_id: int, controllers: list[tuple[int, str, int]]) -> None:
        """``controllers``: (node id, host, port); a bootstrap server whose id is unknown has id -1."""
        if not controllers:
            raise ValueError("no controller to talk to")
        self.node_id = node_id
        self.controllers = controllers
        self.target = 0  # index into controllers of the one we believe is active
        self.leader_epoch = -1
        self.known_leader = -1
        self.logged_leader = -1
        self._conns: dict[tuple[str, int], PeerConnection] = {}
        self.changed = asyncio.Event()
        self.security: PeerSecurity | None = None  # the controller listener's TLS/SASL, set by the broker

    def connection(self, purpose: str) -> PeerConnection:
        key = (purpose, self.target)
        conn = self._conns.get(key)
        if conn is None:
            _, host, port = self.controllers[self.target]
            conn = self._conns[key] = PeerConnection(host, port, f"broker-{self.node_id}-{purpose}", self.security)
        return conn

    @property
    def address(self) -> tuple[str, int]:
        _, host, port = self.controllers[self.target]
        return host, port

    def learned(self, leader_id: int, epoch: int) -> None:
        """The quorum says ``leader_id`` leads ``epoch``: aim there."""
        if leader_id < 0 or epoch < self.leader_epoch:
            return
        self.leader_epoch = epoch
        if leader_id == self.known_leader:
            return
        for i, (cid, _h, _p) in enumerate(self.controllers):
            if cid == leader_id:
                self.known_leader = leader_id
                if leader_id != self.logged_leader:
                    self.logged_leader = leader_id
                    log.info("broker %d: controller %d is active (epoch %d)", self.node_id, leader_id, epoch)
                if i != self.target:
                    self.target = i
                    self.changed.set()
                    self.changed = asyncio.Event()
                return

    def failed(self) -> None:
        """The one we aimed at is not the active controller (or is gone): try the next."""
        self.known_leader = -1
        self.target = (self.target + 1) % len(self.controllers)

    async def request(
        self, purpose: str, body: Any, timeout: float = 5.0, backoff: ExponentialBackoff | None = None
    ) -> Any:
        """Send ``body`` to the active controller, moving on past ones that cannot serve it until
        ``timeout``; the last answer (or PeerError) when none could. With ``backoff``, the pause after a
        controller that cannot be reached or closes the connection grows with each such failure (50 ms
        otherwise): a controller that refuses this broker outright is asked less and less often."""
        deadline = time.monotonic() + timeout
        last_error: PeerError | None = None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise last_error or PeerError("no active controller answered")
            target = self.target
            try:
                resp = await self._attempt(purpose, body, min(left, ATTEMPT_S))
            except PeerError as e:
                last_error = e
                if self.target == target:
                    self.failed()
                pause = backoff.next() if backoff is not None else 0.05
                await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
                continue
            if not says_not_controller(resp):
                return resp
            last_error = PeerError(
                f"controller at {self.controllers[target][1]}:{self.controllers[target][2]} "
                "is not the active controller"
            )
            if self.target == target:
                self.failed()
            if time.monotonic() + 0.05 >= deadline:
                return resp
            await asyncio.sleep(0.05)

    async def _attempt(self, purpose: str, body: Any, timeout: float) -> Any:
        """One request to the current target, given up early if the active controller changes meanwhile."""
        changed = self.changed
        call = asyncio.ensure_future(self.connection(purpose).request(body, timeout=timeout))
        moved = asyncio.ensure_future(changed.wait())
        try:
            await asyncio.wait((call, moved), return_when=asyncio.FIRST_COMPLETED)
        finally:
            moved.cancel()
        if call.done():
            return call.result()
        call.cancel()
        raise PeerError("the active controller changed while waiting for an answer")

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
