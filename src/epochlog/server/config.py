"""Broker configuration: Kafka's property names in a server.properties file, overridable by flags."""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path

from epochlog.config_error import ConfigError
from epochlog.replication.read_replica import RACK_AWARE_SELECTOR, SELECTOR_NAMES
from epochlog.security.listeners import Listener, split_listeners

# group.consumer.assignors takes Kafka's assignor names or their class names.
_ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


def _assignors(raw: str) -> tuple[str, ...]:
    names = tuple(_ASSIGNOR_CLASSES.get(n.strip(), n.strip()) for n in raw.split(",") if n.strip())
    unknown = [n for n in names if n not in ("uniform", "range")]
    if unknown or not names:
        raise ConfigError(f"group.consumer.assignors={raw!r}: the assignors served are uniform and range")
    return names


def _int(props: dict[str, str], key: str, default: int, minimum: int | None = None) -> int:
    raw = props.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{key}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ConfigError(f"{key}={value} is below the minimum {minimum}")
    return value


def _bool(props: dict[str, str], key: str, default: bool) -> bool:
    raw = props.get(key)
    if raw is None or raw == "":
        return default
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    raise ConfigError(f"{key}={raw!r} is not true or false")


def authorizer_settings(props: dict[str, str]) -> tuple[str, list[str], bool]:
    """authorizer.class.name (Kafka's StandardAuthorizer, as written in server.properties, or unset),
    super.users and allow.everyone.if.no.acl.found: the same for a broker and a controller."""
    from epochlog.security.authorizer import AUTHORIZER_CLASS_NAMES

    name = props.get("authorizer.class.name", "").strip()
    if name and name not in AUTHORIZER_CLASS_NAMES:
        raise ConfigError(
            f"authorizer.class.name={name!r}: the authorizer is Kafka's StandardAuthorizer "
            "(org.apache.kafka.metadata.authorizer.StandardAuthorizer)"
        )
    supers = [u.strip() for u in props.get("super.users", "").split(";") if u.strip()]
    for user in supers:
        if ":" not in user:
            raise ConfigError(f"super.users: {user!r} is not a principal such as User:admin")
    return name, supers, _bool(props, "allow.everyone.if.no.acl.found", False)


def _replica_selector(props: dict[str, str]) -> str:
    name = props.get("replica.selector.class", "").strip()
    if name and name not in SELECTOR_NAMES:
        raise ConfigError(
            f"replica.selector.class={name!r}: the replica selector is Kafka's {RACK_AWARE_SELECTOR} (or unset: "
            "consumers read from leaders only)"
        )
    return name


def parse_listener(value: str, key: str = "listeners") -> tuple[str, int]:
    """'PLAINTEXT://127.0.0.1:9092' or 'host:port' -> (host, port) of the first listener, whatever its
    name (the listener's security protocol is epochlog.security.listeners' business)."""
    listeners = split_listeners(value, key)
    if not listeners:
        raise ConfigError(f"{key}={value!r} has no port")
    _name, host, port = listeners[0]
    return host, port


SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass
class BrokerConfig:
    node_id: int = 1
    broker_rack: str | None = None  # broker.rack: placement spreads replicas over racks; KIP-392 reads nearby
    # replica.selector.class (KIP-392): unset, consumers read from leaders only (Kafka's default).
    replica_selector_class: str = ""
    host: str = "127.0.0.1"
    port: int = 9092
    advertised_host: str = "127.0.0.1"
    advertised_port: int = 9092
    log_dir: Path = Path("epochlog-data")
    # log.dirs: every data directory; log_dir is the first (where the metadata log lives, as Kafka's
    # metadata.log.dir defaults to the first of log.dirs).
    log_dirs: list[Path] = field(default_factory=list)
    cluster_id: str = ""
    num_partitions: int = 1
    default_replication_factor: int = 1
    min_insync_replicas: int = 1
    auto_create_topics_enable: bool = True
    delete_topic_enable: bool = True
    socket_request_max_bytes: int = 104_857_600
    message_max_bytes: int = 1_048_588
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_commit_timeout_ms: int = 5_000
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_consumer_max_size: int = 2**31 - 1
    group_consumer_assignors: tuple[str, ...] = ("uniform", "range")
    offsets_retention_minutes: int = 10080
    log_retention_check_interval_ms: int = 300_000
    transactional_id_expiration_ms: int = 604_800_000
    # The transaction coordinator (Kafka's names and defaults).
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_min_isr: int = 2
    transaction_state_log_segment_bytes: int = 104_857_600
    transaction_max_timeout_ms: int = 900_000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3_600_000
    transaction_partition_verification_enable: bool = True
    producer_id_expiration_ms: int = 86_400_000
    metrics_port: int = 0
    # cluster mode (a broker that follows a separate controller)
    controller_address: tuple[str, int] = ("", 0)
    # Every controller it may reach: (node id, host, port); id -1 for a bootstrap server of unknown id.
    controllers: list[tuple[int, str, int]] = field(default_factory=list)
    replica_lag_time_max_ms: int = 30_000
    replica_fetch_max_bytes: int = 1_048_576
    fetch_max_bytes: int = 57_671_680
    # epochlog.fetch.sendfile.enable: a consumer's records go from the segment file to a plaintext socket
    # with os.sendfile (server/sendfile_writer.py); off, they are read into memory and written as before.
    fetch_sendfile_enable: bool = True
    # KIP-227: the incremental fetch sessions this broker keeps (Kafka's default, 1000).
    max_incremental_fetch_session_cache_slots: int = 1000
    max_connections: int = 2**31 - 1
    max_connections_per_ip: int = 2**31 - 1
    max_connections_per_ip_overrides: dict[str, int] = field(default_factory=dict)
    queued_max_request_bytes: int = -1
    connections_max_idle_ms: int = 600_000
    replica_fetch_response_max_bytes: int = 10_485_760
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_backoff_ms: int = 1000
    broker_heartbeat_interval_ms: int = 2000
    # The controller's session, which the broker's lease on its leaderships must not outlast
    # (replication/lease.py); epochlog.broker.lease.enable=false turns the lease off (Kafka's behaviour).
    broker_session_timeout_ms: int = 9000
    broker_lease_enable: bool = True
    controlled_shutdown_enable: bool = True
    controlled_shutdown_timeout_ms: int = 5000
    request_timeout_ms: int = 30_000
    log_dir_failure_timeout_ms: int = 30_000
    replication_truncation_mode: str = "leader-epoch"
    trace_enable: bool = False  # epochlog.trace.enable: state transitions to trace-broker.jsonl (server/tracing.py)
    trace_dir: str = ""  # epochlog.trace.dir: where the trace goes (default: the first log directory)
    # Authorization (Kafka's names): authorizer.class.name turns it on.
    authorizer_class_name: str = ""
    super_users: list[str] = field(default_factory=list)
    allow_everyone_if_no_acl_found: bool = False
    # Listeners (Kafka's names). host/port and advertised_host/advertised_port above are the inter-broker
    # listener's, for code that knows one address.
    listeners: list[Listener] = field(default_factory=lambda: [Listener("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT")])
    advertised_listeners: list[Listener] = field(
        default_factory=lambda: [Listener("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT")]
    )
    inter_broker_listener_name: str = "PLAINTEXT"
    controller_listener_names: list[str] = field(default_factory=list)
    # sasl.mechanism.inter.broker.protocol: set when the inter-broker listener is SASL.
    sasl_mechanism_inter_broker_protocol: str = ""
    # One server context per TLS listener, built while parsing so that a bad keystore stops start-up.
    ssl_server_contexts: dict[str, ssl.SSLContext] = field(default_factory=dict, repr=False, compare=False)
    raw: dict[str, str] = field(default_factory=dict)

    def all_log_dirs(self) -> list[Path]:
        return self.log_dirs or [self.log_dir]

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> BrokerConfig:
        c = cls(raw=dict(props))
        c.node_id = _int(props, "node.id", _int(props, "broker.id", 1), minimum=0)
        c._parse_listeners(props)
        c.broker_rack = props.get("broker.rack", "").strip() or None
        c.replica_selector_class = _replica_selector(props)
        dirs = props.get("log.dirs") or props.get("log.dir")
        if dirs:
            paths = [Path(d.strip()) for d in dirs.split(",") if d.strip()]
            if not paths:
                raise ConfigError(f"log.dirs={dirs!r} names no directory")
            if len({p.resolve() for p in paths}) != len(paths):
                raise ConfigError(f"log.dirs={dirs!r} names a directory twice")
            c.log_dir = paths[0]
            c.log_dirs = paths
        c.cluster_id = props.get("cluster.id", "")
        c.num_partitions = _int(props, "num.partitions", 1, minimum=1)
        c.default_replication_factor = _int(props, "default.replication.factor", 1, minimum=1)
        c.min_insync_replicas = _int(props, "min.insync.replicas", 1, minimum=1)
        c.auto_create_topics_enable = _bool(props, "auto.create.topics.enable", True)
        c.delete_topic_enable = _bool(props, "delete.topic.enable", True)
        c.socket_request_max_bytes = _int(props, "socket.request.max.bytes", 104_857_600, minimum=1024)
        c.message_max_bytes = _int(props, "message.max.bytes", 1_048_588, minimum=0)
        c.offsets_topic_num_partitions = _int(props, "offsets.topic.num.partitions", 50, minimum=1)
        c.offsets_topic_replication_factor = _int(props, "offsets.topic.replication.factor", 3, minimum=1)
        c.offsets_commit_timeout_ms = _int(props, "offsets.commit.timeout.ms", 5_000, minimum=1)
        c.group_initial_rebalance_delay_ms = _int(props, "group.initial.rebalance.delay.ms", 3000, minimum=0)
        c.group_min_session_timeout_ms = _int(props, "group.min.session.timeout.ms", 6000, minimum=0)
        c.group_max_session_timeout_ms = _int(props, "group.max.session.timeout.ms", 1_800_000, minimum=0)
        c.group_consumer_session_timeout_ms = _int(props, "group.consumer.session.timeout.ms", 45_000, minimum=1)
        c.group_consumer_heartbeat_interval_ms = _int(props, "group.consumer.heartbeat.interval.ms", 5_000, minimum=1)
        c.group_consumer_max_size = _int(props, "group.consumer.max.size", 2**31 - 1, minimum=1)
        c.group_consumer_assignors = _assignors(props.get("group.consumer.assignors", "uniform,range"))
        c.offsets_retention_minutes = _int(props, "offsets.retention.minutes", 10080, minimum=1)
        c.log_retention_check_interval_ms = _int(props, "log.retention.check.interval.ms", 300_000, minimum=1)
        c.producer_id_expiration_ms = _int(props, "producer.id.expiration.ms", 86_400_000, minimum=1)
        c.transactional_id_expiration_ms = _int(props, "transactional.id.expiration.ms", 604_800_000, minimum=1)
        c.transaction_state_log_num_partitions = _int(props, "transaction.state.log.num.partitions", 50, minimum=1)
        c.transaction_state_log_replication_factor = _int(
            props, "transaction.state.log.replication.factor", 3, minimum=1
        )
        c.transaction_state_log_min_isr = _int(props, "transaction.state.log.min.isr", 2, minimum=1)
        c.transaction_state_log_segment_bytes = _int(
            props, "transaction.state.log.segment.bytes", 104_857_600, minimum=1024
        )
        c.transaction_max_timeout_ms = _int(props, "transaction.max.timeout.ms", 900_000, minimum=1)
        c.transaction_abort_timed_out_transaction_cleanup_interval_ms = _int(
            props, "transaction.abort.timed.out.transaction.cleanup.interval.ms", 10_000, minimum=1
        )
        c.transaction_remove_expired_transaction_cleanup_interval_ms = _int(
            props, "transaction.remove.expired.transaction.cleanup.interval.ms", 3_600_000, minimum=1
        )
        c.transaction_partition_verification_enable = _bool(props, "transaction.partition.verification.enable", True)
        c.metrics_port = _int(props, "metrics.port", 0, minimum=0)
        bootstrap = props.get("controller.quorum.voters") or props.get("controller.quorum.bootstrap.servers")
        if bootstrap:
            for item in bootstrap.split(","):
                item = item.strip()
                if not item:
                    continue
                node = -1
                if "@" in item:  # controller.quorum.voters form: id@host:port
                    ident, item = item.split("@", 1)
                    if not ident.strip().isdigit():
                        raise ConfigError(f"controller.quorum.voters: {ident!r} is not a node id")
                    node = int(ident)
                host, port = parse_listener(item, "controller.quorum.voters")
                c.controllers.append((node, host, port))
            c.controller_address = c.controllers[0][1:]
        c.replica_lag_time_max_ms = _int(props, "replica.lag.time.max.ms", 30_000, minimum=1)
        c.replica_fetch_max_bytes = _int(props, "replica.fetch.max.bytes", 1_048_576, minimum=1)
        c.fetch_max_bytes = _int(props, "fetch.max.bytes", 57_671_680, minimum=1024)
        c.fetch_sendfile_enable = _bool(props, "epochlog.fetch.sendfile.enable", True)
        c.max_incremental_fetch_session_cache_slots = _int(
            props, "max.incremental.fetch.session.cache.slots", 1000, minimum=0
        )
        c.max_connections = _int(props, "max.connections", 2**31 - 1, minimum=0)
        c.max_connections_per_ip = _int(props, "max.connections.per.ip", 2**31 - 1, minimum=0)
        from epochlog.server.limits import parse_overrides

        try:
            c.max_connections_per_ip_overrides = parse_overrides(props.get("max.connections.per.ip.overrides", ""))
        except ValueError as e:
            raise ConfigError(str(e)) from None
        c.queued_max_request_bytes = _int(props, "queued.max.request.bytes", -1, minimum=-1)
        if c.queued_max_request_bytes == 0:
            raise ConfigError("queued.max.request.bytes=0: give -1 (no limit) or a positive byte count")
        c.connections_max_idle_ms = _int(props, "connections.max.idle.ms", 600_000, minimum=1)
        c.replica_fetch_response_max_bytes = _int(props, "replica.fetch.response.max.bytes", 10_485_760, minimum=1)
        c.replica_fetch_wait_max_ms = _int(props, "replica.fetch.wait.max.ms", 500, minimum=0)
        c.replica_fetch_backoff_ms = _int(props, "replica.fetch.backoff.ms", 1000, minimum=0)
        c.broker_heartbeat_interval_ms = _int(props, "broker.heartbeat.interval.ms", 2000, minimum=10)
        c.broker_session_timeout_ms = _int(props, "broker.session.timeout.ms", 9000, minimum=100)
        c.broker_lease_enable = _bool(props, "epochlog.broker.lease.enable", True)
        c.controlled_shutdown_enable = _bool(props, "controlled.shutdown.enable", True)
        c.controlled_shutdown_timeout_ms = _int(props, "epochlog.controlled.shutdown.timeout.ms", 5000, minimum=0)
        c.request_timeout_ms = _int(props, "request.timeout.ms", 30_000, minimum=1)
        c.log_dir_failure_timeout_ms = _int(props, "log.dir.failure.timeout.ms", 30_000, minimum=1)
        mode = props.get("replication.truncation.mode", "leader-epoch")
        if mode not in ("leader-epoch", "high-watermark"):
            raise ConfigError(f"replication.truncation.mode={mode!r} is not leader-epoch or high-watermark")
        c.replication_truncation_mode = mode
        c.trace_enable = _bool(props, "epochlog.trace.enable", False)
        c.trace_dir = props.get("epochlog.trace.dir", "").strip()
        c.authorizer_class_name, c.super_users, c.allow_everyone_if_no_acl_found = authorizer_settings(props)
        from epochlog.storage.cleaner.config import CleanerConfig
        from epochlog.storage.config import ConfigError as LogConfigError
        from epochlog.storage.config import LogConfig

        try:
            LogConfig.from_properties(c.log_properties())
            CleanerConfig.from_properties(c.raw)
        except LogConfigError as e:
            raise ConfigError(str(e)) from None
        return c

    def _parse_listeners(self, props: dict[str, str]) -> None:
        from epochlog.security.listeners import (
            advertised_listeners,
            controller_listener_names,
            inter_broker_listener,
            parse_listeners,
        )

        self.controller_listener_names = controller_listener_names(props)
        if props.get("listeners", "").strip():
            self.listeners = parse_listeners(props)
            if not self.listeners:
                raise ConfigError(f"listeners={props['listeners']!r} names no listener")
        else:
            self.listeners = [Listener("PLAINTEXT", self.host, self.port, "PLAINTEXT")]
        self.advertised_listeners = advertised_listeners(props, self.listeners)
        inter = inter_broker_listener(props, self.listeners)
        self.inter_broker_listener_name = inter.name
        self.host, self.port = inter.host, inter.port
        advertised = {lst.name: lst for lst in self.advertised_listeners}
        if inter.name not in advertised:
            raise ConfigError(
                f"the inter-broker listener {inter.name} must be in advertised.listeners "
                f"({props.get('advertised.listeners', '')!r}): other brokers reach this one through it"
            )
        self.advertised_host, self.advertised_port = advertised[inter.name].host, advertised[inter.name].port
        self._check_security(props, inter)

    def _check_security(self, props: dict[str, str], inter: Listener) -> None:
        from epochlog.security.listeners import listener_config
        from epochlog.security.tls import server_context

        rules = props.get("ssl.principal.mapping.rules", "").strip()
        if rules and rules != "DEFAULT":
            raise ConfigError(f"ssl.principal.mapping.rules={rules!r}: only DEFAULT is supported")
        for lst in self.listeners:
            if lst.name in self.controller_listener_names:
                continue
            if lst.tls:
                eff = listener_config(props, lst.name)
                if not (eff.get("ssl.keystore.location", "").strip() or eff.get("ssl.keystore.key", "").strip()):
                    raise ConfigError(
                        f"listener {lst.name} ({lst.protocol}) needs a keystore: set ssl.keystore.location "
                        f"(or listener.name.{lst.name.lower()}.ssl.keystore.location) to a PEM file"
                    )
                try:
                    self.ssl_server_contexts[lst.name] = server_context(eff)
                except ConfigError as e:
                    raise ConfigError(f"listener {lst.name}: {e}") from None
            if lst.sasl:
                self.sasl_mechanisms(lst.name)
        if inter.sasl:
            mechanism = props.get("sasl.mechanism.inter.broker.protocol", "").strip().upper()
            if not mechanism:
                raise ConfigError(
                    f"the inter-broker listener {inter.name} is {inter.protocol}: set "
                    "sasl.mechanism.inter.broker.protocol (Kafka's default GSSAPI is not supported) to "
                    f"one of {', '.join(SASL_MECHANISMS)}"
                )
            if mechanism not in self.sasl_mechanisms(inter.name):
                raise ConfigError(
                    f"sasl.mechanism.inter.broker.protocol={mechanism} is not enabled on listener {inter.name} "
                    "(sasl.enabled.mechanisms)"
                )
            self.sasl_mechanism_inter_broker_protocol = mechanism

    def broker_listeners(self) -> list[Listener]:
        """The listeners this broker binds, the inter-broker one first (it is ``host``/``port``); controller
        listeners are the controller's."""
        own = [lst for lst in self.listeners if lst.name not in self.controller_listener_names]
        return sorted(own, key=lambda lst: lst.name != self.inter_broker_listener_name)

    def registered_listeners(self) -> list[Listener]:
        """The advertised listeners, the inter-broker one first: its address is the one peers dial."""
        return sorted(self.advertised_listeners, key=lambda lst: lst.name != self.inter_broker_listener_name)

    def listener_props(self, listener_name: str) -> dict[str, str]:
        """The properties as one listener sees them (listener.name.<name>. overrides applied)."""
        from epochlog.security.listeners import listener_config

        return listener_config(self.raw, listener_name)

    def sasl_mechanisms(self, listener_name: str) -> list[str]:
        """sasl.enabled.mechanisms for one SASL listener, upper-cased; Kafka's default (GSSAPI) is unsupported,
        so an unset value is an error."""
        key = "sasl.enabled.mechanisms"
        raw = self.listener_props(listener_name).get(key, "")
        names = [m.strip().upper() for m in raw.split(",") if m.strip()]
        if not names:
            raise ConfigError(
                f"listener {listener_name} is SASL: set {key} (or listener.name.{listener_name.lower()}.{key}) "
                f"to some of {', '.join(SASL_MECHANISMS)}; GSSAPI, Kafka's default, is not supported"
            )
        for name in names:
            if name not in SASL_MECHANISMS:
                raise ConfigError(f"{key}: {name} is not supported; use {', '.join(SASL_MECHANISMS)}")
        return names

    def log_properties(self) -> dict[str, str]:
        """The log.* properties, handed to the storage layer's LogConfig."""
        keys = ("log.", "message.max.bytes", "message.timestamp.type")
        return {k: v for k, v in self.raw.items() if k.startswith(keys)}
