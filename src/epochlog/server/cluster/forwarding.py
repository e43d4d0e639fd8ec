"""What a broker asks the active controller for on a client's behalf: topic creation (requests forwarded
as they came, auto-created topics, the internal topics on first use), producer-id blocks, and the leaders
of the coordinators' internal partitions."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.allocate_producer_ids.v0.request import AllocateProducerIdsRequest
from kio.schema.create_topics.v7.request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i16, i32, i32Timedelta, i64

from epochlog.controller.image import TopicInfo
from epochlog.server.cluster.peer import PeerError
from epochlog.server.groups.hashing import partition_for
from epochlog.server.internal_topics import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TXN_TOPIC

if TYPE_CHECKING:
    from epochlog.server.cluster.broker import ClusterBroker

log = logging.getLogger("epochlog.broker")


def create_topics_request(name: str, partitions: int, rf: int, configs: dict[str, str]) -> CreateTopicsRequest:
    return CreateTopicsRequest(
        topics=(
            CreatableTopic(
                name=TopicName(name),
                num_partitions=i32(partitions),
                replication_factor=i16(rf),
                assignments=(),
                configs=tuple(CreatableTopicConfig(name=k, value=v) for k, v in configs.items()),
            ),
        ),
        timeout=i32Timedelta.parse(timedelta(seconds=10)),
        validate_only=False,
    )


class Forwarding:
    def __init__(self, broker: ClusterBroker) -> None:
        self.broker = broker
        self._creating_internal: set[str] = set()
        self._internal_topic_warned: dict[str, float] = {}

    async def forward(self, req: Any, timeout: float = 30) -> Any:
        return await self.broker.controller.request("rpc", req, timeout=timeout)

    def maybe_auto_create(self, name: str) -> TopicInfo | None:
        """Kafka's behaviour: ask the controller to create it and answer LEADER_NOT_AVAILABLE meanwhile."""
        b = self.broker
        info = b.image.topics.get(name)
        if info is not None or not b.config.auto_create_topics_enable:
            return info
        rf = min(b.config.default_replication_factor, len(b.image.live_brokers()) or 1)
        req = create_topics_request(name, b.config.num_partitions, rf, {})

        async def create() -> None:
            try:
                await self.forward(req)
            except PeerError as e:
                log.info("auto creation of %r failed: %s", name, e)

        b.spawn(create())
        return None

    def coordinator_for(self, group_id: str) -> int:
        """The leader of the group's __consumer_offsets partition, or -1 (COORDINATOR_NOT_AVAILABLE)
        while there is none; asks the controller to create the topic on first use, as Kafka does."""
        cfg = self.broker.config
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
        cfg = self.broker.config
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

    def share_coordinator_for(self, key: str) -> int:
        """The leader of the share-partition key's __share_group_state partition ("group:topicId:partition"),
        or -1; creates the topic on first use, as Kafka does."""
        cfg = self.broker.share_config
        return self._internal_leader(
            SHARE_STATE_TOPIC,
            key,
            cfg.state_topic_num_partitions,
            cfg.state_topic_replication_factor,
            {
                "cleanup.policy": "compact",
                "segment.bytes": str(cfg.state_topic_segment_bytes),
                "min.insync.replicas": str(cfg.state_topic_min_isr),
                "unclean.leader.election.enable": "false",
            },
        )

    def _internal_leader(self, topic: str, key: str, partitions: int, rf: int, configs: dict[str, str]) -> int:
        image = self.broker.image
        info = image.topics.get(topic)
        if info is None or not info.partitions:
            self._create_internal_topic(topic, partitions, rf, configs)
            return -1
        st = image.states.get((topic, partition_for(key, len(info.partitions))))
        if st is None or st.leader < 0:
            return -1
        ep = image.brokers.get(st.leader)
        return st.leader if ep is not None and not ep.fenced else -1

    def _create_internal_topic(self, topic: str, partitions: int, rf: int, configs: dict[str, str]) -> None:
        if topic in self._creating_internal:
            return
        # As Kafka: not created below its replication factor (FindCoordinator answers
        # COORDINATOR_NOT_AVAILABLE and clients retry), or a cluster whose brokers came up one by one
        # would keep a single copy of every group's offsets (every transaction's state) for good.
        live = len(self.broker.image.live_brokers())
        if live < rf:
            now = time.monotonic()
            if now - self._internal_topic_warned.get(topic, float("-inf")) >= 10:
                self._internal_topic_warned[topic] = now
                log.warning("not creating %s yet: %d live brokers, its replication factor is %d", topic, live, rf)
            return
        req = create_topics_request(topic, partitions, rf, configs)

        async def create() -> None:
            self._creating_internal.add(topic)
            try:
                await self.forward(req)
            except PeerError as e:
                log.info("creating %s failed: %s", topic, e)
            finally:
                self._creating_internal.discard(topic)

        self.broker.spawn(create())


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
                req = AllocateProducerIdsRequest(
                    broker_id=BrokerId(self.broker.config.node_id), broker_epoch=i64(self.broker.session.epoch)
                )
                resp = await self.broker.controller.request("rpc", req, timeout=5)
                if resp.error_code:
                    raise PeerError(f"AllocateProducerIds refused: {resp.error_code}")
                self._next = int(resp.producer_id_start)
                self._end = self._next + int(resp.producer_id_len)
            pid = self._next
            self._next += 1
            return pid
