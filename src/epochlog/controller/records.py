"""The metadata records: a tagged union, one dataclass per kind, and the JSON they are stored as.

Everything the cluster knows is what these records say, applied in order by ``ClusterImage.apply``
(controller/image.py): the active controller's live decisions, a standby or a restarted controller
replaying the log, a broker following it, and the simulator all go through that one function. The
stored form is ``{"kind": ..., "data": {...}}`` (kinds and field names as the first logs wrote them);
``from_json`` refuses a kind or a field it does not know rather than guess.
"""

from __future__ import annotations

import base64
import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BrokerRegistration:
    broker: int
    epoch: int
    host: str = ""
    port: int = 0
    clean_shutdown: bool = True  # as the controller judged it (KIP-966: the previous broker epoch matched)
    # Every advertised listener (name, host, port); host and port above are the inter-broker one's.
    listeners: tuple[tuple[str, str, int], ...] = ()
    rack: str | None = None  # broker.rack; None when the broker has none (then not stored)


@dataclass(frozen=True)
class BrokerFenced:
    broker: int


@dataclass(frozen=True)
class BrokerShuttingDown:
    broker: int


@dataclass(frozen=True)
class Topic:
    name: str
    partitions: int
    unclean: bool = False
    id: str = ""
    configs: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class TopicDeleted:
    name: str


@dataclass(frozen=True)
class PartitionChange:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    partition_epoch: int
    # KRaft's PartitionRecord/PartitionChangeRecord carry a reassignment in progress, so a new active
    # controller continues it: the replicas joining and leaving (``replicas`` holds both).
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    # KIP-966: replicas that left the ISR while it was below min.insync.replicas and still hold every
    # committed record (eligible to lead when the ISR is empty), and the last known ones, for operators.
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()


@dataclass(frozen=True)
class ProducerIds:
    broker: int
    next: int


@dataclass(frozen=True)
class ReplicasOffline:
    broker: int
    partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class UncleanElection:
    """A report, not a change: the PartitionChange that follows it carries the new state."""

    topic: str
    partition: int
    leader: int


@dataclass(frozen=True)
class ConfigRecord:
    """One dynamic config of a resource set (``value``) or removed (``None``): a topic's override
    (resource type 2, the topic's name), a broker's (type 4, its id) or the cluster-wide broker default
    (type 4, empty name). Kafka's ConfigRecord."""

    resource_type: int
    resource_name: str
    name: str
    value: str | None = None


@dataclass(frozen=True)
class FeatureLevel:
    """A finalized feature and its level (Kafka's FeatureLevelRecord), e.g. eligible.leader.replicas.version."""

    name: str
    level: int


@dataclass(frozen=True)
class LeaderChange:
    """The quorum leader's first record of its epoch (raft/); nothing in the cluster's state changes."""

    leader_id: int
    voters: tuple[int, ...] = ()
    granting_voters: tuple[int, ...] = ()


@dataclass(frozen=True)
class KRaftVersion:
    """Control record 5 (KRaftVersionRecord): the kraft.version in force; 1 means the voter set is in the log."""

    kraft_version: int = 1


@dataclass(frozen=True)
class Voters:
    """Control record 6 (VotersRecord): the voter set from here on, as (node id, directory id, endpoints), each
    endpoint (listener, host, port). The quorum core reads it (raft/voters.py); the image keeps the last one
    only to put it into snapshots."""

    voter_set: tuple[tuple[int, str, tuple[tuple[str, str, int], ...]], ...] = ()


@dataclass(frozen=True)
class AclCreated:
    """One ACL (Kafka's AccessControlEntryRecord); enumerations are their wire codes (security/acl.py)."""

    id: str
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int


@dataclass(frozen=True)
class AclRemoved:
    id: str


@dataclass(frozen=True)
class ScramCredentialSet:
    """A user's SCRAM credential for one mechanism (Kafka's UserScramCredentialRecord): what the server
    needs to check a proof, never the password. Bytes are stored as base64 text."""

    name: str
    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass(frozen=True)
class ScramCredentialRemoved:
    name: str
    mechanism: str


