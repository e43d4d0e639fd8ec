"""The broker: registers with the controller, follows its metadata log, and drives each partition's
replication core (replication/PartitionReplica) over the real log; on a single node as in a cluster.

This module holds the broker's lifecycle and what it owns; the work is done by its parts: the session with
the controller (broker_session), the metadata publisher (metadata_publisher), the replica manager
(replica_manager), the AlterPartition manager (alter_partition) and forwarding to the controller
(forwarding).

Startup order matters: logs are loaded, the broker registers (telling the controller whether it
shut down cleanly), catches up the whole metadata log, applies each partition's *final* state
(never the historical ones, which would write stale epochs to the epoch cache), and only then
listens for clients.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from epochlog.clock import now_ms
from epochlog.controller.image import TopicInfo
from epochlog.protocol.api_versions import is_supported
from epochlog.protocol.codec import RequestHeader
from epochlog.replication.fetch_sessions import FetchSessionCache
from epochlog.replication.lease import BrokerLease
from epochlog.replication.types import AlterIsr, TruncationMode
from epochlog.security.authorizer import StandardAuthorizer
from epochlog.security.scram_credentials import ScramCredential
from epochlog.server import tracing
from epochlog.server.cluster.alter_partition import AlterPartitionManager
from epochlog.server.cluster.broker_session import BrokerSession
from epochlog.server.cluster.controller_channel import ControllerChannel
from epochlog.server.cluster.fetcher import FetcherManager
from epochlog.server.cluster.forwarding import ControllerProducerIds, Forwarding
from epochlog.server.cluster.image import MetadataImage
from epochlog.server.cluster.metadata_publisher import MetadataPublisher
from epochlog.server.cluster.replica_manager import ReplicaManager
from epochlog.server.config import BrokerConfig
from epochlog.server.dispatch import dispatch
from epochlog.server.group_commit import GroupCommit
from epochlog.server.groups import GroupConfig, GroupCoordinator
from epochlog.server.internal_topics import OFFSETS_TOPIC, TXN_TOPIC
from epochlog.server.limits import ConnectionLimits
from epochlog.server.metrics import BrokerMetrics
from epochlog.server.offsets_store import LogOffsetsStore
from epochlog.server.partition import Partition
from epochlog.server.peer_security import controller_security, inter_broker_security
from epochlog.server.quota_enforcement import ClientQuotas
from epochlog.server.quota_metrics import QuotaCollector
from epochlog.server.replication_throttle import ReplicationThrottles
from epochlog.server.share.config import ShareConfig
from epochlog.server.share.partitions import SharePartitions
from epochlog.server.topic_configs import DynamicBrokerConfigs, topic_properties
from epochlog.server.transactions.coordinators import TxnCoordinators
from epochlog.storage import partition_log as storage_metrics
from epochlog.storage.cleaner.config import CleanerConfig
from epochlog.storage.cleaner.manager import LogCleaner
from epochlog.storage.config import LogConfig
from epochlog.storage.log_dirs import LogDirs
from epochlog.trace.events import BROKER as BROKER_SRC

if TYPE_CHECKING:
    from epochlog.server.connection import KafkaConnection

log = logging.getLogger("epochlog.broker")

METADATA_API_KEY = 3


class ClusterBroker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.base_log_config = LogConfig.from_properties(config.log_properties())
        self.log_manager = LogDirs(config.all_log_dirs(), self.base_log_config, config.log_retention_check_interval_ms)
        # broker.log_manager.failures.offline_count is Kafka's OfflineLogDirectoryCount.
        self.log_manager.failures.subscribe(self._on_log_dir_failure)
        self.exit_code = 0
        self.offline_by_dir: dict[str, list[tuple[str, int, uuid.UUID]]] = {}
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.cluster_id = config.cluster_id
        self.server: asyncio.Server | None = None
        self.extra_servers: list[asyncio.Server] = []  # the listeners after the first
        self._tasks: list[asyncio.Task[None]] = []
        # Set when the broker must stop by itself (every log directory failed); exit_code says why.
        self.must_stop = asyncio.Event()
        self.connections: set[KafkaConnection] = set()
        self.limits = ConnectionLimits(
            config.max_connections,
            config.max_connections_per_ip,
            dict(config.max_connections_per_ip_overrides),
            config.queued_max_request_bytes,
            config.connections_max_idle_ms,
        )
        self.metrics = BrokerMetrics()
        # leader.replication.throttled.rate / follower.replication.throttled.rate and their meters.
        self.replication_throttles = ReplicationThrottles(config.node_id)
        self.client_quotas = ClientQuotas(config.raw, lambda: self.image.cluster)
        self.metrics.registry.register(QuotaCollector(self.client_quotas))
        self.fetch_sessions = FetchSessionCache(config.max_incremental_fetch_session_cache_slots)
        self.replication_throttles.reconfigure({}, {}, config.raw)
        # Compaction of cleanup.policy=compact logs, on threads of its own; started with the broker.
        self.cleaner = LogCleaner(self.log_manager, CleanerConfig.from_properties(config.raw))
        # authorizer.class.name turns ACLs on; the metadata log's ACLs are handed to it as they change.
        self.authorizer: StandardAuthorizer | None = None
        if config.authorizer_class_name:
            self.authorizer = StandardAuthorizer(set(config.super_users), config.allow_everyone_if_no_acl_found)
        self.image = MetadataImage()
        # One connection per purpose to the active controller: answers on one connection come in order,
        # and an AlterPartition answer queued behind a parked metadata fetch waited up to a second.
        self.controller = ControllerChannel(config.node_id, config.controllers or [(-1, *config.controller_address)])
        # How this broker authenticates to other brokers (inter-broker listener) and to the controllers.
        self.peer_security = inter_broker_security(config)
        self.controller.security = controller_security(config.raw)
        self.shutting_down = False
        if config.replication_truncation_mode == TruncationMode.HIGH_WATERMARK.value:
            log.warning(
                "broker %d: UNSAFE replication.truncation.mode=high-watermark: followers truncate to their HW, the "
                "rule KIP-101 replaced, and acknowledged records can be lost. For tests and teaching only.",
                config.node_id,
            )
        trace_dir = Path(config.trace_dir or config.log_dir)
        self.tracer = tracing.node_tracer(config.trace_enable, trace_dir, config.node_id, BROKER_SRC)
        self.lease = BrokerLease(config.broker_session_timeout_ms, enabled=config.broker_lease_enable)
        self.session = BrokerSession(self)
        self.publisher = MetadataPublisher(self)
        self.replicas = ReplicaManager(self)
        self.alter_partition = AlterPartitionManager(self)
        self.forwarding = Forwarding(self)
        self.fetchers = FetcherManager(self)
        self.group_commit = GroupCommit()  # syncs the logs of flush.messages=1 topics, once per loop turn
        self.producer_ids = ControllerProducerIds(self)
        self.txn = TxnCoordinators(self)
        self.share_config = ShareConfig.from_properties(config.raw)
        self.shares = SharePartitions(self, self.share_config)
        self.groups = self._group_coordinator()

    @property
    def broker_epoch(self) -> int:
        return self.session.epoch

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` as a task of the broker's (cancelled when it stops)."""
        self._tasks = [t for t in self._tasks if not t.done()]
        self._tasks.append(asyncio.create_task(coro))

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self) -> None:
        self.config.log_dir.mkdir(parents=True, exist_ok=True)
        self.cluster_id = self.log_manager.open(node_id=self.config.node_id, cluster_id=self.config.cluster_id)
        previous_epoch = self.log_manager.previous_broker_epoch
        self.log_manager.load_all()
        await self.session.register(previous_epoch)
        await self.publisher.catch_up()
        await self.replicas.carry_out_all(self.replicas.transitions(sorted(self.image.states), []))
        self.replicas.update_ineligible()
        self.replicas.remove_leftover_logs()
        # Each group's partition loads when this broker takes its leadership.
        await self.groups.start()
        self.txn.start()
        for topic, p in self.partitions:
            if topic in (OFFSETS_TOPIC, TXN_TOPIC):
                self.replicas.follow_coordination(topic, p)
        await self._listen()
        for coro in (
            self._housekeeping(),
            self.session.heartbeats(),
            self.publisher.follow(),
            self.alter_partition.ticker(),
        ):
            self._tasks.append(asyncio.create_task(coro))
        self.fetchers.start()
        self.cleaner.start(asyncio.get_running_loop())
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

    async def _listen(self) -> None:
        from epochlog.server.connection import KafkaConnection
        from epochlog.server.listener_security import ListenerSecurity, listener_security

        # The metrics endpoint is up before the client listeners: whoever sees the broker accept connections
        # can scrape it (a listener accepts at listen(), before this coroutine goes on).
        self.metrics.bind(self)
        storage_metrics.on_flush = self.metrics.observe_flush
        if self.config.metrics_port:
            self.metrics.serve(self.config.host, self.config.metrics_port)
        loop = asyncio.get_running_loop()

        def factory(sec: ListenerSecurity) -> Callable[[], KafkaConnection]:
            return lambda: KafkaConnection(self, sec)

        servers = []
        for listener in self.config.broker_listeners():
            sec = listener_security(self.config.raw, listener, self.config.ssl_server_contexts.get(listener.name))
            servers.append(
                await loop.create_server(
                    factory(sec), listener.host, listener.port, reuse_address=True, backlog=512, ssl=sec.ssl_context
                )
            )
        self.server, self.extra_servers = servers[0], servers[1:]

    def _group_coordinator(self) -> GroupCoordinator:
        cfg = GroupConfig(
            offsets_topic_num_partitions=self.config.offsets_topic_num_partitions,
            group_initial_rebalance_delay_ms=self.config.group_initial_rebalance_delay_ms,
            group_min_session_timeout_ms=self.config.group_min_session_timeout_ms,
            group_max_session_timeout_ms=self.config.group_max_session_timeout_ms,
            offsets_retention_ms=self.config.offsets_retention_minutes * 60_000,
            consumer_session_timeout_ms=self.config.group_consumer_session_timeout_ms,
            consumer_heartbeat_interval_ms=self.config.group_consumer_heartbeat_interval_ms,
            consumer_max_size=self.config.group_consumer_max_size,
            consumer_assignors=self.config.group_consumer_assignors,
            share_session_timeout_ms=self.share_config.session_timeout_ms,
            share_heartbeat_interval_ms=self.share_config.heartbeat_interval_ms,
            share_max_size=self.share_config.max_size,
        )
        gc = GroupCoordinator(LogOffsetsStore(self), cfg)
        # KIP-848 groups assign the partitions of the topics the metadata image has now.
        gc.topic_counts = lambda: {name: len(info.partitions) for name, info in self.image.topics.items()}
        gc.topic_ids = lambda: {name: info.uuid for name, info in self.image.topics.items() if info.topic_id}
        gc.share_member_gone = self.shares.member_left
        gc.share_group_deleted = self.shares.delete_group
        gc.group_configs = lambda gid: self.image.cluster.group_configs.get(gid, {})
        return gc

    async def stop(self) -> None:
        if self.config.controlled_shutdown_enable:
            await self.session.controlled_shutdown()
        self.shutting_down = True
        await self.txn.stop()
        await self.shares.stop()
        await self.fetchers.stop()
        self.controller.close()
        log.info("broker %d shutting down", self.config.node_id)
        for server in [self.server, *self.extra_servers]:
            if server is not None:
                server.close()
        for conn in list(self.connections):
            conn.close()
        for t in self._tasks:
            t.cancel()
        await self.groups.stop()
        await self._stop_cleaner()
        tracing.close(self.tracer)
        self.group_commit.close()  # a sync in flight finishes before the logs close
        self.log_manager.close(self.session.epoch)
        log.info("broker %d stopped cleanly", self.config.node_id)

    async def _stop_cleaner(self) -> None:
        """The cleaner's threads finish (or drop) what they do; a swap they wait for runs meanwhile, on
        this loop, so the logs are closed only once no thread touches them."""
        self.cleaner.request_stop()
        deadline = time.monotonic() + 30
        while self.cleaner.running and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        self.cleaner.close()

    async def _housekeeping(self) -> None:
        while True:
            await asyncio.sleep(0.2)
            try:
                self.log_manager.tick(now_ms())
                self._close_idle_connections()
            except Exception:
                log.exception("housekeeping failed")

    def _close_idle_connections(self) -> None:
        """connections.max.idle.ms: a connection with nothing read or written for that long is closed."""
        deadline = time.monotonic() - self.limits.idle_ms / 1000
        for conn in [c for c in self.connections if c.last_active < deadline and not c.busy]:
            log.info("closing %s: idle for connections.max.idle.ms=%d", conn.peer, self.limits.idle_ms)
            conn.close()

    # -- log directory failure ---------------------------------------------------------
    def _on_log_dir_failure(self, failed: str) -> None:
        """Kafka's ReplicaManager.handleLogDirFailure: the partitions of the failed directory stop serving
        (KAFKA_STORAGE_ERROR), their waiting acks=all produces are answered with that error, never a
        success; with no directory left the broker shuts down."""
        hit = [p for p in self.partitions.values() if p.log.log_dir == failed]
        for part in hit:
            part.go_offline()
        self.offline_by_dir[failed] = [(p.topic, p.partition, p.topic_id) for p in hit]
        log.error(
            "log directory %s failed: %d partitions offline (%s)",
            failed,
            len(hit),
            ", ".join(f"{p.topic}-{p.partition}" for p in hit[:20]),
        )
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        loop.call_soon(self._after_log_dir_failure, failed)

    def _after_log_dir_failure(self, failed: str) -> None:
        if not self.log_manager.online:
            log.critical(
                "broker %d: every log directory is offline (%s); shutting down",
                self.config.node_id,
                ", ".join(self.log_manager.failures.offline_dirs),
            )
            self.exit_code = 1
            self.must_stop.set()
        if not self.must_stop.is_set():
            self.spawn(self.session.report_offline_dir(failed))

    # -- what its client connections use (server/connection_owner.py) ------------------
    def observe_request(self, request: str, started: float) -> None:
        self.metrics.observe_request(request, started)

    def on_connection_lost(self, conn: KafkaConnection) -> None:
        pass  # a broker keeps no state per connection beyond the connection's own

    def is_supported(self, api_key: int, version: int) -> bool:
        return is_supported(api_key, version)

    def dispatch_from(self, conn: KafkaConnection, header: RequestHeader, frame: memoryview) -> Any:
        result = dispatch(self, header, frame)
        if header.api_key == METADATA_API_KEY and self.lease.lapsed(now_ms()):
            self._send_elsewhere(conn)
        return result

    def _send_elsewhere(self, conn: KafkaConnection) -> None:
        """Cut off from the active controller, with leaderships it no longer serves: after answering a
        client's Metadata (those partitions without a leader), close its connection. A client asks the
        brokers it is connected to for metadata, and this one cannot learn who leads now; without a
        connection here it asks another broker, which can."""
        now = now_ms()
        if any(p.is_leader and not p.replica.serves_as_leader(now) for p in self.partitions.values()):
            log.info("closing %s after its Metadata: this broker's lease lapsed; it should ask another", conn.peer)
            asyncio.get_running_loop().call_soon(conn.close)

    # -- what the handlers use (server/broker_api.py) -----------------------------------
    def partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def offline_log_dir_count(self) -> int:
        """Kafka's OfflineLogDirectoryCount: log directories an I/O error took offline."""
        return self.log_manager.failures.offline_count

    def dynamic_broker_configs(self) -> DynamicBrokerConfigs:
        return DynamicBrokerConfigs.of(self.image.cluster.broker_configs, self.config.node_id)

    def topic_log_config(self, info: TopicInfo) -> LogConfig:
        props = dict(self.config.log_properties())
        # The effective values by topic name win over the log.* names in LogConfig.from_properties.
        props.update(topic_properties(self.config, info.configs, self.dynamic_broker_configs()))
        return LogConfig.from_properties(props)

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        """The stored credential a SASL/SCRAM exchange checks the client's proof against."""
        return self.image.cluster.scram.get((user, mechanism))

    def topic_name_for_id(self, topic_id: uuid.UUID) -> str | None:
        return self.image.topic_name_for_id(topic_id)

    def submit_alter(self, part: Partition, proposal: AlterIsr) -> None:
        self.alter_partition.submit(part, proposal)

    async def forward(self, req: Any, timeout: float = 30) -> Any:
        return await self.forwarding.forward(req, timeout)

    def maybe_auto_create(self, name: str) -> TopicInfo | None:
        return self.forwarding.maybe_auto_create(name)

    def coordinator_for(self, group_id: str) -> int:
        return self.forwarding.coordinator_for(group_id)

    def txn_coordinator_for(self, transactional_id: str) -> int:
        return self.forwarding.txn_coordinator_for(transactional_id)

    def share_coordinator_for(self, key: str) -> int:
        return self.forwarding.share_coordinator_for(key)

    async def wait_for_topics(self, names: list[str], present: bool, timeout: float = 5.0) -> None:
        def shown() -> bool:
            return all((n in self.image.topics and bool(self.image.topics[n].partitions)) == present for n in names)

        await self.publisher.wait_for(shown, timeout)

    async def wait_for_metadata(self, done: Callable[[], bool], timeout: float = 5.0) -> None:
        """Until ``done()`` holds of this broker's metadata, or ``timeout`` seconds passed."""
        await self.publisher.wait_for(done, timeout)


def run_broker(config: BrokerConfig) -> None:
    from epochlog.server.lifecycle import run_until_signal

    run_until_signal(lambda: ClusterBroker(config))
