"""The controller's configuration: its listener, metadata log and quorum settings from server.properties."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from epochlog.config_error import ConfigError
from epochlog.raft.config import QuorumConfig
from epochlog.security.listeners import Listener, security_protocol_map, split_listeners
from epochlog.server.config import _bool, _int, parse_listener


@dataclass
class ControllerConfig:
    node_id: int = 0
    host: str = "127.0.0.1"
    port: int = 9093
    log_dir: Path = Path("epochlog-controller")
    session_timeout_ms: int = 9000
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_s: int = 300
    leader_imbalance_per_broker_percentage: int = 10
    unclean_leader_election_enable: bool = False
    min_insync_replicas: int = 1  # the topics' default, for the controller's ELR rule (KIP-966)
    # Kafka's feature eligible.leader.replicas.version: the level a new cluster finalizes (1 on, 0 off).
    eligible_leader_replicas_version: int = 1
    num_partitions: int = 1
    delete_topic_enable: bool = True
    metrics_port: int = 0
    socket_request_max_bytes: int = 104_857_600
    cluster_id: str = ""
    # controller.quorum.voters: id -> (host, port). Empty: a quorum of one, this controller alone.
    voters: dict[int, tuple[str, int]] = field(default_factory=dict)
    # controller.quorum.bootstrap.servers: where a dynamic quorum's controller looks for the leader (KIP-853).
    bootstrap_servers: tuple[tuple[str, int], ...] = ()
    quorum: QuorumConfig = field(default_factory=QuorumConfig)
    snapshot_bytes: int = 20 * 1024 * 1024  # metadata.log.max.record.bytes.between.snapshots
    segment_bytes: int = 1024 * 1024 * 1024  # metadata.log.segment.bytes
    colocated_broker: bool = False  # combined mode: the broker with our node.id runs in this process
    trace_enable: bool = False  # epochlog.trace.enable: quorum transitions to trace-controller.jsonl
    trace_dir: str = ""  # epochlog.trace.dir (default: the metadata log directory)
    listener: Listener = field(default_factory=lambda: Listener("PLAINTEXT", "127.0.0.1", 9093, "PLAINTEXT"))
    raw: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> ControllerConfig:
        c = cls()
        c.node_id = _int(props, "node.id", 0, minimum=0)
        c.cluster_id = props.get("cluster.id", "")
        c.raw = dict(props)
        if "listeners" in props:
            c.host, c.port = parse_listener(props["listeners"])
            c.listener = _controller_listener(props)
        dirs = props.get("metadata.log.dir") or props.get("log.dirs") or props.get("log.dir")
        if dirs:
            # Kafka's metadata.log.dir defaults to the first of log.dirs.
            c.log_dir = Path(dirs.split(",")[0].strip())
        c.session_timeout_ms = _int(props, "broker.session.timeout.ms", 9000, minimum=100)
        c.auto_leader_rebalance_enable = _bool(props, "auto.leader.rebalance.enable", True)
        c.leader_imbalance_check_interval_s = _int(props, "leader.imbalance.check.interval.seconds", 300, minimum=1)
        c.leader_imbalance_per_broker_percentage = _int(props, "leader.imbalance.per.broker.percentage", 10, minimum=0)
        c.unclean_leader_election_enable = _bool(props, "unclean.leader.election.enable", False)
        c.min_insync_replicas = _int(props, "min.insync.replicas", 1, minimum=1)
        c.eligible_leader_replicas_version = _int(props, "eligible.leader.replicas.version", 1, minimum=0)
        if c.eligible_leader_replicas_version > 1:
            raise ConfigError("eligible.leader.replicas.version must be 0 (off) or 1 (on)")
        c.num_partitions = _int(props, "num.partitions", 1, minimum=1)
        c.delete_topic_enable = _bool(props, "delete.topic.enable", True)
        c.metrics_port = _int(props, "metrics.port", 0, minimum=0)
        c.trace_enable = _bool(props, "epochlog.trace.enable", False)
        c.trace_dir = props.get("epochlog.trace.dir", "").strip()
        c.voters = parse_voters(props.get("controller.quorum.voters", ""))
        c.bootstrap_servers = parse_bootstrap_servers(props.get("controller.quorum.bootstrap.servers", ""))
        if c.voters and c.node_id not in c.voters:
            raise ConfigError(f"node.id={c.node_id} is not among controller.quorum.voters")
        c.quorum = QuorumConfig(
            election_timeout_ms=_int(props, "controller.quorum.election.timeout.ms", 1000, minimum=10),
            fetch_timeout_ms=_int(props, "controller.quorum.fetch.timeout.ms", 2000, minimum=10),
            election_backoff_max_ms=_int(props, "controller.quorum.election.backoff.max.ms", 1000, minimum=1),
            request_timeout_ms=_int(props, "controller.quorum.request.timeout.ms", 2000, minimum=10),
            retry_backoff_ms=_int(props, "controller.quorum.retry.backoff.ms", 20, minimum=0),
        )
        c.snapshot_bytes = _int(props, "metadata.log.max.record.bytes.between.snapshots", 20 * 1024 * 1024, minimum=1)
        # Snapshots free whole segments only, so the log is bounded by about one segment plus a snapshot.
        # Kafka floors the segment size at the internal metadata.log.segment.min.bytes (8 MiB).
        floor = _int(props, "metadata.log.segment.min.bytes", 8 * 1024 * 1024, minimum=1024)
        c.segment_bytes = _int(props, "metadata.log.segment.bytes", 1024 * 1024 * 1024, minimum=floor)
        return c


def _controller_listener(props: dict[str, str]) -> Listener:
    """The controller's listener with its security protocol (listener.security.protocol.map; a name the
    map does not give is PLAINTEXT, as KRaft treats controller listeners while no map is set)."""
    name, host, port = split_listeners(props["listeners"])[0]
    protocol = security_protocol_map(props)[0].get(name, "PLAINTEXT")
    return Listener(name, host, port, protocol)


def parse_bootstrap_servers(value: str) -> tuple[tuple[str, int], ...]:
    """controller.quorum.bootstrap.servers: 'host:9093,host:9094' -> (('host', 9093), ('host', 9094))."""
    out = []
    for item in (i.strip() for i in value.split(",")):
        if not item:
            continue
        host, colon, port = item.rpartition(":")
        if not (colon and port.isdigit()):
            raise ConfigError(f"controller.quorum.bootstrap.servers: {item!r} is not host:port")
        out.append((host.strip("[]") or "127.0.0.1", int(port)))
    return tuple(out)


def parse_voters(value: str) -> dict[int, tuple[str, int]]:
    """controller.quorum.voters: '1@host:9093,2@host:9094' -> {1: ('host', 9093), 2: ('host', 9094)}."""
    out: dict[int, tuple[str, int]] = {}
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        node, at, address = item.partition("@")
        host, colon, port = address.rpartition(":")
        if not (at and colon and node.strip().isdigit() and port.isdigit()):
            raise ConfigError(f"controller.quorum.voters: {item!r} is not id@host:port")
        out[int(node)] = (host.strip("[]") or "127.0.0.1", int(port))
    return out
