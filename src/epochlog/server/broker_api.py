"""What request handlers may use of the broker: one narrow, typed surface instead of probing it.

ClusterBroker implements it (on a single node as in a cluster); the handlers, the connection and the
offsets store are written against this Protocol only."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from epochlog.controller.image import TopicInfo
    from epochlog.replication.fetch_sessions import FetchSessionCache
    from epochlog.replication.lease import BrokerLease
    from epochlog.replication.types import AlterIsr
    from epochlog.security.authorizer import StandardAuthorizer
    from epochlog.security.scram_credentials import ScramCredential
    from epochlog.server.cluster.image import MetadataImage
    from epochlog.server.config import BrokerConfig
    from epochlog.server.connection import KafkaConnection
    from epochlog.server.groups.coordinator import GroupCoordinator
    from epochlog.server.metrics import BrokerMetrics
    from epochlog.server.partition import Partition
    from epochlog.server.peer_security import PeerSecurity
    from epochlog.server.quota_enforcement import ClientQuotas
    from epochlog.server.replication_throttle import ReplicationThrottles
    from epochlog.server.share.config import ShareConfig
    from epochlog.server.share.partitions import SharePartitions
    from epochlog.server.topic_configs import DynamicBrokerConfigs
    from epochlog.server.transactions.coordinators import TxnCoordinators
    from epochlog.storage.cleaner.manager import LogCleaner
    from epochlog.storage.log_dirs import LogDirs


class ProducerIds(Protocol):
    async def allocate_async(self) -> int: ...


class BrokerApi(Protocol):
    config: BrokerConfig
    cluster_id: str
    image: MetadataImage  # the metadata log as applied here: topics, partition states, live brokers
    partitions: dict[tuple[str, int], Partition]  # the replicas this broker hosts
    groups: GroupCoordinator  # set once the broker has started
    txn: TxnCoordinators
    shares: SharePartitions  # KIP-932 share-partitions this broker leads (server/share/)
    share_config: ShareConfig
    metrics: BrokerMetrics
    connections: set[KafkaConnection]
    cleaner: LogCleaner  # compaction of the log directories (its gauges are scraped from here)
    log_manager: LogDirs  # every log directory (DescribeLogDirs reads it)
    replication_throttles: ReplicationThrottles  # caps on replication bytes of throttled replicas
    client_quotas: ClientQuotas  # producer/consumer byte rates per client (quota_enforcement.py)
    fetch_sessions: FetchSessionCache  # KIP-227 incremental fetch sessions
    authorizer: StandardAuthorizer | None  # None unless authorizer.class.name is set (server/authz.py)
    peer_security: PeerSecurity | None  # how this broker connects to other brokers' inter-broker listener
    lease: BrokerLease  # whether the active controller still vouches for this broker (replication/lease.py)

    @property
    def producer_ids(self) -> ProducerIds: ...

    def partition(self, topic: str, index: int) -> Partition | None: ...

    def offline_log_dir_count(self) -> int: ...

    def topic_name_for_id(self, topic_id: uuid.UUID) -> str | None: ...

    def maybe_auto_create(self, name: str) -> TopicInfo | None: ...

    def coordinator_for(self, group_id: str) -> int: ...

    def txn_coordinator_for(self, transactional_id: str) -> int: ...

    def share_coordinator_for(self, key: str) -> int: ...

    def submit_alter(self, part: Partition, proposal: AlterIsr) -> None: ...

    async def forward(self, req: Any, timeout: float = 30) -> Any: ...

    async def wait_for_topics(self, names: list[str], present: bool, timeout: float = 5.0) -> None: ...

    async def wait_for_metadata(self, done: Callable[[], bool], timeout: float = 5.0) -> None: ...

    def dynamic_broker_configs(self) -> DynamicBrokerConfigs: ...

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None: ...
