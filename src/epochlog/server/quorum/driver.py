"""The asyncio side of a quorum member: it carries out the raft core's Ready and moves its messages.

Order per Ready, as the core demands: the quorum-state file is written and fsynced, then the log is
flushed, then messages go out (answers to requests we hold, or new requests to other controllers), then
the controller hears of the new high watermark. Requests from other controllers and from brokers (the
observers) arrive through the controller's listener and wait here until the core answers them; a
fetch with nothing new is parked by the core, not here.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from epochlog.clock import now_ms
from epochlog.raft import messages as m
from epochlog.raft.config import QuorumConfig
from epochlog.raft.node import RaftNode
from epochlog.raft.roles import Role
from epochlog.raft.voters import VoterSet
from epochlog.server.cluster.peer import PeerConnection, PeerError
from epochlog.server.peer_security import PeerSecurity
from epochlog.server.quorum import voter_wire, wire
from epochlog.storage.errors import KafkaStorageError
from epochlog.storage.metadata_raft_log import MetadataRaftLog
from epochlog.storage.quorum_state_file import QuorumStateFile
from epochlog.trace.events import NO_TRACE, Tracer
from epochlog.trace.sink import ReadyTracer
from epochlog.trace.sink import close as close_trace

log = logging.getLogger("epochlog.quorum")
# The quorum's timer: election and fetch timeouts, check-quorum, parked fetches whose wait ran out. Replies,
# proposals and new records are acted on when they arrive, not on the tick, so its granularity bounds only
# how late a timeout fires (50 ms against timeouts of a second and more). At 10 ms the tick alone was half
# of an idle node's CPU (2.5% -> 1% of a core with 50 ms), which shows in every CPU-per-GB figure.
TICK_S = 0.05
MAX_FETCH_BYTES = 8 << 20
# The node id a controller that knows no voters yet fetches from (KIP-853): the driver sends its requests
# to controller.quorum.bootstrap.servers in turn, as it does for any id it has no endpoint for.
BOOTSTRAP_ID = -2


class NotLeader(Exception):
    """This controller is not (or no longer) the quorum's leader: the write was not committed by it."""


