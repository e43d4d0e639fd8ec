"""The broker process's shared runtime: storage, partitions, group coordinator and connections."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from epochlog.controller.image import TopicInfo
from epochlog.security.authorizer import StandardAuthorizer
from epochlog.server.clock import now_ms
from epochlog.server.config import BrokerConfig
from epochlog.server.limits import ConnectionLimits
from epochlog.server.metrics import BrokerMetrics
from epochlog.server.partition import Partition
from epochlog.server.replication_throttle import ReplicationThrottles
from epochlog.server.topic_configs import DynamicBrokerConfigs, topic_properties
from epochlog.storage.cleaner.config import CleanerConfig
from epochlog.storage.cleaner.manager import LogCleaner
from epochlog.storage.config import LogConfig
from epochlog.storage.log_dirs import LogDirs

log = logging.getLogger("epochlog.broker")

class Broker:
    """What every broker process holds: its logs, partitions, group coordinator, connections and
    metrics, and their shutdown. ClusterBroker (server/cluster/broker.py) is the broker: it takes its
    topics and partition states from the controller's metadata log, on a single node as in a cluster."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.base_log_config = LogConfig.from_properties(config.log_properties())
        self.log_manager = LogDirs(
            config.all_log_dirs(), self.base_log_config, config.log_retention_check_interval_ms
        )
        # broker.log_manager.failures.offline_count is Kafka's OfflineLogDirectoryCount.
        self.log_manager.failures.subscribe(self._on_log_dir_failure)
        self.exit_code = 0
        self.offline_by_dir: dict[str, list[tuple[str, int, Any]]] = {}
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.cluster_id = config.cluster_id
        self.server: asyncio.AbstractServer | None = None
        self.extra_servers: list[asyncio.AbstractServer] = []  # the listeners after the first
        self.groups: Any = None
        self._tasks: list[asyncio.Task[None]] = []
        # Set when the broker must stop by itself (every log directory failed); exit_code says why.
        self.must_stop = asyncio.Event()
        self.connections: set[Any] = set()
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
        self.replication_throttles.reconfigure({}, {}, config.raw)
        # Compaction of cleanup.policy=compact logs, on threads of its own; started with the broker.
        self.cleaner = LogCleaner(self.log_manager, CleanerConfig.from_properties(config.raw))
        # authorizer.class.name turns ACLs on; the metadata log's ACLs are handed to it as they change.
        self.authorizer: StandardAuthorizer | None = None
        if config.authorizer_class_name:
            self.authorizer = StandardAuthorizer(set(config.super_users), config.allow_everyone_if_no_acl_found)

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

    async def stop(self) -> None:
        log.info("broker %d shutting down", self.config.node_id)
        for server in [self.server, *self.extra_servers]:
            if server is not None:
                server.close()
        for conn in list(self.connections):
            conn.close()
        for t in self._tasks:
            t.cancel()
        if self.groups is not None:
            await self.groups.stop()
        await self._stop_cleaner()
        self.log_manager.close()
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

    async def _start_groups(self) -> None:
        from epochlog.server.groups import GroupConfig, GroupCoordinator
        from epochlog.server.offsets_store import LogOffsetsStore

        store = LogOffsetsStore(self)
        cfg = GroupConfig(
            offsets_topic_num_partitions=self.config.offsets_topic_num_partitions,
            group_initial_rebalance_delay_ms=self.config.group_initial_rebalance_delay_ms,
            group_min_session_timeout_ms=self.config.group_min_session_timeout_ms,
            group_max_session_timeout_ms=self.config.group_max_session_timeout_ms,
            offsets_retention_ms=self.config.offsets_retention_minutes * 60_000,
        )
        self.groups = GroupCoordinator(store, cfg)
        # Each group's partition loads when this broker takes its leadership.
        await self.groups.start(load_all=False)

    def dynamic_broker_configs(self) -> DynamicBrokerConfigs:
        """This broker's and the cluster-wide dynamic configs; none outside a cluster's metadata."""
        return DynamicBrokerConfigs()

    def topic_log_config(self, info: TopicInfo) -> LogConfig:
        props = dict(self.config.log_properties())
        # The effective values by topic name win over the log.* names in LogConfig.from_properties.
        props.update(topic_properties(self.config, info.configs, self.dynamic_broker_configs()))
        return LogConfig.from_properties(props)

    def offline_log_dir_count(self) -> int:
        """Kafka's OfflineLogDirectoryCount: log directories an I/O error took offline."""
        return self.log_manager.failures.offline_count

    def partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))
