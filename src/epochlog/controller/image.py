"""The cluster's metadata state and the one function that changes it: ``ClusterImage.apply``.

The controller's live path, its replay of the log, a broker following the log and the simulator all
apply records here, so they cannot disagree on what a record means. Session state (when a broker last
heartbeated) is not metadata and lives with the controller.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from epochlog.config_defs import RESOURCE_BROKER, RESOURCE_GROUP, RESOURCE_TOPIC
from epochlog.controller.records import (
    AclCreated,
    AclRemoved,
    BootstrapApplied,
    BrokerFenced,
    BrokerRegistration,
    BrokerShuttingDown,
    ClientQuotaRecord,
    ConfigRecord,
    FeatureLevel,
    KRaftVersion,
    LeaderChange,
    MetadataRecord,
    PartitionChange,
    ProducerIds,
    ReplicasOffline,
    ScramCredentialRemoved,
    ScramCredentialSet,
    Topic,
    TopicDeleted,
    UncleanElection,
    Voters,
)
from epochlog.replication.types import PartitionState
from epochlog.security.acl import AclBinding, Operation, PatternType, Permission, ResourceType
from epochlog.security.scram_credentials import ScramCredential


@dataclass
class BrokerInfo:
    broker_id: int
    epoch: int = 0
    fenced: bool = True
    last_heartbeat_ms: int = 0  # session state: set by the controller, never by a record
    shutting_down: bool = False
    clean_shutdown: bool = True  # how its last registration judged the shutdown before it (KIP-966)
    host: str = ""
    port: int = 0
    listeners: tuple[tuple[str, str, int], ...] = ()
    rack: str | None = None

    def address_for(self, listener: str) -> tuple[str, int]:
        """(host, port) of the named listener; the inter-broker one's when it has no such listener, so a
        client is told the addresses of the listener it came in on."""
        for name, host, port in self.listeners:
            if name == listener:
                return host, port
        return self.host, self.port


# Kafka's feature that turns KIP-966 on; level 1 is on. New clusters finalize it at activation.
ELR_FEATURE = "eligible.leader.replicas.version"

# Kafka's "no id": what a topic created without one (records of the first logs) is known by on every
# broker alike, rather than an id each would invent for itself.
NO_TOPIC_ID = uuid.UUID(int=0)


@dataclass
class TopicInfo:
    name: str
    partitions: dict[int, PartitionState] = field(default_factory=dict)
    unclean_leader_election: bool = False
    topic_id: str = ""
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def uuid(self) -> uuid.UUID:
        """The topic id as the wire and the partition.metadata file carry it."""
        return uuid.UUID(self.topic_id) if self.topic_id else NO_TOPIC_ID


@dataclass
class Applied:
    """What one record changed, for a broker to act on."""

    partitions: list[tuple[str, int]] = field(default_factory=list)
    deleted: list[TopicInfo] = field(default_factory=list)
    brokers: list[int] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)
    # Resources whose dynamic configs changed: (resource type, name); a broker's name is its id, "" the default.
    configs: list[tuple[int, str]] = field(default_factory=list)
    acls: bool = False  # the set of ACLs changed (a broker hands them all to its authorizer)


class ClusterImage:
    def __init__(self) -> None:
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.topic_names: dict[uuid.UUID, str] = {}  # by topic id: requests that name a topic by its id
        self.next_producer_id = 0
        # Replicas on a broker's failed log directory (KIP-858), until that broker registers again.
        self.offline_replicas: dict[int, set[tuple[str, int]]] = {}
        # Dynamic broker configs (broker names, e.g. log.retention.ms): per broker id as a string, and the
        # cluster-wide default under "". Topic overrides live in TopicInfo.configs.
        self.broker_configs: dict[str, dict[str, str]] = {}
        # Group configs (resource type GROUP: share.auto.offset.reset, ...) by group id; a group need not exist.
        self.group_configs: dict[str, dict[str, str]] = {}
        self.acls: dict[str, AclBinding] = {}  # by the id the controller gave each
        self.acl_version = 0  # counts changes of ``acls``: an authorizer reloads when it moves
        self.scram: dict[tuple[str, str], ScramCredential] = {}  # by (user, mechanism)
        self.bootstrapped = False  # the bootstrap file's records are in the log (BootstrapApplied)
        self.features: dict[str, int] = {}  # finalized feature levels (FeatureLevel records)
        self.voters: Voters | None = None  # the quorum's last voter set (KIP-853), for snapshots
        # Client quotas by entity ((type, name) pairs sorted by type; a None name is the default).
        self.client_quotas: dict[tuple[tuple[str, str | None], ...], dict[str, float]] = {}
        self.quota_version = 0  # counts changes of ``client_quotas``: a broker's quota table rebuilds when it moves

    def apply(self, record: MetadataRecord) -> Applied:
        out = Applied()
        if isinstance(record, BrokerRegistration):
            b = self.brokers.setdefault(record.broker, BrokerInfo(record.broker))
            self.offline_replicas.pop(record.broker, None)  # a restart brings its directories back
            b.epoch = record.epoch
            b.clean_shutdown = record.clean_shutdown
            b.host, b.port = record.host or b.host, record.port or b.port
            b.listeners = record.listeners or b.listeners
            b.rack = record.rack  # a broker restarted without broker.rack has none, as in Kafka
            b.fenced = b.shutting_down = False
            out.brokers.append(record.broker)
        elif isinstance(record, BrokerFenced | BrokerShuttingDown):
            b2 = self.brokers.get(record.broker)
            if b2 is not None:
                b2.fenced = True
                if isinstance(record, BrokerShuttingDown):
                    b2.shutting_down = True
                out.brokers.append(record.broker)
        elif isinstance(record, Topic):
            topic = TopicInfo(
                record.name, unclean_leader_election=record.unclean, topic_id=record.id, configs=dict(record.configs)
            )
            self.topics[record.name] = topic
            if record.id:
                self.topic_names[topic.uuid] = record.name
            out.topics.append(record.name)
        elif isinstance(record, TopicDeleted):
            info = self.topics.pop(record.name, None)
            if info is not None:
                if info.topic_id and self.topic_names.get(info.uuid) == info.name:
                    del self.topic_names[info.uuid]
                out.deleted.append(info)
        elif isinstance(record, PartitionChange):
            t = self.topics.get(record.topic)
            if t is not None:
                t.partitions[record.partition] = PartitionState(
                    record.leader,
                    record.leader_epoch,
                    frozenset(record.isr),
                    tuple(record.replicas),
                    record.partition_epoch,
                    adding=tuple(record.adding_replicas),
                    removing=tuple(record.removing_replicas),
                    elr=tuple(record.elr),
                    last_known_elr=tuple(record.last_known_elr),
                )
                out.partitions.append((record.topic, record.partition))
        elif isinstance(record, ProducerIds):
            self.next_producer_id = max(self.next_producer_id, record.next)
        elif isinstance(record, ReplicasOffline):
            self.offline_replicas.setdefault(record.broker, set()).update(record.partitions)
        elif isinstance(record, ConfigRecord):
            self._apply_config(record, out)
        elif isinstance(record, AclCreated):
            self.acls[record.id] = acl_binding(record)
            out.acls = True
            self.acl_version += 1
        elif isinstance(record, AclRemoved):
            out.acls = self.acls.pop(record.id, None) is not None
            self.acl_version += 1
        elif isinstance(record, ScramCredentialSet):
            self.scram[(record.name, record.mechanism)] = scram_credential_of(record)
        elif isinstance(record, ScramCredentialRemoved):
            self.scram.pop((record.name, record.mechanism), None)
        elif isinstance(record, BootstrapApplied):
            self.bootstrapped = True
        elif isinstance(record, FeatureLevel):
            self.features[record.name] = record.level
        elif isinstance(record, Voters):
            self.voters = record
        elif isinstance(record, ClientQuotaRecord):
            self._apply_quota(record)
        elif isinstance(record, UncleanElection | LeaderChange | KRaftVersion):
            pass
        return out

    def _apply_config(self, record: ConfigRecord, out: Applied) -> None:
        if record.resource_type == RESOURCE_TOPIC:
            topic = self.topics.get(record.resource_name)
            if topic is None:
                return  # deleted after the change was decided: nothing left to configure
            configs = topic.configs
        elif record.resource_type == RESOURCE_BROKER:
            configs = self.broker_configs.setdefault(record.resource_name, {})
        elif record.resource_type == RESOURCE_GROUP:
            configs = self.group_configs.setdefault(record.resource_name, {})
        else:
            return
        if record.value is None:
            configs.pop(record.name, None)
        else:
            configs[record.name] = record.value
        if record.resource_type == RESOURCE_BROKER and not configs:
            del self.broker_configs[record.resource_name]
        if record.resource_type == RESOURCE_GROUP and not configs:
            del self.group_configs[record.resource_name]
        out.configs.append((record.resource_type, record.resource_name))

    def _apply_quota(self, record: ClientQuotaRecord) -> None:
        entity = tuple(sorted(record.entity, key=lambda p: p[0]))
        if record.remove:
            values = self.client_quotas.get(entity)
            if values is not None:
                values.pop(record.key, None)
                if not values:
                    del self.client_quotas[entity]
        else:
            self.client_quotas.setdefault(entity, {})[record.key] = record.value
        self.quota_version += 1

    def unclean_enabled(self, topic: TopicInfo) -> bool:
        """unclean.leader.election.enable as the controller applies it: the topic's override, else the
        cluster-wide dynamic default, else what the topic was created with (the controller's static config)."""
        raw = topic.configs.get("unclean.leader.election.enable")
        if raw is None:
            raw = self.broker_configs.get("", {}).get("unclean.leader.election.enable")
        if raw is None:
            return topic.unclean_leader_election
        return raw.strip().lower() == "true"

    @property
    def elr_enabled(self) -> bool:
        """KIP-966 is on: the metadata log finalized eligible.leader.replicas.version at 1 or above."""
        return self.features.get(ELR_FEATURE, 0) >= 1

    def min_isr(self, topic: TopicInfo, default: int) -> int:
        """min.insync.replicas as the controller applies it: the topic's override, else the cluster-wide
        dynamic default, else ``default`` (the controller's static config). A bad value counts as 1."""
        raw = topic.configs.get("min.insync.replicas") or self.broker_configs.get("", {}).get("min.insync.replicas")
        if raw is None:
            return default
        try:
            return max(1, int(raw))
        except ValueError:
            return 1

    def snapshot(self) -> list[MetadataRecord]:
        """Records that rebuild this image from nothing: what a metadata snapshot holds."""
        out: list[MetadataRecord] = []
        if self.voters is not None:
            out += [KRaftVersion(1), self.voters]
        for b in sorted(self.brokers.values(), key=lambda b: b.broker_id):
            out.append(BrokerRegistration(b.broker_id, b.epoch, b.host, b.port, listeners=b.listeners, rack=b.rack))
            if b.shutting_down:
                out.append(BrokerShuttingDown(b.broker_id))
            elif b.fenced:
                out.append(BrokerFenced(b.broker_id))
        for broker, parts in sorted(self.offline_replicas.items()):
            if parts:
                out.append(ReplicasOffline(broker, tuple(sorted(parts))))
        if self.next_producer_id:
            out.append(ProducerIds(-1, self.next_producer_id))
        for resource, configs in sorted(self.broker_configs.items()):
            for name, value in sorted(configs.items()):
                out.append(ConfigRecord(RESOURCE_BROKER, resource, name, value))
        for group, configs in sorted(self.group_configs.items()):
            for name, value in sorted(configs.items()):
                out.append(ConfigRecord(RESOURCE_GROUP, group, name, value))
        for acl_id, acl in sorted(self.acls.items()):
            out.append(acl_record(acl_id, acl))
        for entity, quotas in self.client_quotas.items():
            for key, amount in sorted(quotas.items()):
                out.append(ClientQuotaRecord(entity, key, amount))
        for (user, _mech), c in sorted(self.scram.items()):
            out.append(ScramCredentialSet(user, c.mechanism, c.salt, c.stored_key, c.server_key, c.iterations))
        if self.bootstrapped:
            out.append(BootstrapApplied())
        for name, level in sorted(self.features.items()):
            out.append(FeatureLevel(name, level))
        for t in self.topics.values():
            out.append(Topic(t.name, len(t.partitions), t.unclean_leader_election, t.topic_id, dict(t.configs)))
            for p, st in sorted(t.partitions.items()):
                out.append(
                    PartitionChange(
                        t.name, p, st.leader, st.leader_epoch, tuple(sorted(st.isr)), tuple(st.replicas),
                        st.partition_epoch, st.adding, st.removing, st.elr, st.last_known_elr,
                    )
                )
        return out


def acl_binding(r: AclCreated) -> AclBinding:
    return AclBinding(
        ResourceType(r.resource_type),
        r.resource_name,
        PatternType(r.pattern_type),
        r.principal,
        r.host,
        Operation(r.operation),
        Permission(r.permission),
    )


def acl_record(acl_id: str, b: AclBinding) -> AclCreated:
    return AclCreated(
        acl_id,
        int(b.resource_type),
        b.resource_name,
        int(b.pattern_type),
        b.principal,
        b.host,
        int(b.operation),
        int(b.permission),
    )


def scram_credential_of(record: ScramCredentialSet) -> ScramCredential:
    return ScramCredential(record.mechanism, record.salt, record.stored_key, record.server_key, record.iterations)