class QuorumDriver:
    def __init__(
        self,
        node_id: int,
        voters: dict[int, tuple[str, int]],
        metadata_dir: Path,
        cluster_id: str,
        config: QuorumConfig,
        on_commit: Callable[[int], None],
        on_role: Callable[[], None],
        on_snapshot: Callable[[m.SnapshotId], None],
        segment_bytes: int | None = None,
        security: PeerSecurity | None = None,
        tracer: Tracer = NO_TRACE,
        on_disk_failure: Callable[[str], None] | None = None,
        formatted_voters: VoterSet | None = None,
        bootstrap_servers: tuple[tuple[str, int], ...] = (),
    ) -> None:
        self.node_id = node_id
        self.security = security  # how to reach the other voters' controller listeners
        self.static_voters = voters  # controller.quorum.voters, or (a dynamic quorum) none
        self.bootstrap_servers = bootstrap_servers
        self._bootstrap_turn = 0
        self.cluster_id = cluster_id
        self.config = config
        self.on_commit, self.on_role, self.on_snapshot = on_commit, on_role, on_snapshot
        metadata_dir.mkdir(parents=True, exist_ok=True)
        self.log = MetadataRaftLog(metadata_dir, segment_bytes)
        self.state_file = QuorumStateFile(self.log.dir)
        self.state_file.remove_leftovers()
        state = self.state_file.read()  # QuorumStateCorrupt stops the controller here
        # The core's events count once the quorum state of their Ready is on disk (trace/sink.ReadyTracer).
        self.tracer = ReadyTracer(tracer)
        core_voters: tuple[int, ...] | VoterSet = tuple(voters) if formatted_voters is None else formatted_voters
        self.node = RaftNode(
            node_id,
            core_voters,
            self.log,
            state,
            now_ms(),
            random.Random(),
            cluster_id,
            config,
            self.tracer,
            bootstrap=(BOOTSTRAP_ID,) if bootstrap_servers else (),
        )
        self.peers: dict[tuple[str, int], PeerConnection] = {}
        # Requests we serve, by request id: the future for the answer, and whether a broker asked.
        self.waiting: dict[int, tuple[asyncio.Future[tuple[m.Response, bytes]], bool]] = {}
        self.commit_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._ids = itertools.count(1)
        self._task: asyncio.Task[None] | None = None
        self._sends: set[asyncio.Task[None]] = set()
        self.stopped = False
        self.on_disk_failure = on_disk_failure
        self.disk_failure: str | None = None

    @property
    def voters(self) -> dict[int, tuple[str, int]]:
        """The voters in force and where they listen: from the log's voter set (a dynamic quorum), else static."""
        vs = self.node.membership.voters
        if not self.node.membership.dynamic and not vs.voters:
            return dict(self.static_voters)
        out = {v: self.static_voters[v] for v in vs.ids if v in self.static_voters}
        for v in vs.voters:
            if v.endpoints:
                out[v.node_id] = (v.endpoints[0].host, v.endpoints[0].port)
        return out

    def _address(self, to: int) -> tuple[str, int] | None:
        known = self.voters.get(to) or self.static_voters.get(to)
        if known is not None or not self.bootstrap_servers:
            return known
        self._bootstrap_turn += 1
        return self.bootstrap_servers[self._bootstrap_turn % len(self.bootstrap_servers)]

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        self._step(self.node.take_ready)
        self._task = asyncio.create_task(self._ticker())

    def _step(self, event: Callable[[], m.Ready]) -> None:
        """Hand the core one event and carry out its Ready; an I/O error on the metadata directory on the way
        (the core's append, the quorum-state write, the flush) stops this member (see _disk_failed)."""
        if self.stopped:
            return
        try:
            self._carry_out(event())
        except (OSError, KafkaStorageError) as e:  # the metadata log's own guard turns an OSError into the latter
            self._disk_failed(e)
            raise

    def _step_in_task(self, event: Callable[[], m.Ready]) -> None:
        with contextlib.suppress(OSError, KafkaStorageError):  # nobody awaits a send task: _disk_failed said it
            self._step(event)

    def _disk_failed(self, e: Exception) -> None:
        """After a failed write or fsync the core's view (a vote, an epoch, records it counts as flushed) is
        ahead of what the disk holds, and Linux may have dropped the dirty pages a later fsync would claim:
        nothing more of it may reach another node. So this member stops at once, sends nothing of the Ready
        that failed, and the controller process stops (Kafka halts on a failed metadata log directory).
        The last answer it gave is durable; anything after it was never acknowledged."""
        if self.disk_failure is not None:
            return
        self.disk_failure = f"{type(e).__name__}: {e}"
        self.stopped = True
        self.tracer.drop()
        self.waiting.clear()
        self._fail_commit_waiters()
        log.critical("controller %d: metadata log directory failed (%s); stopping", self.node_id, self.disk_failure)
        if self.on_disk_failure is not None:
            self.on_disk_failure(self.disk_failure)

    async def stop(self) -> None:
        if self.node.role is Role.LEADER and not self.stopped:
            with contextlib.suppress(OSError, KafkaStorageError):  # a failing disk: _disk_failed said so
                self._step(lambda: self.node.resign(now_ms()))
            await asyncio.sleep(0.05)  # let the EndQuorumEpoch requests leave
        self.stopped = True
        if self._task is not None:
            self._task.cancel()
        for t in list(self._sends):
            t.cancel()
        for peer in self.peers.values():
            peer.close()
        self._fail_commit_waiters()
        try:
            self.log.close()
        except (OSError, KafkaStorageError) as e:
            log.error("controller %d: closing its metadata log failed: %s", self.node_id, e)
        close_trace(self.tracer.inner)

    async def _ticker(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            if self.stopped:
                return
            try:
                self._step(lambda: self.node.tick(now_ms()))
            except (OSError, KafkaStorageError):
                return  # _disk_failed stopped this member
            except Exception:
                log.exception("quorum tick failed")

    # -- the Ready ------------------------------------------------------------------------------------
    def _carry_out(self, ready: m.Ready) -> None:
        if self.stopped:
            return
        if ready.quorum_state is not None:
            self.state_file.write(ready.quorum_state, self.cluster_id, tuple(self.voters))
        self.tracer.release()
        if ready.flush:
            self.log.flush()
        for out in ready.messages:
            msg = out.message
            if isinstance(msg, m.Request):
                task = asyncio.create_task(self._send(out.to, msg))
                self._sends.add(task)
                task.add_done_callback(self._sends.discard)
            else:
                entry = self.waiting.pop(msg.request_id, None)
                if entry is not None and not entry[0].done():
                    entry[0].set_result((msg, self._records_for(msg, entry[1])))
        if ready.load_snapshot is not None:
            self.on_snapshot(ready.load_snapshot)
        if ready.high_watermark is not None:
            self.on_commit(ready.high_watermark)
            self._release_commit_waiters(ready.high_watermark)
        if ready.role_changed:
            if self.node.role is not Role.LEADER:
                self._fail_commit_waiters()
            log.info(
                "controller %d is %s in epoch %d (leader %d)",
                self.node_id,
                self.node.role.value,
                self.node.epoch,
                self.node.leader_id,
            )
            self.on_role()

    def _records_for(self, msg: m.Response, observer: bool) -> bytes:
        if not isinstance(msg, m.FetchResponse) or msg.read_from < 0:
            return b""
        # An observer (a broker) keeps no log of its own: it is sent committed records only.
        limit = max(self.node.high_watermark, 0) if observer else None
        if limit is not None and msg.read_from >= limit:
            return b""
        return self.log.read_bytes(msg.read_from, MAX_FETCH_BYTES, limit)

    async def _send(self, to: int, msg: m.Request) -> None:
        address = self._address(to)
        if address is None:
            self._step_in_task(lambda: self.node.request_failed(to, msg.request_id, now_ms()))
            return
        peer = self.peers.get(address)
        if peer is None:
            peer = self.peers[address] = PeerConnection(*address, f"controller-{self.node_id}-raft", self.security)
        timeout = (self.config.request_timeout_ms + self.config.fetch_max_wait_ms) / 1000
        try:
            resp = await peer.request(wire.to_kio(msg), timeout=timeout)
        except PeerError as e:
            log.debug("controller %d: %s to %d failed: %s", self.node_id, type(msg).__name__, to, e)
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)
            self._step_in_task(lambda: self.node.request_failed(to, msg.request_id, now_ms()))
            return
        try:
            answer = wire.response_from_kio(msg, to, resp)
        except (ValueError, AttributeError, IndexError) as e:
            log.warning("controller %d: unreadable answer from %d: %s", self.node_id, to, e)
            self._step_in_task(lambda: self.node.request_failed(to, msg.request_id, now_ms()))
            return
        self._step_in_task(lambda: self.node.receive(answer, now_ms()))

    # -- requests from others ---------------------------------------------------------------------
    async def handle(self, api_key: int, req: Any, observer: bool) -> dict[str, Any]:
        """``observer``: the request comes from a broker, not from another controller."""
        rid = next(self._ids)
        msg = wire.request_from_kio(api_key, req, rid, observer)
        fut: asyncio.Future[tuple[m.Response, bytes]] = asyncio.get_running_loop().create_future()
        self.waiting[rid] = (fut, observer)
        try:
            self._step(lambda: self.node.receive(msg, now_ms()))
            wait = (getattr(msg, "max_wait_ms", 0) + self.config.request_timeout_ms) / 1000
            answer, records = await asyncio.wait_for(fut, wait)
        finally:
            self.waiting.pop(rid, None)
        return wire.response_body(answer, records)

    async def change_voters(self, api_key: int, req: Any) -> dict[str, Any]:
        """AddRaftVoter, RemoveRaftVoter or UpdateRaftVoter: the core decides; the answer to an add or a remove
        comes once its Voters record commits, to an update once it is appended."""
        rid = next(self._ids)
        msg = voter_wire.request_from_kio(api_key, req, rid)
        fut: asyncio.Future[tuple[m.Response, bytes]] = asyncio.get_running_loop().create_future()
        self.waiting[rid] = (fut, False)
        timeout = getattr(req, "timeout", None)
        wait = timeout.total_seconds() if timeout is not None else self.config.request_timeout_ms / 1000
        try:
            self._step(lambda: self.node.receive(msg, now_ms()))
            answer, _ = await asyncio.wait_for(fut, max(wait, 1.0))
        except TimeoutError:
            return voter_wire.timed_out(api_key)
        finally:
            self.waiting.pop(rid, None)
        assert isinstance(answer, m.VoterChangeResponse)
        host, port = self.voters.get(answer.leader_id, ("", 0))
        return voter_wire.response_body(
            answer.error, answer.message, api_key, (answer.leader_id, answer.epoch, host, port)
        )

    # -- the controller's writes ---------------------------------------------------------------------
    def propose(self, records: list[Any]) -> int:
        if self.stopped:
            raise NotLeader(f"controller {self.node_id} has stopped ({self.disk_failure or 'shutting down'})")
        proposed: list[int] = []

        def event() -> m.Ready:
            last, ready = self.node.propose(records, now_ms())
            proposed.append(last)
            return ready

        self._step(event)
        last = proposed[0]
        if last < 0:
            raise NotLeader(f"controller {self.node_id} is not the active controller")
        return last

    async def committed(self, offset: int, timeout: float) -> None:
        """Wait until ``offset`` is below the high watermark; NotLeader if leadership goes first."""
        if self.node.high_watermark > offset:
            return
        if self.node.role is not Role.LEADER:
            raise NotLeader(f"controller {self.node_id} lost the leadership before offset {offset} committed")
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.commit_waiters.append((offset, fut))
        await asyncio.wait_for(fut, timeout)

    def _release_commit_waiters(self, hw: int) -> None:
        keep = []
        for offset, fut in self.commit_waiters:
            if offset < hw:
                if not fut.done():
                    fut.set_result(None)
            else:
                keep.append((offset, fut))
        self.commit_waiters = keep

    def _fail_commit_waiters(self) -> None:
        waiters, self.commit_waiters = self.commit_waiters, []
        for _, fut in waiters:
            if not fut.done():
                fut.set_exception(NotLeader(f"controller {self.node_id} lost the leadership"))
