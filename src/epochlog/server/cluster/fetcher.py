"""Replica fetchers: one task per leader broker, fetching every partition this broker follows there.

Each round asks the core for its next fetch (offset, LastFetchedEpoch, CurrentLeaderEpoch), sends
them in one Fetch v12 request (packed by protocol/fetch_request_writer.py, its answer read by the
zero-copy parser of protocol/fetch_response.py), and hands each partition's answer back to the core,
which appends, truncates on a DivergingEpoch, or waits for newer metadata when fenced. An answer that
arrives after the partition moved to another leader or epoch is dropped: it describes a term that is over.
How long to wait after an error, a fenced answer or a failed request is the replication core's rule
(replication/fetch_backoff.py, replica.fetch.backoff.ms), which the simulator follows too.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from epochlog.clock import now_ms
from epochlog.protocol.fetch_request_writer import ReplicaFetchPartition, encode_replica_fetch
from epochlog.protocol.fetch_response import VERSION as FETCH_VERSION
from epochlog.protocol.fetch_response import parse_fetch_response_v12
from epochlog.replication.fetch_backoff import FetchBackoff
from epochlog.replication.types import DivergingEpoch, FetchOutcome, FetchResponse, Role
from epochlog.server.cluster.peer import PeerConnection, PeerError

if TYPE_CHECKING:
    from epochlog.server.cluster.broker import ClusterBroker
    from epochlog.server.partition import Partition

log = logging.getLogger("epochlog.fetcher")


class FetcherManager:
    def __init__(self, broker: ClusterBroker) -> None:
        self.broker = broker
        self.tasks: dict[int, asyncio.Task[None]] = {}
        self.wakeup = asyncio.Event()
        self._supervisor: asyncio.Task[None] | None = None
        self.stopping = False
        # per leader: the connection in use and the partitions its in-flight fetch asks for
        self.conns: dict[int, PeerConnection] = {}
        self.inflight: dict[int, frozenset[tuple[str, int]]] = {}

    def start(self) -> None:
        self._supervisor = asyncio.create_task(self._supervise())

    def wake(self) -> None:
        """Metadata changed. A fetch long-polling at a leader for an old set of partitions would hold a new
        partition back for up to replica.fetch.wait.max.ms (responses on one connection come in order),
        so such a fetch is abandoned by closing its connection; the next round asks for the new set."""
        for leader, asked in list(self.inflight.items()):
            now = frozenset((p.topic, p.partition) for p in self.following(leader))
            conn = self.conns.get(leader)
            if now != asked and conn is not None:
                conn.close()
        self.wakeup.set()

    async def stop(self) -> None:
        # A flag as well as cancel(): Python 3.11's wait_for can swallow a cancellation that races with
        # its inner future finishing, and a fetcher that missed it would loop on forever.
        self.stopping = True
        if self._supervisor is not None:
            self._supervisor.cancel()
        for t in self.tasks.values():
            t.cancel()
        if self.tasks:
            await asyncio.wait(list(self.tasks.values()), timeout=2)
        self.tasks = {}

    def following(self, leader: int) -> list[Partition]:
        return [
            p
            for p in self.broker.partitions.values()
            if p.replica.role is Role.FOLLOWER and p.replica.leader_id == leader and not p.offline
        ]

    async def _supervise(self) -> None:
        while not self.stopping:
            leaders = {
                p.replica.leader_id
                for p in self.broker.partitions.values()
                if p.replica.role is Role.FOLLOWER and p.replica.leader_id >= 0 and not p.offline
            }
            for leader in leaders:
                t = self.tasks.get(leader)
                if t is None or t.done():
                    self.tasks[leader] = asyncio.create_task(self._run(leader))
            self.wakeup.clear()
            try:
                await asyncio.wait_for(self.wakeup.wait(), 1.0)
            except TimeoutError:
                pass

    async def _run(self, leader: int) -> None:
        b = self.broker
        conn: PeerConnection | None = None
        endpoint: tuple[str, int] | None = None
        backoff = FetchBackoff(b.config.replica_fetch_backoff_ms)
        while not self.stopping:
            parts = self.following(leader)
            if not parts:
                if conn is not None:
                    conn.close()
                self.conns.pop(leader, None)
                self.inflight.pop(leader, None)
                return
            ep = b.image.brokers.get(leader)
            if ep is None:
                await asyncio.sleep(0.1)
                continue
            if conn is None or endpoint != (ep.host, ep.port):
                if conn is not None:
                    conn.close()
                endpoint = (ep.host, ep.port)
                conn = PeerConnection(ep.host, ep.port, f"replica-fetcher-{b.config.node_id}", b.peer_security)
                self.conns[leader] = conn
            wait = backoff.wait_ms(now_ms())
            if wait:
                await asyncio.sleep(wait / 1000)
                continue  # the partitions followed there may have changed meanwhile
            asked = frozenset((p.topic, p.partition) for p in parts)
            self.inflight[leader] = asked
            try:
                await self._fetch_round(conn, parts, backoff)
            except PeerError as e:
                if frozenset((p.topic, p.partition) for p in self.following(leader)) == asked:
                    log.debug("fetch from broker %d failed: %s", leader, e)
                    backoff.after_failure(now_ms())  # a real failure; an abandoned fetch goes again at once
            except asyncio.CancelledError:
                conn.close()
                raise
            except Exception:
                log.exception("replica fetch from broker %d failed", leader)
                backoff.after_failure(now_ms())
        if conn is not None:
            conn.close()
        self.conns.pop(leader, None)
        self.inflight.pop(leader, None)

    async def _fetch_round(self, conn: PeerConnection, parts: list[Partition], backoff: FetchBackoff) -> None:
        cfg = self.broker.config
        # Under flush.messages=1 a fetch offset may count only synced records (replication/durability.py):
        # what the last answer appended is synced before the next fetch says it is held.
        unsynced = [p for p in parts if p.replica.needs_sync()]
        if unsynced:
            await self.broker.group_commit.settle(unsynced, timeout=cfg.replica_fetch_wait_max_ms / 1000 + 5)
        sent: dict[tuple[str, int], tuple[Partition, int, int]] = {}
        by_topic: dict[str, list[ReplicaFetchPartition]] = {}
        throttle = self.broker.replication_throttles.follower
        throttled: set[tuple[str, int]] = set()
        now = now_ms()
        part: Partition | None  # the second loop looks partitions up by name
        for part in parts:
            r = part.replica
            assert r is not None
            if not backoff.may_fetch((part.topic, part.partition), r.leader_epoch, now):
                continue
            fr = r.next_fetch()
            if fr is None:
                continue
            if r.broker_id not in r.isr:
                # follower.replication.throttled.*: a throttled replica out of the ISR sits this round out
                # while the bytes fetched for such replicas are above the rate (Kafka's shouldFollowerThrottle).
                info = self.broker.image.topics.get(part.topic)
                if info is not None and throttle.applies(info.configs, part.partition):
                    if throttle.exceeded(now_ms()):
                        continue
                    throttled.add((part.topic, part.partition))
            sent[(part.topic, part.partition)] = (part, r.leader_epoch, fr.fetch_offset)
            by_topic.setdefault(part.topic, []).append(
                ReplicaFetchPartition(
                    part.partition,
                    fr.current_leader_epoch,
                    fr.fetch_offset,
                    fr.last_fetched_epoch,
                    part.log.log_start_offset,
                    cfg.replica_fetch_max_bytes,
                )
            )
        if not by_topic:
            await asyncio.sleep(backoff.idle_ms(now_ms()) / 1000)
            return
        topics = list(by_topic.items())

        def frame(cid: int) -> bytes:
            return encode_replica_fetch(
                cid,
                conn.client_id,
                cfg.node_id,
                cfg.replica_fetch_wait_max_ms,
                1,
                cfg.replica_fetch_response_max_bytes,
                topics,
            )

        resp = await conn.request_frame(
            1, FETCH_VERSION, frame, timeout=cfg.replica_fetch_wait_max_ms / 1000 + 10, parse=parse_fetch_response_v12
        )
        for t in resp.responses:
            for p in t.partitions:
                part = self.broker.partitions.get((t.topic, int(p.partition_index)))
                if part is None:
                    continue
                r = part.replica
                asked, epoch, offset = sent.get((part.topic, part.partition), (None, -2, -1))
                # The answer must be for this very partition object: a topic deleted and created again
                # under the same name gets a new one. Term and position are the core's to check.
                if asked is not part:
                    continue
                if (part.topic, part.partition) in throttled and p.records:
                    throttle.record(len(p.records), now_ms())
                div = p.diverging_epoch
                diverging = None
                if (div is not None and int(div.epoch) >= 0) or (div is not None and int(div.end_offset) >= 0):
                    diverging = DivergingEpoch(int(div.epoch), int(div.end_offset))
                outcome = r.handle_fetch_response(
                    FetchResponse(
                        int(p.error_code),
                        p.high_watermark,
                        diverging,
                        p.records if p.records else None,
                        log_start_offset=int(p.log_start_offset),
                        asked_epoch=epoch,
                        asked_offset=offset,
                    )
                )
                if outcome is FetchOutcome.TRUNCATED:
                    log.info(
                        "%s-%d: truncated to %d (the leader's DivergingEpoch %s, or past its end)",
                        part.topic,
                        part.partition,
                        r.log.log_end_offset,
                        diverging,
                    )
                elif outcome is FetchOutcome.RESTARTED:
                    log.info(
                        "%s-%d: behind the leader's log start; started over at %d",
                        part.topic,
                        part.partition,
                        r.log.log_end_offset,
                    )
                backoff.after_answer((part.topic, part.partition), outcome, r.leader_epoch, now_ms())
                part.sync()
