"""The broker as an observer of the metadata quorum: it fetches the committed metadata log (or the
controller's snapshot), applies each record to its image with the controller's ``ClusterImage.apply``,
and publishes the change: partition transitions to the replica manager, ACLs to the authorizer, dynamic
configs to the hosted partitions, and a wake-up to whoever waits on the metadata."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from epochlog.controller.image import TopicInfo
from epochlog.controller.records import MetadataRecord
from epochlog.protocol.errors import Err
from epochlog.protocol.record_batch import read_header
from epochlog.protocol.records import iter_records
from epochlog.raft.messages import FetchSnapshotRequest, SnapshotId
from epochlog.server import tracing
from epochlog.server.cluster.image import MetadataImage
from epochlog.server.cluster.peer import PeerError
from epochlog.server.quorum import wire
from epochlog.server.topic_configs import topic_properties
from epochlog.storage.config import LogConfig
from epochlog.storage.metadata_raft_log import decode_record, parse_snapshot

if TYPE_CHECKING:
    from epochlog.server.cluster.broker import ClusterBroker

log = logging.getLogger("epochlog.broker")
# A controller that leaves a metadata long poll unanswered this long past its max wait is paused or cut
# off: the broker asks the next one, which names the active controller.
METADATA_SILENCE_S = 1.5
# A metadata fetch answered with one of these names the leader to go to; anything else, try another.
_REDIRECTS = {Err.NOT_LEADER_OR_FOLLOWER, Err.FENCED_LEADER_EPOCH, Err.UNKNOWN_LEADER_EPOCH}

Changes = tuple[list[tuple[str, int]], list[TopicInfo]]  # (partitions whose state changed, topics deleted)


def committed_records(data: bytes, start: int, hw: int) -> Iterator[tuple[int, int, MetadataRecord]]:
    """(offset, batch epoch, record) of each record in [start, hw) of these metadata batches."""
    pos = 0
    while pos + 61 <= len(data):
        h = read_header(data, pos)
        batch = data[pos : pos + h.size]
        pos += h.size
        for r in iter_records(batch):
            if start <= r.offset < hw and r.value is not None:
                yield r.offset, h.partition_leader_epoch, decode_record(r.value)


class MetadataPublisher:
    def __init__(self, broker: ClusterBroker) -> None:
        self.broker = broker
        self.changed = asyncio.Event()  # set (and replaced) after every published change

    async def fetch(self, max_wait_ms: int) -> tuple[list[tuple[str, int]], list[TopicInfo], int]:
        """One fetch of the metadata log, as an observer of the quorum: committed records only, applied in
        order; the answer also says which controller leads, so the channel follows a failover."""
        b = self.broker
        ch = b.controller
        image = b.image
        req = wire.fetch_request(
            b.cluster_id or "", b.config.node_id, ch.leader_epoch, image.offset, image.last_epoch, max_wait_ms
        )
        target = ch.target
        try:
            # A long poll is answered within max_wait; a controller silent for longer is paused or cut off.
            resp = await ch.connection("metadata").request(req, timeout=max_wait_ms / 1000 + METADATA_SILENCE_S)
        except PeerError:
            if ch.target == target:
                ch.failed()
            raise
        changed: list[tuple[str, int]] = []
        deleted: list[TopicInfo] = []
        hw = image.offset
        for t in resp.responses:
            for p in t.partitions:
                ch.learned(int(p.current_leader.leader_id), int(p.current_leader.leader_epoch))
                if p.error_code:
                    if ch.target == target and (int(p.current_leader.leader_id) < 0 or p.error_code not in _REDIRECTS):
                        ch.failed()
                    raise PeerError(f"metadata fetch failed with error {p.error_code}")
                hw = int(p.high_watermark)
                if int(p.snapshot_id.end_offset) >= 0:
                    snap = SnapshotId(int(p.snapshot_id.end_offset), int(p.snapshot_id.epoch))
                    return (*await self._load_snapshot(snap), hw)
                if int(p.diverging_epoch.epoch) >= 0:
                    # We only ever apply committed records, which no leader takes back: a divergence means
                    # the quorum lost committed data. Start over from the leader's log rather than guess.
                    log.error(
                        "broker %d: the metadata log diverged at %d; reloading it",
                        b.config.node_id,
                        int(p.diverging_epoch.end_offset),
                    )
                    return (*self.reset_image([]), hw)
                if p.records:
                    for offset, epoch, record in committed_records(bytes(p.records), image.offset, hw):
                        applied = image.apply(record)
                        tracing.trace_record(b.tracer, record)
                        changed += applied.partitions
                        deleted += applied.deleted
                        image.offset = offset + 1
                        image.last_epoch = epoch
        self.refresh_acls()
        return changed, deleted, hw

    def refresh_acls(self) -> None:
        """The authorizer answers from every ACL the metadata log holds: hand it the new set on a change."""
        b = self.broker
        if b.image.acls_changed:
            b.image.acls_changed = False
            if b.authorizer is not None:
                b.authorizer.set_acls(dict(b.image.cluster.acls))

    async def _load_snapshot(self, snap: SnapshotId) -> Changes:
        """The controller trimmed its log past our position: load its snapshot (FetchSnapshot) instead."""
        b = self.broker
        chunks: list[bytes] = []
        position = 0
        while True:
            req = wire.to_kio(
                FetchSnapshotRequest(b.cluster_id or "", b.config.node_id, 0, b.controller.leader_epoch, snap, position)
            )
            resp = await b.controller.connection("metadata").request(req, timeout=10)
            p = resp.topics[0].partitions[0] if resp.topics and resp.topics[0].partitions else None
            if p is None or p.error_code:
                raise PeerError(f"metadata snapshot fetch failed with error {getattr(p, 'error_code', -1)}")
            chunk = bytes(p.unaligned_records or b"")
            chunks.append(chunk)
            position += len(chunk)
            if position >= int(p.size) or not chunk:
                break
        log.info("broker %d: loaded metadata snapshot at offset %d", b.config.node_id, snap.end_offset)
        changes = self.reset_image(parse_snapshot(b"".join(chunks)))
        b.image.offset, b.image.last_epoch = snap.end_offset, snap.epoch
        return changes

    def reset_image(self, records: list[MetadataRecord]) -> Changes:
        b = self.broker
        old = b.image
        b.image = MetadataImage()
        changed: list[tuple[str, int]] = []
        for record in records:
            changed += b.image.apply(record).partitions
        deleted = [info for name, info in old.topics.items() if name not in b.image.topics]
        b.image.config_changes.add((4, ""))  # a new image: every partition re-reads its configs
        b.image.acls_changed = True  # ACLs the snapshot no longer holds must leave the authorizer
        self.refresh_acls()
        return changed, deleted

    async def catch_up(self) -> None:
        while True:
            try:
                _c, _d, hw = await self.fetch(0)
                if self.broker.image.offset >= hw:
                    return
            except PeerError as e:
                log.info("catching up metadata: %s", e)
                await asyncio.sleep(0.2)

    async def follow(self) -> None:
        b = self.broker
        while not b.shutting_down:
            before = b.image.offset
            try:
                changed, deleted, _hw = await self.fetch(1000)
            except PeerError:
                await asyncio.sleep(0.1)
                continue
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("applying metadata failed")
                await asyncio.sleep(0.5)
                continue
            await b.replicas.carry_out_all(b.replicas.transitions(changed, deleted))
            b.replicas.topics_deleted(deleted)
            if changed or deleted:
                b.groups.consumer_topics_changed()  # KIP-848 groups see created topics and added partitions
            b.replicas.update_ineligible()
            configs_changed = bool(b.image.config_changes)
            self.reconfigure()
            if changed or deleted or configs_changed:
                b.fetchers.wake()
            # Any new record wakes the waiters: an admin answer may wait on ACLs or credentials too.
            if changed or deleted or configs_changed or b.image.offset != before:
                self.changed.set()
                self.changed = asyncio.Event()

    async def wait_for(self, done: Callable[[], bool], timeout: float = 5.0) -> None:
        """Until ``done()`` holds of this broker's metadata, or ``timeout`` seconds passed."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if done():
                return
            try:
                await asyncio.wait_for(self.changed.wait(), max(deadline - time.monotonic(), 0.01))
            except TimeoutError:
                pass

    # -- dynamic configs ------------------------------------------------------------------------
    def min_isr(self, info: TopicInfo) -> int:
        b = self.broker
        props = topic_properties(b.config, info.configs, b.dynamic_broker_configs())
        return int(props.get("min.insync.replicas") or b.config.min_insync_replicas)

    def reconfigure(self) -> None:
        """Dynamic configs changed: every hosted partition takes the new effective values at once (retention
        at the next check, segment size at the next roll, min.insync.replicas at the next acks=all produce)."""
        b = self.broker
        changes, b.image.config_changes = b.image.config_changes, set()
        if not changes:
            return
        dyn = b.dynamic_broker_configs()
        b.replication_throttles.reconfigure(dyn.own, dyn.default, b.config.raw)
        per_topic: dict[str, tuple[LogConfig, int]] = {}
        for (topic, p), part in b.partitions.items():
            info = b.image.topics.get(topic)
            if info is None or part.offline:
                continue
            if topic not in per_topic:
                try:
                    per_topic[topic] = (b.topic_log_config(info), self.min_isr(info))
                except ValueError as e:  # the controller validated it; a value storage refuses is kept out
                    log.error("%s: dynamic config not applied: %s", topic, e)
                    continue
            cfg, min_isr = per_topic[topic]
            if part.log.config != cfg or part.replica.min_isr != min_isr:
                part.log.config = cfg
                part.replica.min_isr = min_isr
                part.apply_flush_policy()
                log.info(
                    "%s-%d: configs now retention.ms=%d retention.bytes=%d segment.bytes=%d min.insync.replicas=%d",
                    topic,
                    p,
                    cfg.retention_ms,
                    cfg.retention_bytes,
                    cfg.segment_bytes,
                    min_isr,
                )