@dataclass(frozen=True)
class ClientQuotaRecord:
    """One quota of a client quota entity set (``value``) or removed (Kafka's ClientQuotaRecord). The
    entity is its (type, name) pairs sorted by type, a name of ``None`` meaning that type's default."""

    entity: tuple[tuple[str, str | None], ...]
    key: str
    value: float = 0.0
    remove: bool = False


@dataclass(frozen=True)
class BootstrapApplied:
    """The records of the data directory's bootstrap file (``epochlog storage format``) were appended
    before this one: a later activation must not append them again."""

    records: int = 0


MetadataRecord = (
    BrokerRegistration
    | BrokerFenced
    | BrokerShuttingDown
    | Topic
    | TopicDeleted
    | PartitionChange
    | ProducerIds
    | ReplicasOffline
    | UncleanElection
    | LeaderChange
    | KRaftVersion
    | Voters
    | ConfigRecord
    | AclCreated
    | AclRemoved
    | ScramCredentialSet
    | ScramCredentialRemoved
    | BootstrapApplied
    | FeatureLevel
    | ClientQuotaRecord
)

KINDS: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        BrokerRegistration,
        BrokerFenced,
        BrokerShuttingDown,
        Topic,
        TopicDeleted,
        PartitionChange,
        ProducerIds,
        ReplicasOffline,
        UncleanElection,
        LeaderChange,
        KRaftVersion,
        Voters,
        ConfigRecord,
        AclCreated,
        AclRemoved,
        ScramCredentialSet,
        ScramCredentialRemoved,
        BootstrapApplied,
        FeatureLevel,
        ClientQuotaRecord,
    )
}
_TUPLES = {
    "isr", "replicas", "voters", "granting_voters", "adding_replicas", "removing_replicas", "elr", "last_known_elr"
}


_OMITTED_WHEN_EMPTY = {"adding_replicas", "removing_replicas", "listeners", "elr", "last_known_elr", "rack"}
_BYTES = {"salt", "stored_key", "server_key"}


class UnknownRecord(ValueError):
    pass


def to_json(record: MetadataRecord) -> tuple[str, dict[str, Any]]:
    data: dict[str, Any] = {}
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        if f.name in _OMITTED_WHEN_EMPTY and not value:
            continue  # no reassignment: stored as the records before reassignments were
        if isinstance(value, tuple):
            value = [list(v) if isinstance(v, tuple) else v for v in value]
        elif isinstance(value, dict):
            value = dict(value)
        elif isinstance(value, bytes):
            value = base64.b64encode(value).decode("ascii")
        data[f.name] = value
    return type(record).__name__, data


def from_json(kind: str, data: dict[str, Any]) -> MetadataRecord:
    cls = KINDS.get(kind)
    if cls is None:
        raise UnknownRecord(f"unknown metadata record kind {kind!r}")
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - names
    if unknown:
        raise UnknownRecord(f"{kind} record with unknown field(s) {sorted(unknown)}")
    args = dict(data)
    for name in _TUPLES & set(args):
        args[name] = tuple(args[name])
    if cls is BrokerRegistration:
        args["listeners"] = tuple((str(n), str(h), int(p)) for n, h, p in args.get("listeners", ()))
    if cls is ReplicasOffline:
        args["partitions"] = tuple((str(t), int(p)) for t, p in args.get("partitions", ()))
    if cls is Voters:
        args["voter_set"] = tuple(
            (int(n), str(d), tuple((str(li), str(h), int(p)) for li, h, p in eps)) for n, d, eps in args["voter_set"]
        )
    if cls is ClientQuotaRecord:
        args["entity"] = tuple((str(t), None if n is None else str(n)) for t, n in args.get("entity", ()))
        args["value"] = float(args.get("value", 0.0))
    if cls is Topic:
        args["configs"] = dict(args.get("configs", {}))
    for name in _BYTES & set(args):
        try:
            args[name] = base64.b64decode(str(args[name]), validate=True)
        except ValueError:
            raise UnknownRecord(f"{kind} record: {name} is not base64") from None
    try:
        record: MetadataRecord = cls(**args)
    except TypeError as e:
        raise UnknownRecord(f"{kind} record: {e}") from None
    return record
