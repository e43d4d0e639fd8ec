"""The broker process: storage, topic registry, partitions, group coordinator and listener."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from epochlog.protocol.errors import Err
from epochlog.server.config import BrokerConfig
from epochlog.server.metrics import BrokerMetrics
from epochlog.server.partition import Partition
from epochlog.server.producer_ids import ProducerIdAllocator
from epochlog.server.topics import TopicInfo, TopicRegistry, validate_topic_name
from epochlog.storage.config import LogConfig
from epochlog.storage.log_manager import LogManager

log = logging.getLogger("epochlog.broker")

OFFSETS_TOPIC = "__consumer_offsets"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class TopicError(Exception):
    def __init__(self, code: Err, message: str) -> None:
        super().__init__(message)
        self.code = code


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.base_log_config = LogConfig.from_properties(config.log_properties())
        self.log_manager = LogManager(config.log_dir, self.base_log_config, config.log_retention_check_interval_ms)
        self.registry = TopicRegistry(config.log_dir)
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.producer_ids = ProducerIdAllocator(config.log_dir)
        self.cluster_id = config.cluster_id
        self.server: asyncio.AbstractServer | None = None
        self.groups: Any = None
        self.image_driven_groups = False
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = asyncio.Event()
        self.connections: set[Any] = set()
        self.metrics = BrokerMetrics()

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self) -> None:
        self.config.log_dir.mkdir(parents=True, exist_ok=True)
        self.cluster_id = self.log_manager.open(node_id=self.config.node_id, cluster_id=self.config.cluster_id)
        self.registry.load()
        self.registry.bump_all_epochs()
        self.log_manager.load_all()
        # A crash between a registry change and the log directories can leave logs of deleted
        # topics (or of an older topic with the same name); they must not resurface.
        for topic, _p in list(self.log_manager.logs):
            info = self.registry.topics.get(topic)
            plog = self.log_manager.logs.get((topic, _p))
            if info is None or (plog is not None and plog.topic_id not in (None, info.topic_id)):
                log.warning("removing leftover log directories of %s (not in the topic registry)", topic)
                self.log_manager.delete_topic(topic)
        for info in self.registry.topics.values():
            self._open_partitions(info, range(info.partitions))
        self._ensure_offsets_topic()
        await self._start_groups()
        from epochlog.server.connection import KafkaConnection

        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(
            lambda: KafkaConnection(self), self.config.host, self.config.port, reuse_address=True, backlog=512
        )
        self._tasks.append(asyncio.create_task(self._housekeeping()))
        self.metrics.bind(self)
        if self.config.metrics_port:
            self.metrics.serve(self.config.host, self.config.metrics_port)
            log.info("metrics on http://%s:%d/metrics", self.config.host, self.config.metrics_port)
        log.info(
            "broker %d serving on %s:%d, data in %s, cluster %s, %d partitions",
            self.config.node_id,
            self.config.host,
            self.config.port,
            self.config.log_dir,
            self.cluster_id,
            len(self.partitions),
        )

    async def stop(self) -> None:
        log.info("broker %d shutting down", self.config.node_id)
        if self.server is not None:
            self.server.close()
        for conn in list(self.connections):
            conn.close()
        for t in self._tasks:
            t.cancel()
        if self.groups is not None:
            await self.groups.stop()
        self.log_manager.close()
        log.info("broker %d stopped cleanly", self.config.node_id)

    async def _housekeeping(self) -> None:
        while True:
            await asyncio.sleep(0.2)
            try:
                self.log_manager.tick(now_ms())
            except Exception:
                log.exception("housekeeping failed")

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
        # One node leads every __consumer_offsets partition; in a cluster, partitions load with leadership.
        await self.groups.start(load_all=self.image_driven_groups is False)

    # -- topics ------------------------------------------------------------------------
    def _open_partitions(self, info: TopicInfo, indexes: range) -> None:
        cfg = self.topic_log_config(info)
        for p in indexes:
            plog = self.log_manager.get(info.name, p)
            if plog is None:
                plog = self.log_manager.create(info.name, p, info.topic_id, cfg)
            else:
                plog.config = cfg
            part = Partition(info.name, p, info.topic_id, plog, info.leader_epochs[p])
            part.become_leader()
            self.partitions[(info.name, p)] = part
            log.info(
                "partition %s-%d leader at epoch %d, log [%d, %d), hw %d",
                info.name,
                p,
                part.leader_epoch,
                plog.log_start_offset,
                plog.log_end_offset,
                plog.high_watermark,
            )

    def topic_log_config(self, info: TopicInfo) -> LogConfig:
        props = dict(self.config.log_properties())
        props.update(info.configs)
        return LogConfig.from_properties(props)

    def _ensure_offsets_topic(self) -> None:
        if OFFSETS_TOPIC not in self.registry.topics:
            self.create_topic(
                OFFSETS_TOPIC,
                self.config.offsets_topic_num_partitions,
                1,
                {"cleanup.policy": "compact", "segment.bytes": "104857600"},
                internal=True,
            )

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str],
        internal: bool = False,
        validate_only: bool = False,
    ) -> TopicInfo:
        reason = validate_topic_name(name)
        if reason:
            raise TopicError(Err.INVALID_TOPIC_EXCEPTION, reason)
        if name in self.registry.topics:
            raise TopicError(Err.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        if num_partitions == -1:
            num_partitions = self.config.num_partitions
        if replication_factor == -1:
            replication_factor = self.config.default_replication_factor
        if num_partitions < 1:
            raise TopicError(Err.INVALID_PARTITIONS, f"number of partitions must be at least 1, got {num_partitions}")
        if num_partitions > 100_000:
            raise TopicError(Err.INVALID_PARTITIONS, f"{num_partitions} partitions is more than this broker allows")
        if replication_factor != 1:
            raise TopicError(
                Err.INVALID_REPLICATION_FACTOR,
                f"replication factor {replication_factor} is larger than the 1 available broker",
            )
        try:
            LogConfig.from_properties({**self.config.log_properties(), **configs})
        except ValueError as e:
            raise TopicError(Err.INVALID_CONFIG, str(e)) from e
        info = TopicInfo(name, uuid.uuid4(), num_partitions, dict(configs), [0] * num_partitions, internal)
        if validate_only:
            return info
        self.registry.add(info)
        self._open_partitions(info, range(num_partitions))
        log.info("created topic %s (%s) with %d partitions", name, info.topic_id, num_partitions)
        return info

    def delete_topic(self, name: str) -> None:
        info = self.registry.topics.get(name)
        if info is None:
            raise TopicError(Err.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        if info.internal:
            raise TopicError(Err.INVALID_TOPIC_EXCEPTION, f"internal topic {name!r} cannot be deleted")
        self.registry.remove(name)
        for p in range(info.partitions):
            part = self.partitions.pop((name, p), None)
            if part is not None:
                part.notify()
        self.log_manager.delete_topic(name)
        log.info("deleted topic %s (%s)", name, info.topic_id)

    def add_partitions(self, name: str, count: int, validate_only: bool = False) -> None:
        info = self.registry.topics.get(name)
        if info is None:
            raise TopicError(Err.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        if count <= info.partitions:
            raise TopicError(
                Err.INVALID_PARTITIONS,
                f"topic {name!r} has {info.partitions} partitions; the new count must be larger, got {count}",
            )
        if validate_only:
            return
        old = info.partitions
        info.partitions = count
        info.leader_epochs += [0] * (count - old)
        self.registry.save()
        self._open_partitions(info, range(old, count))

    def maybe_auto_create(self, name: str) -> TopicInfo | None:
        """Metadata's auto topic creation (auto.create.topics.enable)."""
        info = self.registry.topics.get(name)
        if info is not None or not self.config.auto_create_topics_enable:
            return info
        try:
            return self.create_topic(name, self.config.num_partitions, 1, {})
        except TopicError as e:
            log.info("auto creation of %r refused: %s", name, e)
            return None

    def partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def topic_name_for_id(self, topic_id: uuid.UUID) -> str | None:
        info = self.registry.by_id.get(topic_id)
        return info.name if info else None


def run_forever(config: BrokerConfig, on_ready: Callable[[Broker], None] | None = None) -> None:
    """Run a broker until SIGINT/SIGTERM, then shut down cleanly."""
    from epochlog.server.lifecycle import run_until_signal

    run_until_signal(lambda: Broker(config), on_ready)
