"""A broker in a multi-broker cluster: registers with the controller, follows its metadata log, and
drives each partition's replication core (replication/PartitionReplica) over the real log.

Startup order matters: logs are loaded, the broker registers (telling the controller whether it
shut down cleanly), catches up the whole metadata log, applies each partition's *final* state
(never the historical ones, which would write stale epochs to the epoch cache), and only then
listens for clients.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

from kio.index import load_request_schema

from epochlog.controller.image import TopicInfo
from epochlog.controller.records import MetadataRecord
from epochlog.protocol.errors import Err
from epochlog.protocol.record_batch import read_header
from epochlog.protocol.records import iter_records
from epochlog.raft.messages import FetchSnapshotRequest, SnapshotId
from epochlog.replication.partition import PartitionReplica
from epochlog.replication.transitions import Kind, Transition, partition_transitions
from epochlog.replication.types import AlterIsr, PartitionState, Role, TruncationMode
from epochlog.security.scram_credentials import ScramCredential
from epochlog.server.broker import Broker
from epochlog.server.clock import now_ms
from epochlog.server.cluster.backoff import ExponentialBackoff
from epochlog.server.cluster.controller_channel import ControllerChannel
from epochlog.server.cluster.fetcher import FetcherManager
from epochlog.server.cluster.image import MetadataImage
from epochlog.server.cluster.peer import PeerError
from epochlog.server.config import BrokerConfig
from epochlog.server.internal_topics import OFFSETS_TOPIC, TXN_TOPIC
from epochlog.server.listener_security import PROTOCOL_CODES
from epochlog.server.partition import Partition
from epochlog.server.peer_security import controller_security, inter_broker_security
from epochlog.server.quorum import wire
from epochlog.server.topic_configs import DynamicBrokerConfigs, topic_properties
from epochlog.server.transactions.coordinators import TxnCoordinators
from epochlog.storage import partition_log as storage_metrics
from epochlog.storage.errors import KafkaStorageError
from epochlog.storage.metadata_raft_log import decode_record, parse_snapshot
from epochlog.storage.replica_log import PartitionReplicaLog

log = logging.getLogger("epochlog.broker")
APPLY_YIELD_EVERY = 64
# A controller that leaves a metadata long poll unanswered this long past its max wait is paused or cut
# off: the broker asks the next one, which names the active controller.
METADATA_SILENCE_S = 1.5  # partitions whose new state is applied between two turns of the event loop

_REG = load_request_schema(62, 4)
_HB = load_request_schema(63, 1)
_ALTER = load_request_schema(56, 3)
# A metadata fetch answered with one of these names the leader to go to; anything else, try another.
_REDIRECTS = {Err.NOT_LEADER_OR_FOLLOWER, Err.FENCED_LEADER_EPOCH, Err.UNKNOWN_LEADER_EPOCH}


def _committed_records(data: bytes, start: int, hw: int) -> Iterator[tuple[int, int, MetadataRecord]]:
    """(offset, batch epoch, record) of each record in [start, hw) of these metadata batches."""
    pos = 0
    while pos + 61 <= len(data):
        h = read_header(data, pos)
        batch = data[pos : pos + h.size]
        pos += h.size
        for r in iter_records(batch):
            if start <= r.offset < hw and r.value is not None:
                yield r.offset, h.partition_leader_epoch, decode_record(r.value)


_ALLOC = load_request_schema(67, 0)
_ASSIGN_DIRS = load_request_schema(73, 0)


class ClusterBroker(Broker):
    def __init__(self, config: BrokerConfig) -> None:
        super().__init__(config)
        self.image = MetadataImage()
        # The partition states this broker last carried out: what the next metadata change is compared with.
        self._published: dict[tuple[str, int], PartitionState] = {}
        # __consumer_offsets is a replicated topic like any other; each broker coordinates the groups of
        # the partitions it leads, loading them as it gains leadership (docs/operations.md).
        self._creating_internal: set[str] = set()
        self._internal_topic_warned: dict[str, float] = {}
        self._leaving = False  # a controlled shutdown has begun: heartbeats say so, and never re-register
        # One connection per purpose to the active controller: answers on one connection come in order,
        # and an AlterPartition answer queued behind a parked metadata fetch waited up to a second.
        self.controller = ControllerChannel(config.node_id, config.controllers or [(-1, *config.controller_address)])
        # How this broker authenticates to other brokers (inter-broker listener) and to the controllers.
        self.peer_security = inter_broker_security(config)
        self.controller.security = controller_security(config.raw)
        self.broker_epoch = -1
        self.fetchers = FetcherManager(self)
        self.shutting_down = False
        self.metadata_changed = asyncio.Event()
        self.mode = TruncationMode(config.replication_truncation_mode)
        self.producer_ids = ControllerProducerIds(self)
        self.txn = TxnCoordinators(self)

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self) -> None:
        self.config.log_dir.mkdir(parents=True, exist_ok=True)
        self.cluster_id = self.log_manager.open(node_id=self.config.node_id, cluster_id=self.config.cluster_id)
        clean = self.log_manager.had_clean_shutdown
        self.log_manager.load_all()
        await self._register(clean)
        await self._catch_up_metadata()
        for t in self._transitions(sorted(self.image.states), []):
            self._carry_out(t)
        self._update_ineligible()
        self._remove_leftover_logs()
        await self._start_groups()
        self.txn.start()
        for topic, p in self.partitions:
            if topic in (OFFSETS_TOPIC, TXN_TOPIC):
                self._follow_coordination(topic, p)
        from epochlog.server.connection import KafkaConnection
        from epochlog.server.listener_security import listener_security

        # The metrics endpoint is up before the client listeners: whoever sees the broker accept connections
        # can scrape it (a listener accepts at listen(), before this coroutine goes on).
        self.metrics.bind(self)
        storage_metrics.on_flush = self.metrics.observe_flush
        if self.config.metrics_port:
            self.metrics.serve(self.config.host, self.config.metrics_port)
        loop = asyncio.get_running_loop()
        servers = []
        for listener in self.config.broker_listeners():
            sec = listener_security(self.config.raw, listener, self.config.ssl_server_contexts.get(listener.name))
            servers.append(
                await loop.create_server(
                    lambda sec=sec: KafkaConnection(self, sec),  # type: ignore[misc]
                    listener.host,
                    listener.port,
                    reuse_address=True,
                    backlog=512,
                    ssl=sec.ssl_context,
                )
            )
        self.server, self.extra_servers = servers[0], servers[1:]
        for coro in (self._housekeeping(), self._heartbeats(), self._follow_metadata(), self._isr_ticker()):
            self._tasks.append(asyncio.create_task(coro))
        self.fetchers.start()
        self.cleaner.start(loop)
        leaders = sum(1 for p in self.partitions.values() if p.is_leader)
        log.info(
            "broker %d (epoch %d) serving on %s:%d; metadata at offset %d; leads %d of %d replicas",
            self.config.node_id,
            self.broker_epoch,
            self.config.host,
            self.config.port,
            self.image.offset,
            leaders,
            len(self.partitions),
        )

    async def stop(self) -> None:
        if self.config.controlled_shutdown_enable:
            self._leaving = True
            await self._controlled_shutdown()
        self.shutting_down = True
        await self.txn.stop()
        await self.fetchers.stop()
        self.controller.close()
        await super().stop()

    async def _controlled_shutdown(self) -> None:
        """Ask the controller to move our leaderships away and wait until the metadata says so."""
        t0 = time.monotonic()
        deadline = t0 + self.config.controlled_shutdown_timeout_ms / 1000
        asked = False
        while time.monotonic() < deadline and not asked:
            try:
                resp = await self.controller.request("session", self._heartbeat(want_shut_down=True), timeout=2)
                asked = bool(resp.should_shut_down)
            except PeerError:
                await asyncio.sleep(0.1)
        # A partition on a failed log directory is not waited for: it applies no new state.
        while time.monotonic() < deadline and any(p.is_leader and not p.offline for p in self.partitions.values()):
            await asyncio.sleep(0.01)
        log.info("broker %d: controlled shutdown took %.0f ms", self.config.node_id, (time.monotonic() - t0) * 1000)

    # -- controller session --------------------------------------------------------------
    async def _register(self, clean: bool) -> None:
        from kio.schema.broker_registration.v4.request import Listener

        c = self.config
        req = _REG(
            broker_id=c.node_id,
            cluster_id=self.cluster_id,
            incarnation_id=uuid.uuid4(),
            # Every advertised listener, the inter-broker one first: its address is the one peers dial.
            listeners=tuple(
                Listener(name=a.name, host=a.host, port=a.port, security_protocol=PROTOCOL_CODES[a.protocol])
                for a in c.registered_listeners()
            ),
            features=(),
            rack=None,
            # KIP-966's signal: a broker that did not shut down cleanly may have lost unflushed records.
            previous_broker_epoch=max(self.broker_epoch, 0) if clean else -1,
        )
        # One backoff for the whole registration, shared with the channel's own retries: a controller
        # that refuses this broker (its authorizer closes the connection) was asked every 50 ms.
        backoff = ExponentialBackoff()
        while True:
            try:
                resp = await self.controller.request("session", req, timeout=5, backoff=backoff)
                if resp.error_code == 0:
                    self.broker_epoch = int(resp.broker_epoch)
                    log.info("broker %d registered with epoch %d", c.node_id, self.broker_epoch)
                    return
                log.warning("registration refused: error %d", resp.error_code)
            except PeerError as e:
                log.info("waiting for the controller at %s:%d: %s", *self.controller.address, e)
            await asyncio.sleep(backoff.next())

    def _heartbeat(self, want_shut_down: bool) -> Any:
        return _HB(
            broker_id=self.config.node_id,
            broker_epoch=self.broker_epoch,
            current_metadata_offset=self.image.offset,
            want_fence=False,
            want_shut_down=want_shut_down,
            offline_log_dirs=self._offline_dir_ids(),
        )

    def _offline_dir_ids(self) -> tuple[uuid.UUID, ...]:
        lm = self.log_manager
        ids = (lm.directory_id_of(d) for d in lm.failures.offline_dirs)
        return tuple(sorted(i for i in ids if i is not None))

    def _after_log_dir_failure(self, failed: str) -> None:
        super()._after_log_dir_failure(failed)
        if not self.must_stop.is_set():
            self._tasks.append(asyncio.create_task(self._report_offline_dir(failed)))

    async def _report_offline_dir(self, failed: str) -> None:
        """KIP-858: tell the controller which directory failed (heartbeat offline_log_dirs) and which
        replicas it held (AssignReplicasToDirs), so it moves their leadership and ISR membership to
        other brokers. Not told within log.dir.failure.timeout.ms, the broker shuts down, as Kafka's."""
        from kio.schema.assign_replicas_to_dirs.v0.request import DirectoryData, PartitionData, TopicData

        dir_id = self.log_manager.directory_id_of(failed)
        by_topic: dict[uuid.UUID, list[int]] = {}
        for _t, p, topic_id in self.offline_by_dir.get(failed, []):
            by_topic.setdefault(topic_id, []).append(p)
        assign = _ASSIGN_DIRS(
            broker_id=self.config.node_id,
            broker_epoch=self.broker_epoch,
            directories=(
                DirectoryData(
                    id_=dir_id,
                    topics=tuple(
                        TopicData(topic_id=tid, partitions=tuple(PartitionData(partition_index=p) for p in sorted(ps)))
                        for tid, ps in by_topic.items()
                    ),
                ),
            ),
        )
        deadline = time.monotonic() + self.config.log_dir_failure_timeout_ms / 1000
        while not self.shutting_down:
            try:
                hb = await self.controller.request("session", self._heartbeat(want_shut_down=self._leaving), timeout=5)
                resp = await self.controller.request(
                    "rpc", dataclasses.replace(assign, broker_epoch=self.broker_epoch), timeout=5
                )
                if not hb.error_code and not resp.error_code:
                    log.info("broker %d: told the controller that log directory %s failed", self.config.node_id, failed)
                    return
            except PeerError as e:
                log.info("reporting the failed log directory %s: %s", failed, e)
            if time.monotonic() >= deadline:
                log.critical(
                    "broker %d: could not tell the controller within log.dir.failure.timeout.ms that %s failed; "
                    "shutting down",
                    self.config.node_id,
                    failed,
                )
                self.exit_code = 1
                self.must_stop.set()
                return
            await asyncio.sleep(0.5)

    async def _heartbeats(self) -> None:
        interval = self.config.broker_heartbeat_interval_ms / 1000
        while not self.shutting_down:
            try:
                # As Kafka's brokers do, heartbeats keep asking to shut down once that has begun: the
                # controller fences a broker that asks, and a plain heartbeat answered "fenced" would
                # register it again, bringing back leaderships the shutdown just moved away.
                resp = await self.controller.request(
                    "session", self._heartbeat(want_shut_down=self._leaving), timeout=5
                )
                if self.shutting_down:
                    return
                if resp.error_code == Err.NOT_CONTROLLER:
                    await asyncio.sleep(0.1)  # a failover is under way: the next heartbeat finds the new one
                    continue
                if (resp.error_code or resp.is_fenced) and not self._leaving:
                    log.warning("broker %d is fenced by the controller; registering again", self.config.node_id)
                    await self._register(True)
                    # A registration starts with every directory online at the controller: say again
                    # which ones failed, or their replicas could be elected here.
                    for failed in self.log_manager.failures.offline_dirs:
                        self._tasks.append(asyncio.create_task(self._report_offline_dir(failed)))
                # A new active controller expects us at once (it fences brokers that stay silent).
                changed = self.controller.changed
                try:
                    await asyncio.wait_for(changed.wait(), interval)
                except TimeoutError:
                    pass
            except PeerError:
                await asyncio.sleep(0.2)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("heartbeat failed")
                await asyncio.sleep(interval)

    # -- metadata log ----------------------------------------------------------------------
    async def _fetch_metadata(self, max_wait_ms: int) -> tuple[list[tuple[str, int]], list[TopicInfo], int]:
        """One fetch of the metadata log, as an observer of the quorum: committed records only, applied in
        order; the answer also says which controller leads, so the channel follows a failover."""
        ch = self.controller
        req = wire.fetch_request(
            self.cluster_id or "",
            self.config.node_id,
            ch.leader_epoch,
            self.image.offset,
            self.image.last_epoch,
            max_wait_ms,
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
        hw = self.image.offset
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
                    return (*await self._load_metadata_snapshot(snap), hw)
                if int(p.diverging_epoch.epoch) >= 0:
                    # We only ever apply committed records, which no leader takes back: a divergence means
                    # the quorum lost committed data. Start over from the leader's log rather than guess.
                    log.error(
                        "broker %d: the metadata log diverged at %d; reloading it",
                        self.config.node_id,
                        int(p.diverging_epoch.end_offset),
                    )
                    return (*self._reset_image([]), hw)
                if p.records:
                    for offset, epoch, record in _committed_records(bytes(p.records), self.image.offset, hw):
                        applied = self.image.apply(record)
                        changed += applied.partitions
                        deleted += applied.deleted
                        self.image.offset = offset + 1
                        self.image.last_epoch = epoch
        self._refresh_acls()
        return changed, deleted, hw

    def _refresh_acls(self) -> None:
        """The authorizer answers from every ACL the metadata log holds: hand it the new set on a change."""
        if self.image.acls_changed:
            self.image.acls_changed = False
            if self.authorizer is not None:
                self.authorizer.set_acls(dict(self.image.cluster.acls))

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        """The stored credential a SASL/SCRAM exchange checks the client's proof against."""
        return self.image.cluster.scram.get((user, mechanism))

    async def _load_metadata_snapshot(self, snap: SnapshotId) -> tuple[list[tuple[str, int]], list[TopicInfo]]:
        """The controller trimmed its log past our position: load its snapshot (FetchSnapshot) instead."""
        chunks: list[bytes] = []
        position = 0
        while True:
            req = wire.to_kio(
                FetchSnapshotRequest(
                    self.cluster_id or "", self.config.node_id, 0, self.controller.leader_epoch, snap, position
                )
            )
            resp = await self.controller.connection("metadata").request(req, timeout=10)
            p = resp.topics[0].partitions[0] if resp.topics and resp.topics[0].partitions else None
            if p is None or p.error_code:
                raise PeerError(f"metadata snapshot fetch failed with error {getattr(p, 'error_code', -1)}")
            chunk = bytes(p.unaligned_records or b"")
            chunks.append(chunk)
            position += len(chunk)
            if position >= int(p.size) or not chunk:
                break
        log.info("broker %d: loaded metadata snapshot at offset %d", self.config.node_id, snap.end_offset)
        changed, deleted = self._reset_image(parse_snapshot(b"".join(chunks)))
        self.image.offset, self.image.last_epoch = snap.end_offset, snap.epoch
        return changed, deleted

    def _reset_image(self, records: list[MetadataRecord]) -> tuple[list[tuple[str, int]], list[TopicInfo]]:
        old = self.image
        self.image = MetadataImage()
        # The partition states this broker last carried out: what the next metadata change is compared with.
        self._published: dict[tuple[str, int], PartitionState] = {}
        changed: list[tuple[str, int]] = []
        for record in records:
            changed += self.image.apply(record).partitions
        deleted = [info for name, info in old.topics.items() if name not in self.image.topics]
        self.image.config_changes.add((4, ""))  # a new image: every partition re-reads its configs
        self.image.acls_changed = True  # ACLs the snapshot no longer holds must leave the authorizer
        self._refresh_acls()
        return changed, deleted

    async def _catch_up_metadata(self) -> None:
        while True:
            try:
                _c, _d, hw = await self._fetch_metadata(0)
                if self.image.offset >= hw:
                    return
            except PeerError as e:
                log.info("catching up metadata: %s", e)
                await asyncio.sleep(0.2)

    async def _follow_metadata(self) -> None:
        while not self.shutting_down:
            before = self.image.offset
            try:
                changed, deleted, _hw = await self._fetch_metadata(1000)
            except PeerError:
                await asyncio.sleep(0.1)
                continue
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("applying metadata failed")
                await asyncio.sleep(0.5)
                continue
            for i, t in enumerate(self._transitions(changed, deleted)):
                try:
                    self._carry_out(t)
                except Exception:
                    log.exception("applying the state of %s-%d failed", *t.key)
                if i % APPLY_YIELD_EVERY == APPLY_YIELD_EVERY - 1:
                    # Opening a partition's log costs about a millisecond; a topic of thousands of partitions
                    # would otherwise hold the event loop, and every client with it, for seconds.
                    await asyncio.sleep(0)
            for info in deleted:
                if info.name not in self.image.topics:
                    self.log_manager.delete_topic(info.name)  # logs of it no replica here ran
                log.info("deleted topic %s (%s)", info.name, info.topic_id)
            self._update_ineligible()
            configs_changed = bool(self.image.config_changes)
            self._reconfigure()
            if changed or deleted or configs_changed:
                self.fetchers.wake()
            # Any new record wakes the waiters: an admin answer may wait on ACLs or credentials too.
            if changed or deleted or configs_changed or self.image.offset != before:
                self.metadata_changed.set()
                self.metadata_changed = asyncio.Event()

    # -- partitions --------------------------------------------------------------------------
    def dynamic_broker_configs(self) -> DynamicBrokerConfigs:
        return DynamicBrokerConfigs.of(self.image.cluster.broker_configs, self.config.node_id)

    def _min_isr(self, info: TopicInfo) -> int:
        props = topic_properties(self.config, info.configs, self.dynamic_broker_configs())
        return int(props.get("min.insync.replicas") or self.config.min_insync_replicas)

    def _reconfigure(self) -> None:
        """Dynamic configs changed: every hosted partition takes the new effective values at once (retention
        at the next check, segment size at the next roll, min.insync.replicas at the next acks=all produce)."""
        changes, self.image.config_changes = self.image.config_changes, set()
        if not changes:
            return
        dyn = self.dynamic_broker_configs()
        self.replication_throttles.reconfigure(dyn.own, dyn.default, self.config.raw)
        per_topic: dict[str, tuple[Any, int]] = {}
        for (topic, p), part in self.partitions.items():
            info = self.image.topics.get(topic)
            if info is None or part.offline:
                continue
            if topic not in per_topic:
                try:
                    per_topic[topic] = (self.topic_log_config(info), self._min_isr(info))
                except ValueError as e:  # the controller validated it; a value storage refuses is kept out
                    log.error("%s: dynamic config not applied: %s", topic, e)
                    continue
            cfg, min_isr = per_topic[topic]
            if part.log.config != cfg or part.replica.min_isr != min_isr:
                part.log.config = cfg
                part.replica.min_isr = min_isr
                log.info(
                    "%s-%d: configs now retention.ms=%d retention.bytes=%d segment.bytes=%d min.insync.replicas=%d",
                    topic,
                    p,
                    cfg.retention_ms,
                    cfg.retention_bytes,
                    cfg.segment_bytes,
                    min_isr,
                )

    def _transitions(self, changed: list[tuple[str, int]], deleted: list[TopicInfo]) -> list[Transition]:
        """What to do with the replicas here now that these partitions changed and these topics went."""
        keys = [(info.name, p) for info in deleted for p in sorted(info.partitions)] + changed
        gone = {info.name for info in deleted}
        states = self.image.states
        out = partition_transitions(self.config.node_id, self._published, states, keys, self.partitions.keys(), gone)
        for key in keys:
            st = states.get(key)
            if st is None:
                self._published.pop(key, None)
            else:
                self._published[key] = st
        return out

    def _carry_out(self, t: Transition) -> None:
        if t.kind is Kind.DELETE:
            self._drop_replica(t.topic, t.partition)
        elif t.kind is Kind.REMOVE:
            assert t.state is not None
            self._remove_replica(t.topic, t.partition, t.state)
        else:
            self._take_state(t)

    def _take_state(self, t: Transition) -> None:
        topic, p, st = t.topic, t.partition, t.state
        info = self.image.topics.get(topic)
        if st is None or info is None:
            return
        part = self.partitions.get((topic, p))
        if part is not None and part.offline:
            return  # its log directory failed: nothing is applied to it until the broker restarts
        if part is None:
            cfg = self.topic_log_config(info)
            plog = self.log_manager.get(topic, p)
            if plog is not None and plog.topic_id not in (None, info.uuid):
                log.warning("%s-%d on disk belongs to an older topic of that name; removing it", topic, p)
                self.log_manager.delete_partition(topic, p)
                plog = None
            if plog is None:
                try:
                    plog = self.log_manager.create(topic, p, info.uuid, cfg)
                except KafkaStorageError as e:
                    log.error("%s-%d: cannot create its log: %s", topic, p, e)
                    return
            else:
                plog.config = cfg
            replica = PartitionReplica(
                self.config.node_id,
                topic,
                p,
                PartitionReplicaLog(plog),
                min_insync_replicas=self._min_isr(info),
                replica_lag_time_max_ms=self.config.replica_lag_time_max_ms,
                truncation_mode=self.mode,
                high_watermark=plog.high_watermark,  # the checkpoint's; the core owns it from here
            )
            part = Partition(topic, p, info.uuid, plog, replica)
            self.partitions[(topic, p)] = part
        self._apply_state(part, st)
        if t.kind is not Kind.UPDATE:
            log.info(
                "%s-%d: %s at epoch %d (leader %d, isr %s), log end %d, hw %d",
                topic,
                p,
                part.replica.role.value,
                part.replica.leader_epoch,
                st.leader,
                sorted(st.isr),
                part.log.log_end_offset,
                part.replica.high_watermark,
            )
        part.sync()
        part.notify()
        if topic in (OFFSETS_TOPIC, TXN_TOPIC):
            self._follow_coordination(topic, p)

    def _remove_replica(self, topic: str, p: int, st: PartitionState) -> None:
        """The metadata moved this partition off this broker (a reassignment completed or was cancelled):
        stop serving and fetching it, answer whoever waits on it (acks=all produces get
        NOT_LEADER_OR_FOLLOWER and retry at the new leader), and delete the replica's log, as Kafka's
        StopReplica with delete does. Only ever after the record saying so, so no data is dropped early."""
        part = self.partitions.pop((topic, p), None)
        if part is None:
            if self.log_manager.get(topic, p) is not None:
                self.log_manager.delete_partition(topic, p)
            return
        self._apply_state(part, st)  # not a replica: the core drops its role
        part.sync()
        part.notify()
        if topic in (OFFSETS_TOPIC, TXN_TOPIC):
            self._follow_coordination(topic, p)
        if not part.offline:
            self.log_manager.delete_partition(topic, p)
        log.info("%s-%d: no longer a replica here (replicas %s); its log is deleted", topic, p, list(st.replicas))

    def _follow_coordination(self, topic: str, p: int) -> None:
        """Coordinate the groups of __consumer_offsets-p (the transactional ids of __transaction_state-p)
        exactly while leading it."""
        if topic == TXN_TOPIC:
            self.txn.follow(p, self.partitions.get((topic, p)))
            return
        if self.groups is None:
            return  # start() loads them once the coordinator exists
        part = self.partitions.get((OFFSETS_TOPIC, p))
        if part is not None and part.replica.role is Role.LEADER:
            self.groups.load_partition(p)
        else:
            self.groups.unload_partition(p)

    def _update_ineligible(self) -> None:
        fenced = frozenset(b.broker_id for b in self.image.brokers.values() if b.fenced)
        for part in self.partitions.values():
            if part.replica.ineligible != fenced:
                part.replica.ineligible = fenced
                if part.delete_waiters:
                    part.sync()  # a DeleteRecords no longer waits for a replica on a fenced broker

    def _drop_replica(self, topic: str, p: int) -> None:
        """Its topic was deleted: stop serving it, answer whoever waits on it, and delete its log."""
        part = self.partitions.pop((topic, p), None)
        if topic in (OFFSETS_TOPIC, TXN_TOPIC):
            self._follow_coordination(topic, p)
        if part is not None:
            part.sync()
            part.notify()
        if part is None or not part.offline:
            self.log_manager.delete_partition(topic, p)

    def _remove_leftover_logs(self) -> None:
        """Logs of topics the metadata no longer has (deleted while this broker was down) go, and so do
        logs of partitions the metadata no longer assigns here (moved away by a reassignment that
        completed while this broker was down; the metadata is caught up before this runs)."""
        for topic in sorted({t for t, _p in self.log_manager.logs}):
            if topic not in self.image.topics:
                log.warning("removing the logs of %s: the topic is not in the cluster metadata", topic)
                self.log_manager.delete_topic(topic)
                continue
            for t, p in [k for k in self.log_manager.logs if k[0] == topic]:
                st = self.image.states.get((t, p))
                if st is not None and self.config.node_id not in st.replicas:
                    log.warning("removing log %s-%d: the metadata assigns it to brokers %s", t, p, list(st.replicas))
                    self.log_manager.delete_partition(t, p)
                elif st is None:
                    log.warning("keeping log %s-%d although the metadata does not know that partition", t, p)

    async def _isr_ticker(self) -> None:
        while not self.shutting_down:
            await asyncio.sleep(0.25)
            now = now_ms()
            for part in list(self.partitions.values()):
                r = part.replica
                if r is None or r.role is not Role.LEADER or part.offline:
                    continue
                proposal = r.next_isr_change(now)  # a shrink, or the unanswered change again
                if proposal is not None:
                    log.info(
                        "%s-%d: proposing ISR %s -> %s", r.topic, r.partition, sorted(r.isr), sorted(proposal.new_isr)
                    )
                    self.submit_alter(part, proposal)

    def submit_alter(self, part: Partition, proposal: AlterIsr) -> None:
        self._tasks.append(asyncio.create_task(self._alter(part, proposal)))
        self._tasks = [t for t in self._tasks if not t.done()]

    async def _alter(self, part: Partition, proposal: AlterIsr) -> None:
        from kio.schema.alter_partition.v3.request import BrokerState, PartitionData, TopicData

        r = part.replica
        assert r is not None
        req = _ALTER(
            broker_id=self.config.node_id,
            broker_epoch=self.broker_epoch,
            topics=(
                TopicData(
                    topic_id=part.topic_id,
                    partitions=(
                        PartitionData(
                            partition_index=proposal.partition,
                            leader_epoch=proposal.leader_epoch,
                            new_isr_with_epochs=tuple(
                                BrokerState(broker_id=b, broker_epoch=-1) for b in sorted(proposal.new_isr)
                            ),
                            partition_epoch=proposal.partition_epoch,
                        ),
                    ),
                ),
            ),
        )
        try:
            resp = await self.controller.request("rpc", req, timeout=5)
        except PeerError as e:
            log.info("AlterPartition for %s-%d failed: %s", part.topic, part.partition, e)
            r.on_isr_change_answer(proposal, Err.REQUEST_TIMED_OUT, None, now_ms())
            return
        row = resp.topics[0].partitions[0] if resp.topics and resp.topics[0].partitions else None
        if row is None or row.error_code:
            log.info(
                "AlterPartition for %s-%d refused: %s",
                part.topic,
                part.partition,
                Err(row.error_code).name if row is not None else "empty response",
            )
            code = Err(row.error_code) if row is not None else Err.UNKNOWN_SERVER_ERROR
            r.on_isr_change_answer(proposal, code, None, now_ms())
            return
        # The core decides what the answer changes (only the change in flight, only within its leader epoch).
        was_leading, isr = r.role is Role.LEADER, r.isr
        r.on_isr_change_answer(
            proposal,
            Err.NONE,
            PartitionState(
                int(row.leader_id),
                int(row.leader_epoch),
                frozenset(int(b) for b in row.isr),
                r.replicas,
                int(row.partition_epoch),
            ),
            now_ms(),
        )
        self.metrics.isr_changed(isr, r.isr, was_leading and r.role is Role.LEADER)
        part.sync()

    def _apply_state(self, part: Partition, st: PartitionState) -> None:
        """Hand the core a partition state, counting ISR changes of a partition led before and after."""
        r = part.replica
        was_leading, isr = r.role is Role.LEADER, r.isr
        epoch = r.leader_epoch
        r.apply_state(st, now_ms())
        leading = was_leading and r.role is Role.LEADER and r.leader_epoch == epoch
        self.metrics.isr_changed(isr, r.isr, leading)

    # -- topics: forwarded to the controller ---------------------------------------------------
    async def forward(self, req: Any, timeout: float = 30) -> Any:
        return await self.controller.request("rpc", req, timeout=timeout)

    async def wait_for_topics(self, names: list[str], present: bool, timeout: float = 5.0) -> None:
        def shown() -> bool:
            return all((n in self.image.topics and bool(self.image.topics[n].partitions)) == present for n in names)

        await self.wait_for_metadata(shown, timeout)

    async def wait_for_metadata(self, done: Callable[[], bool], timeout: float = 5.0) -> None:
        """Until ``done()`` holds of this broker's metadata, or ``timeout`` seconds passed."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if done():
                return
            ev = self.metadata_changed
            try:
                await asyncio.wait_for(ev.wait(), max(deadline - time.monotonic(), 0.01))
            except TimeoutError:
                pass

    def topic_name_for_id(self, topic_id: uuid.UUID) -> str | None:
        return self.image.topic_name_for_id(topic_id)

    def maybe_auto_create(self, name: str) -> TopicInfo | None:
        """Kafka's behaviour: ask the controller to create it and answer LEADER_NOT_AVAILABLE meanwhile."""
        info = self.image.topics.get(name)
        if info is not None or not self.config.auto_create_topics_enable:
            return info
        from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest

        req = CreateTopicsRequest(
            topics=(
                CreatableTopic(
                    name=name,
                    num_partitions=self.config.num_partitions,
                    replication_factor=min(self.config.default_replication_factor, len(self.image.live_brokers()) or 1),
                    assignments=(),
                    configs=(),
                ),
            ),
            timeout=timedelta(seconds=10),
            validate_only=False,
        )

        async def create() -> None:
            try:
                await self.forward(req)
            except PeerError as e:
                log.info("auto creation of %r failed: %s", name, e)

        self._tasks.append(asyncio.create_task(create()))
        return None

    def coordinator_for(self, group_id: str) -> int:
        """The leader of the group's __consumer_offsets partition, or -1 (COORDINATOR_NOT_AVAILABLE)
        while there is none; asks the controller to create the topic on first use, as Kafka does."""
        cfg = self.config
        # Kafka's offsets.topic.segment.bytes (100 MiB): small enough that the cleaner gets closed
        # segments to compact, so a coordinator's replay at start follows the live offsets.
        segment_bytes = cfg.raw.get("offsets.topic.segment.bytes", "104857600")
        return self._internal_leader(
            OFFSETS_TOPIC,
            group_id,
            cfg.offsets_topic_num_partitions,
            cfg.offsets_topic_replication_factor,
            {"cleanup.policy": "compact", "segment.bytes": segment_bytes},
        )

    def txn_coordinator_for(self, transactional_id: str) -> int:
        """The leader of the id's __transaction_state partition, or -1; creates the topic on first use."""
        cfg = self.config
        return self._internal_leader(
            TXN_TOPIC,
            transactional_id,
            cfg.transaction_state_log_num_partitions,
            cfg.transaction_state_log_replication_factor,
            {
                "cleanup.policy": "compact",
                "segment.bytes": str(cfg.transaction_state_log_segment_bytes),
                "min.insync.replicas": str(cfg.transaction_state_log_min_isr),
                "unclean.leader.election.enable": "false",
                "compression.type": "uncompressed",
            },
        )

    def _internal_leader(self, topic: str, key: str, partitions: int, rf: int, configs: dict[str, str]) -> int:
        from epochlog.server.groups.hashing import partition_for

        info = self.image.topics.get(topic)
        if info is None or not info.partitions:
            self._create_internal_topic(topic, partitions, rf, configs)
            return -1
        st = self.image.states.get((topic, partition_for(key, len(info.partitions))))
        if st is None or st.leader < 0:
            return -1
        ep = self.image.brokers.get(st.leader)
        return st.leader if ep is not None and not ep.fenced else -1

    def _create_internal_topic(self, topic: str, partitions: int, rf: int, configs: dict[str, str]) -> None:
        if topic in self._creating_internal:
            return
        from kio.schema.create_topics.v7.request import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest

        # As Kafka: not created below its replication factor (FindCoordinator answers
        # COORDINATOR_NOT_AVAILABLE and clients retry), or a cluster whose brokers came up one by one
        # would keep a single copy of every group's offsets (every transaction's state) for good.
        live = len(self.image.live_brokers())
        if live < rf:
            now = time.monotonic()
            if now - self._internal_topic_warned.get(topic, float("-inf")) >= 10:
                self._internal_topic_warned[topic] = now
                log.warning("not creating %s yet: %d live brokers, its replication factor is %d", topic, live, rf)
            return
        req = CreateTopicsRequest(
            topics=(
                CreatableTopic(
                    name=topic,
                    num_partitions=partitions,
                    replication_factor=rf,
                    assignments=(),
                    configs=tuple(CreatableTopicConfig(name=k, value=v) for k, v in configs.items()),
                ),
            ),
            timeout=timedelta(seconds=10),
            validate_only=False,
        )

        async def create() -> None:
            self._creating_internal.add(topic)
            try:
                await self.forward(req)
            except PeerError as e:
                log.info("creating %s failed: %s", topic, e)
            finally:
                self._creating_internal.discard(topic)

        self._tasks.append(asyncio.create_task(create()))


class ControllerProducerIds:
    """Idempotent producer ids from blocks the controller allocates (AllocateProducerIds)."""

    def __init__(self, broker: ClusterBroker) -> None:
        self.broker = broker
        self._next = 0
        self._end = 0
        self._lock = asyncio.Lock()

    async def allocate_async(self) -> int:
        async with self._lock:
            if self._next >= self._end:
                req = _ALLOC(broker_id=self.broker.config.node_id, broker_epoch=self.broker.broker_epoch)
                resp = await self.broker.controller.request("rpc", req, timeout=5)
                if resp.error_code:
                    raise PeerError(f"AllocateProducerIds refused: {resp.error_code}")
                self._next = int(resp.producer_id_start)
                self._end = self._next + int(resp.producer_id_len)
            pid = self._next
            self._next += 1
            return pid


def run_broker(config: BrokerConfig) -> None:
    from epochlog.server.lifecycle import run_until_signal

    run_until_signal(lambda: ClusterBroker(config))
