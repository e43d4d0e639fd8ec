"""The controller process: the I/O shell around controller/Controller and its metadata log.

Brokers register (BrokerRegistration), heartbeat (BrokerHeartbeat), ask for ISR changes
(AlterPartition) and follow the ordered metadata log by fetching ``__cluster_metadata-0``; admin
requests (CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders, AlterConfigs,
IncrementalAlterConfigs, AlterPartitionReassignments, ListPartitionReassignments) arrive forwarded by a broker.
Every decision is appended to the metadata log and fsynced before anyone is answered or told.

Beyond Kafka: when the connection a broker registered on closes (the process died, so the kernel
closed its socket) the broker is fenced at once instead of after broker.session.timeout.ms. A
paused or partitioned broker keeps its socket and is fenced by the session timeout as in Kafka.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from epochlog.controller.config_changes import ConfigChange, ConfigOp
from epochlog.controller.controller import Controller
from epochlog.controller.image import scram_credential_of
from epochlog.controller.quorum_controller import ACTIVATION_GRACE_MS, NotActive, QuorumController
from epochlog.controller.records import MetadataRecord, ScramCredentialSet
from epochlog.controller.scram import ScramDeletion, ScramUpsertion
from epochlog.protocol.api_versions import kio_range as supported_range_any
from epochlog.protocol.codec import RequestHeader, decode_body
from epochlog.protocol.errors import Err
from epochlog.raft.config import QuorumConfig
from epochlog.raft.messages import SnapshotId
from epochlog.raft.node import Role
from epochlog.replication.types import AlterIsr
from epochlog.security.listeners import Listener
from epochlog.security.scram_credentials import ScramCredential
from epochlog.server.cluster.bootstrap import read_bootstrap
from epochlog.server.cluster.controller_authz import ControllerAccess, controller_authorizer
from epochlog.server.cluster.not_controller import not_controller
from epochlog.server.cluster.quorum_describe import describe_cluster, describe_quorum
from epochlog.server.config import ConfigError, _bool, _int, parse_listener
from epochlog.server.dispatch import NO_RESPONSE
from epochlog.server.handlers.acls import binding_of, binding_row, filter_of
from epochlog.server.handlers.admin import creatable_topic
from epochlog.server.handlers.sasl import sasl_on_plain_listener
from epochlog.server.metrics import ControllerMetrics
from epochlog.server.quorum.driver import NotLeader, QuorumDriver
from epochlog.server.topic_configs import invalid_topic_configs
from epochlog.server.topics import validate_topic_name
from epochlog.server.tracing import node_tracer
from epochlog.trace.events import CONTROLLER as CONTROLLER_SRC

log = logging.getLogger("epochlog.controller")

STALE_BROKER_EPOCH = 77
PRODUCER_ID_BLOCK = 1000
# Kafka's controller refuses an operation that would write more records than this (QuorumController's
# MAX_RECORDS_PER_USER_OP); here it bounds the partitions one CreateTopics or CreatePartitions may add, so a
# request for 2^31 partitions is an error rather than a stalled controller and a metadata batch too large to write.
MAX_RECORDS_PER_USER_OP = 10_000
# APIs the controller serves, with the versions its peers (our brokers, admin forwarding) use.
CONTROLLER_APIS: dict[int, tuple[int, int]] = {
    1: (12, 12),  # Fetch of __cluster_metadata (voters and observers)
    52: (2, 2),  # Vote
    53: (1, 1),  # BeginQuorumEpoch
    54: (1, 1),  # EndQuorumEpoch
    59: (1, 1),  # FetchSnapshot
    18: (0, 3),  # ApiVersions
    56: (2, 3),  # AlterPartition
    62: (0, 4),  # BrokerRegistration
    63: (0, 1),  # BrokerHeartbeat
    67: (0, 0),  # AllocateProducerIds
    55: (0, 2),  # DescribeQuorum
    60: (1, 2),  # DescribeCluster (endpoint type 2: the controllers)
    73: (0, 0),  # AssignReplicasToDirs
    17: (0, 1),  # SaslHandshake (answered by the connection on a SASL listener)
    36: (0, 2),  # SaslAuthenticate
}
# Requests only the active controller may decide; a standby answers them NOT_CONTROLLER.
ACTIVE_ONLY = {62, 63, 56, 19, 20, 33, 37, 43, 44, 45, 46, 67, 73, 30, 31, 51}
QUORUM_APIS = {1, 52, 53, 54, 59}
COMMIT_TIMEOUT_S = 30.0
# A metadata record as stored is about this many bytes of JSON: what counts toward the snapshot interval.
RECORD_BYTES_ESTIMATE = 160
# Admin requests forwarded by brokers keep the client's version: accept all kio parses.
for _key in (19, 20, 33, 37, 43, 44, 45, 46, 30, 31, 51):
    CONTROLLER_APIS[_key] = supported_range_any(_key)


def _too_large(row: dict[str, Any]) -> dict[str, Any]:
    return {
        **row,
        "error_code": Err.POLICY_VIOLATION,
        "error_message": "Unable to perform excessively large batch operation.",
    }


async def _refuses(host: str, port: int, timeout_s: float = 0.5) -> bool:
    """True only if the host actively refused the connection; silence or success proves nothing."""
    try:
        _reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
    except ConnectionRefusedError:
        return True
    except (OSError, TimeoutError):
        return False
    writer.close()
    return False


def now_ms() -> int:
    return time.time_ns() // 1_000_000


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
    num_partitions: int = 1
    delete_topic_enable: bool = True
    metrics_port: int = 0
    socket_request_max_bytes: int = 104_857_600
    cluster_id: str = ""
    # controller.quorum.voters: id -> (host, port). Empty: a quorum of one, this controller alone.
    voters: dict[int, tuple[str, int]] = field(default_factory=dict)
    quorum: QuorumConfig = field(default_factory=QuorumConfig)
    snapshot_bytes: int = 20 * 1024 * 1024  # metadata.log.max.record.bytes.between.snapshots
    segment_bytes: int = 1024 * 1024 * 1024  # metadata.log.segment.bytes
    colocated_broker: bool = False  # combined mode: the broker with our node.id runs in this process
    trace_enable: bool = False  # epochlog.trace.enable: quorum transitions to trace-controller.jsonl
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
        c.num_partitions = _int(props, "num.partitions", 1, minimum=1)
        c.delete_topic_enable = _bool(props, "delete.topic.enable", True)
        c.metrics_port = _int(props, "metrics.port", 0, minimum=0)
        c.trace_enable = _bool(props, "epochlog.trace.enable", False)
        c.voters = parse_voters(props.get("controller.quorum.voters", ""))
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
    from epochlog.security.listeners import security_protocol_map
    from epochlog.server.config import split_listeners

    name, host, port = split_listeners(props["listeners"])[0]
    protocol = security_protocol_map(props)[0].get(name, "PLAINTEXT")
    return Listener(name, host, port, protocol)


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


def is_supported(api_key: int, version: int) -> bool:
    r = CONTROLLER_APIS.get(api_key)
    return r is not None and r[0] <= version <= r[1]


class ControllerServer:
    """One member of the controller quorum. The quorum's leader is the active controller: it decides,
    and answers once its records are committed. The others (standbys) replay the committed log so that
    any of them can take over where the last left off."""

    def __init__(self, config: ControllerConfig) -> None:
        self.config = config
        # What to apply, when to be active, what to propose: decided in controller/quorum_controller.py.
        self.qc = QuorumController(config.session_timeout_ms, ACTIVATION_GRACE_MS)
        self.quorum: QuorumDriver | None = None
        self.connections: set[Any] = set()
        self.session_of: dict[Any, int] = {}  # connection -> broker registered on it
        # KIP-858, per broker: its failed log directories (heartbeats) and which replicas each holds.
        self.offline_dirs: dict[int, set[uuid.UUID]] = {}
        self.dir_assignments: dict[int, dict[uuid.UUID, set[tuple[str, int]]]] = {}
        self.server: asyncio.AbstractServer | None = None
        self._tasks: list[asyncio.Task[None]] = []
        # KafkaConnection asks its owner which versions it serves; a plain function, not a method.
        self.is_supported = is_supported
        # The cluster id from the config, or (a combined node, formatted by its broker) the first broker's.
        self.cluster_id = config.cluster_id
        self.metrics = ControllerMetrics()
        self.serving = False  # the listener is up and the quorum member running
        self._epochs: dict[tuple[str, int], int] = {}  # leader epochs as last persisted, to count elections
        self._bytes_since_snapshot = 0
        self._bootstrap_cache: list[MetadataRecord] | None = None
        self.access = ControllerAccess(controller_authorizer(config.raw))

    async def start(self) -> None:
        self.config.log_dir.mkdir(parents=True, exist_ok=True)
        from epochlog.server.connection import KafkaConnection
        from epochlog.server.listener_security import listener_security
        from epochlog.server.peer_security import peer_security

        loop = asyncio.get_running_loop()
        listener = self.config.listener
        sec = listener_security(self.config.raw, listener)
        self.server = await loop.create_server(
            lambda: KafkaConnection(self, sec),  # type: ignore[arg-type]
            self.config.host,
            self.config.port,
            reuse_address=True,
            ssl=sec.ssl_context,
        )
        # The other voters listen on the same controller listener: dial them as it asks.
        raft_security = peer_security(
            self.config.raw, listener.name, listener.protocol, "sasl.mechanism.controller.protocol"
        )
        voters = self.config.voters or {self.config.node_id: (self.config.host, self.bound_port())}
        self.quorum = QuorumDriver(
            self.config.node_id,
            voters,
            self.config.log_dir,
            self.config.cluster_id,
            self.config.quorum,
            self._on_commit,
            self._on_role,
            self._on_snapshot,
            segment_bytes=self.config.segment_bytes,
            security=raft_security,
            tracer=node_tracer(self.config.trace_enable, self.config.log_dir, self.config.node_id, CONTROLLER_SRC),
        )
        self._rebuild()
        self.quorum.start()
        self._tasks.append(asyncio.create_task(self._ticker()))
        self.metrics.bind(self)
        if self.config.metrics_port:
            self.metrics.serve(self.config.host, self.config.metrics_port)
        self.serving = True
        log.info(
            "controller %d serving on %s:%d, metadata log %s, voters %s",
            self.config.node_id,
            self.config.host,
            self.bound_port(),
            self.config.log_dir,
            ",".join(f"{v}@{h}:{p}" for v, (h, p) in sorted(voters.items())),
        )

    def bound_port(self) -> int:
        """The port the listener got (the configured one, or the kernel's pick for port 0)."""
        assert self.server is not None and self.server.sockets
        return int(self.server.sockets[0].getsockname()[1])

    @property
    def core(self) -> Controller:
        return self.qc.core

    @property
    def active(self) -> bool:
        return self.qc.active

    @property
    def proposed_last(self) -> int:
        return self.qc.proposed_last

    async def stop(self) -> None:
        self.serving = False
        self.qc.active = False
        if self.quorum is not None:
            await self.quorum.stop()
        if self.server is not None:
            self.server.close()
        for conn in list(self.connections):
            conn.close()
        for t in self._tasks:
            t.cancel()
        log.info("controller %d stopped", self.config.node_id)

    # -- following the quorum ----------------------------------------------------------------------
    def _rebuild(self) -> None:
        """The controller state from the committed log alone: at start, and when leadership is lost with
        decisions that never committed (Kafka's controller reverts to its last committed state)."""
        assert self.quorum is not None
        qlog = self.quorum.log
        records: list[MetadataRecord] = []
        snap = qlog.latest_snapshot()
        start = qlog.log_start_offset
        if snap is not None:
            records += qlog.read_snapshot_records(snap)
            start = snap.end_offset
        hw = max(self.quorum.node.high_watermark, start)
        records += [r for _, r in qlog.read_records(start, hw)]
        self.qc.rebuild(records, hw, now_ms())
        self._epochs = {
            (t.name, p): st.leader_epoch for t in self.core.topics.values() for p, st in t.partitions.items()
        }

    def _on_commit(self, hw: int) -> None:
        assert self.quorum is not None
        qlog = self.quorum.log
        applied = self.qc.on_commit(hw, lambda start, end: (r for _, r in qlog.read_records(start, end)))
        self._bytes_since_snapshot += RECORD_BYTES_ESTIMATE * applied
        self._maybe_activate()
        self._maybe_snapshot()

    def _on_role(self) -> None:
        assert self.quorum is not None
        node = self.quorum.node
        if node.role is Role.LEADER and node.leader is not None:
            self.qc.became_leader(node.leader.epoch_start_offset)
            self._maybe_activate()
            return
        if self.qc.lost_leadership():
            log.warning("controller %d is no longer active; back to the committed state", self.config.node_id)
            self.session_of.clear()
            self._rebuild()

    def _on_snapshot(self, snap: SnapshotId) -> None:
        log.info("controller %d loads metadata snapshot %d-%d", self.config.node_id, snap.end_offset, snap.epoch)
        self._rebuild()

    def _maybe_activate(self) -> None:
        assert self.quorum is not None
        if not self.qc.maybe_activate(self.quorum.node.is_leader_ready(), now_ms()):
            return
        self._tasks = [t for t in self._tasks if not t.done()]
        self._tasks.append(asyncio.create_task(self._probe_unheard()))
        self.metrics.failovers_seen()
        # Proposed from the event loop's next turn, as every other decision is, not inside the quorum's callback.
        asyncio.get_running_loop().call_soon(self._maybe_bootstrap)
        log.info(
            "controller %d is active in epoch %d: %d brokers, %d topics",
            self.config.node_id,
            self.quorum.node.epoch,
            len(self.core.brokers),
            len(self.core.topics),
        )

    def _maybe_bootstrap(self) -> None:
        """The first active controller of a formatted data directory appends its bootstrap records (the
        credentials of `storage format --add-scram`) once; BootstrapApplied says so for every later one."""
        if not self.active:
            return
        try:
            records = read_bootstrap(self.config.log_dir)
        except ValueError as e:
            log.error("controller %d: %s; not applied", self.config.node_id, e)
            return
        if records is None or not self.core.bootstrap(records):
            return
        log.info("controller %d: appending %d bootstrap records", self.config.node_id, len(records))
        try:
            self.persist()
        except NotLeader:
            pass

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        """The stored credential a SASL/SCRAM exchange on the controller's listener checks against.

        Until the metadata log holds the bootstrap records, the formatted bootstrap file's credentials
        answer (KIP-900): controllers must authenticate to each other to elect the leader that appends them."""
        image = self.core.image
        if image.bootstrapped:
            return image.scram.get((user, mechanism))
        for r in self._bootstrap_records():
            if isinstance(r, ScramCredentialSet) and (r.name, r.mechanism) == (user, mechanism):
                return scram_credential_of(r)
        return None

    def _bootstrap_records(self) -> list[MetadataRecord]:
        if self._bootstrap_cache is None:
            try:
                self._bootstrap_cache = read_bootstrap(self.config.log_dir) or []
            except ValueError as e:
                log.error("controller %d: %s", self.config.node_id, e)
                self._bootstrap_cache = []
        return self._bootstrap_cache

    def _maybe_snapshot(self) -> None:
        """A snapshot of the committed state once enough records went by, so the log can be trimmed."""
        assert self.quorum is not None
        if self._bytes_since_snapshot < self.config.snapshot_bytes or not self.qc.all_committed():
            return
        qlog = self.quorum.log
        end = self.qc.applied
        if end <= qlog.log_start_offset:
            return
        epoch = qlog.log.epoch_cache.epoch_for_offset(end - 1)
        snap = SnapshotId(end, max(epoch, 0))
        qlog.write_snapshot(snap, self.core.snapshot_records())
        self._bytes_since_snapshot = 0
        self.quorum._carry_out(self.quorum.node.snapshot_taken(snap))
        log.info("controller %d wrote metadata snapshot at offset %d (epoch %d)", self.config.node_id, end, snap.epoch)

    # -- persistence and notification ----------------------------------------------------
    def persist(self) -> None:
        """Propose the new decisions to the quorum; a request is answered once they are committed."""
        try:
            new = self.qc.take_proposals()
        except NotActive as e:
            raise NotLeader(f"controller {self.config.node_id}: {e}") from e
        if not new:
            return
        assert self.quorum is not None
        self.qc.proposed(self.quorum.propose(new))
        self._bytes_since_snapshot += RECORD_BYTES_ESTIMATE * len(new)
        self.metrics.records_persisted(new, self._epochs)

    async def _ticker(self) -> None:
        last_balance = time.monotonic()
        while True:
            await asyncio.sleep(0.1)
            if not self.active:
                last_balance = time.monotonic()
                continue
            try:
                self.core.tick(now_ms())
                if (
                    self.config.auto_leader_rebalance_enable
                    and time.monotonic() - last_balance >= self.config.leader_imbalance_check_interval_s
                ):
                    last_balance = time.monotonic()
                    limit = self.config.leader_imbalance_per_broker_percentage / 100
                    if any(v > limit for v in self.core.imbalance().values()):
                        moved = self.core.elect_preferred()
                        if moved:
                            log.info("auto leader rebalance moved %d partitions", len(moved))
                self.persist()
            except NotLeader:
                pass
            except Exception:
                log.exception("controller tick failed")

    async def _probe_unheard(self) -> None:
        """Knock once on each broker the core cannot vouch for: a refused connection is a dead process,
        which the core then fences without waiting out the grace."""
        targets = [
            (b.broker_id, b.host, b.port)
            for b in self.core.unheard()
            # The broker in this very process is starting, not gone; it registers as soon as it can.
            if b.port > 0 and not (self.config.colocated_broker and b.broker_id == self.config.node_id)
        ]
        results = await asyncio.gather(*(_refuses(host, port) for _, host, port in targets))
        if not self.active:
            return
        for (broker, host, port), refused in zip(targets, results, strict=True):
            if refused and self.core.broker_unreachable(broker):
                log.info("broker %d refused a connection at %s:%d; fenced without waiting", broker, host, port)
        try:
            self.persist()
        except NotLeader:
            pass

    def on_connection_lost(self, conn: Any) -> None:
        broker = self.session_of.pop(conn, None)
        if not self.serving or not self.active:
            return  # stopping, or a standby: only the active controller fences
        if broker is not None and broker not in self.session_of.values():
            b = self.core.brokers.get(broker)
            if b is not None and not b.fenced:
                log.info("broker %d: its session connection closed; fencing it", broker)
                self.core.fence(broker)
                try:
                    self.persist()
                except NotLeader:
                    pass

    # -- handlers --------------------------------------------------------------------------
    def dispatch_from(self, conn: Any, header: RequestHeader, frame: memoryview) -> Any:
        return _dispatch(self, conn, header, frame)

    async def _answer_when_committed(self, key: int, version: int, req: Any, resp: dict[str, Any]) -> Any:
        assert self.quorum is not None
        try:
            await self.quorum.committed(self.proposed_last, COMMIT_TIMEOUT_S)
        except (NotLeader, TimeoutError):
            return not_controller(key, version, req)
        return resp

    def broker_registration(self, conn: Any, req: Any) -> dict[str, Any]:
        if self.config.cluster_id and req.cluster_id and req.cluster_id != self.config.cluster_id:
            log.warning(
                "refusing broker %d: it belongs to cluster %s, not %s",
                req.broker_id,
                req.cluster_id,
                self.config.cluster_id,
            )
            return {"throttle_time": 0, "error_code": Err.INCONSISTENT_CLUSTER_ID, "broker_epoch": -1}
        host, port = "127.0.0.1", 0
        if req.listeners:
            host, port = req.listeners[0].host, int(req.listeners[0].port)
        if not self.cluster_id and req.cluster_id:
            self.cluster_id = str(req.cluster_id)
        clean = int(getattr(req, "previous_broker_epoch", -1)) >= 0
        listeners = tuple((str(x.name), str(x.host), int(x.port)) for x in req.listeners or ())
        epoch = self.core.register_broker(
            int(req.broker_id), now_ms(), clean_shutdown=clean, host=host, port=port, listeners=listeners
        )
        self.session_of[conn] = int(req.broker_id)
        self.offline_dirs.pop(int(req.broker_id), None)  # a restarted broker's directories start online
        self.dir_assignments.pop(int(req.broker_id), None)
        self.persist()
        log.info(
            "broker %d registered at %s:%d with epoch %d (clean shutdown: %s)", req.broker_id, host, port, epoch, clean
        )
        return {"throttle_time": 0, "error_code": Err.NONE, "broker_epoch": epoch}

    def broker_heartbeat(self, conn: Any, req: Any) -> dict[str, Any]:
        bid = int(req.broker_id)
        b = self.core.brokers.get(bid)
        if b is None or int(req.broker_epoch) != b.epoch:
            return {"throttle_time": 0, "error_code": STALE_BROKER_EPOCH, "is_fenced": True, "should_shut_down": False}
        self.session_of[conn] = bid
        if req.want_shut_down:
            if not b.shutting_down:
                log.info("broker %d asked for controlled shutdown; moving its leaderships", bid)
                self.core.controlled_shutdown(bid)
                self.persist()
            return {"throttle_time": 0, "error_code": Err.NONE, "is_fenced": True, "should_shut_down": True}
        ok = self.core.heartbeat(bid, now_ms())
        offline = {d for d in getattr(req, "offline_log_dirs", ()) if d is not None}
        if offline != self.offline_dirs.get(bid, set()):
            self.offline_dirs[bid] = offline
            self._replicas_offline(bid)
        return {
            "throttle_time": 0,
            "error_code": Err.NONE,
            "is_caught_up": True,
            "is_fenced": not ok,
            "should_shut_down": False,
        }

    def assign_replicas_to_dirs(self, req: Any) -> dict[str, Any]:
        """Which directory holds each replica of the broker (KIP-858). Our brokers send it for the
        replicas of a directory that failed; with the heartbeat's offline_log_dirs it tells the core
        which replicas are offline."""
        bid = int(req.broker_id)
        b = self.core.brokers.get(bid)
        if b is None or int(req.broker_epoch) != b.epoch:
            return {"throttle_time": 0, "error_code": STALE_BROKER_EPOCH, "directories": []}
        dirs = self.dir_assignments.setdefault(bid, {})
        out = []
        for d in req.directories:
            placed = dirs.setdefault(d.id_, set()) if d.id_ is not None else set()
            topics = []
            for t in d.topics:
                name = self._topic_by_id(t.topic_id)
                rows = []
                for p in t.partitions:
                    if name is not None:
                        placed.add((name, int(p.partition_index)))
                    code = Err.NONE if name is not None else Err.UNKNOWN_TOPIC_ID
                    rows.append({"partition_index": p.partition_index, "error_code": code})
                topics.append({"topic_id": t.topic_id, "partitions": rows})
            out.append({"id_": d.id_, "topics": topics})
        self._replicas_offline(bid)
        return {"throttle_time": 0, "error_code": Err.NONE, "directories": out}

    def _replicas_offline(self, bid: int) -> None:
        dirs = self.dir_assignments.get(bid, {})
        hit = [tp for d in self.offline_dirs.get(bid, set()) for tp in sorted(dirs.get(d, ()))]
        if hit and self.core.replicas_offline(bid, hit):
            log.warning("broker %d: replicas on its failed log directory are offline: %s", bid, hit[:20])
            self.persist()

    def _topic_by_id(self, topic_id: uuid.UUID | None) -> str | None:
        for t in self.core.topics.values():
            if t.topic_id == str(topic_id):
                return t.name
        return None

    def alter_partition(self, req: Any, version: int) -> dict[str, Any]:
        topics = []
        for t in req.topics:
            name = self._topic_by_id(t.topic_id) if version >= 2 else getattr(t, "topic_name", None)
            parts = []
            for p in t.partitions:
                new_isr = frozenset(int(s.broker_id) for s in p.new_isr_with_epochs)
                if name is None:
                    parts.append(
                        {
                            "partition_index": p.partition_index,
                            "error_code": Err.UNKNOWN_TOPIC_ID,
                            "leader_id": -1,
                            "leader_epoch": -1,
                            "partition_epoch": -1,
                        }
                    )
                    continue
                code, st = self.core.alter_partition(
                    AlterIsr(
                        name,
                        int(p.partition_index),
                        int(req.broker_id),
                        int(p.leader_epoch),
                        new_isr,
                        int(p.partition_epoch),
                    )
                )
                row: dict[str, Any] = {"partition_index": p.partition_index, "error_code": code}
                if st is not None:
                    row.update(
                        leader_id=st.leader,
                        leader_epoch=st.leader_epoch,
                        isr=sorted(st.isr),
                        partition_epoch=st.partition_epoch,
                    )
                else:
                    row.update(leader_id=-1, leader_epoch=-1, partition_epoch=-1)
                parts.append(row)
            topics.append({"topic_id": t.topic_id, "partitions": parts})
        self.persist()
        return {"throttle_time": 0, "error_code": Err.NONE, "topics": topics}

    def create_topics(self, req: Any) -> dict[str, Any]:
        out = []
        validate_only = bool(getattr(req, "validate_only", False))
        default = self.config.num_partitions
        asked = sum(
            len(t.assignments) if t.assignments else default if t.num_partitions == -1 else max(0, t.num_partitions)
            for t in req.topics
        )
        if asked > MAX_RECORDS_PER_USER_OP:
            return {"throttle_time": 0, "topics": [_too_large(creatable_topic(t)[1]) for t in req.topics]}
        for t in req.topics:
            configs, row = creatable_topic(t)
            assignments: dict[int, list[int]] = {}
            parts = int(t.num_partitions)
            rf = int(t.replication_factor)
            reason = validate_topic_name(t.name)
            bad = invalid_topic_configs(configs)
            live = sum(1 for b in self.core.brokers if self.core.alive(b))
            if parts == -1:
                parts = self.config.num_partitions  # as KRaft: the controller's num.partitions
            if rf == -1:
                rf = min(3, live) if live else 1
            code, msg = Err.NONE, None
            if reason:
                code, msg = Err.INVALID_TOPIC_EXCEPTION, reason
            elif t.name in self.core.topics:
                code, msg = Err.TOPIC_ALREADY_EXISTS, f"topic {t.name!r} already exists"
            elif t.assignments and (int(t.num_partitions) != -1 or int(t.replication_factor) != -1):
                which = "numPartitions" if int(t.num_partitions) != -1 else "replicationFactor"
                code, msg = (
                    Err.INVALID_REQUEST,
                    f"A manual partition assignment was specified, but {which} was not set to -1.",
                )
            elif t.assignments:
                assignments = {int(a.partition_index): [int(b) for b in a.broker_ids] for a in t.assignments}
                problem = self.core.assignment_problem(assignments)
                if bad:
                    code, msg = Err.INVALID_CONFIG, bad
                elif problem:
                    code, msg = Err(problem[0]), problem[1]
                else:
                    parts, rf = len(assignments), len(assignments[0])
            elif bad:
                code, msg = Err.INVALID_CONFIG, bad
            elif parts < 1:
                code, msg = Err.INVALID_PARTITIONS, f"number of partitions must be at least 1, got {parts}"
            elif rf < 1 or rf > live:
                code, msg = (
                    Err.INVALID_REPLICATION_FACTOR,
                    (
                        f"replication factor {rf} is larger than the {live} available brokers"
                        if rf > live
                        else f"replication factor must be at least 1, got {rf}"
                    ),
                )
            if code:
                row.update(error_code=code, error_message=msg)
                out.append(row)
                continue
            topic_id = uuid.uuid4()
            if not validate_only:
                unclean = configs.get("unclean.leader.election.enable", str(self.config.unclean_leader_election_enable))
                allow = unclean.lower() == "true"
                if t.assignments:
                    self.core.create_topic_assigned(t.name, dict(assignments), allow, str(topic_id), configs)
                else:
                    self.core.create_topic(t.name, parts, rf, allow, str(topic_id), configs)
                log.info("created topic %s (%s): %d partitions, replication factor %d", t.name, topic_id, parts, rf)
            row.update(error_code=Err.NONE, topic_id=topic_id, num_partitions=parts, replication_factor=rf)
            out.append(row)
        self.persist()
        return {"throttle_time": 0, "topics": out}

    def delete_topics(self, req: Any, version: int) -> dict[str, Any]:
        out = []
        items = (
            [(t.name or self._topic_by_id(t.topic_id), t.topic_id) for t in req.topics]
            if version >= 6
            else [(n, None) for n in req.topic_names]
        )
        for name, topic_id in items:
            row: dict[str, Any] = {"name": name, "topic_id": topic_id, "error_message": None}
            t = self.core.topics.get(name) if name else None
            if not self.config.delete_topic_enable:
                # As Kafka's controller: TOPIC_DELETION_DISABLED from v3, INVALID_REQUEST before.
                code = Err.TOPIC_DELETION_DISABLED if version >= 3 else Err.INVALID_REQUEST
                row.update(error_code=code, error_message="topic deletion is disabled (delete.topic.enable=false)")
            elif t is None:
                row["error_code"] = Err.UNKNOWN_TOPIC_OR_PARTITION if topic_id is None else Err.UNKNOWN_TOPIC_ID
            else:
                row.update(error_code=Err.NONE, topic_id=uuid.UUID(t.topic_id) if t.topic_id else None)
                self.core.delete_topic(name)
                log.info("deleted topic %s", name)
            out.append(row)
        self.persist()
        return {"throttle_time": 0, "responses": out}

    def create_partitions(self, req: Any) -> dict[str, Any]:
        out = []
        existing = {t.name: len(self.core.topics[t.name].partitions) for t in req.topics if t.name in self.core.topics}
        if sum(max(0, t.count - existing.get(t.name, t.count)) for t in req.topics) > MAX_RECORDS_PER_USER_OP:
            rows = [_too_large({"name": t.name}) for t in req.topics]
            return {"throttle_time": 0, "results": rows}
        for t in req.topics:
            row: dict[str, Any] = {"name": t.name, "error_message": None, "error_code": Err.NONE}
            info = self.core.topics.get(t.name)
            if info is None:
                row.update(error_code=Err.UNKNOWN_TOPIC_OR_PARTITION, error_message=f"topic {t.name!r} does not exist")
            elif t.count <= len(info.partitions):
                row.update(
                    error_code=Err.INVALID_PARTITIONS,
                    error_message=f"topic {t.name!r} has {len(info.partitions)} partitions; "
                    f"the new count must be larger, got {t.count}",
                )
            elif not req.validate_only:
                try:
                    self.core.add_partitions(t.name, int(t.count))
                except ValueError as e:
                    row.update(error_code=Err.INVALID_REPLICATION_FACTOR, error_message=str(e))
            out.append(row)
        self.persist()
        return {"throttle_time": 0, "results": out}

    def alter_configs(self, req: Any, incremental: bool) -> dict[str, Any]:
        """AlterConfigs (replace a resource's dynamic set) and IncrementalAlterConfigs (KIP-339)."""
        changes = [
            ConfigChange(
                int(r.resource_type),
                r.resource_name,
                tuple(
                    ConfigOp(c.name, c.value, int(c.config_operation) if incremental else 0) for c in r.configs
                ),
            )
            for r in req.resources
        ]
        validate_only = bool(req.validate_only)
        outcomes = self.core.alter_configs(changes, incremental, validate_only)
        rows = []
        for change, outcome in zip(changes, outcomes, strict=True):
            rows.append(
                {
                    "error_code": outcome.error_code,
                    "error_message": outcome.message,
                    "resource_type": change.resource_type,
                    "resource_name": change.resource_name,
                }
            )
            if outcome.records and not validate_only:
                log.info(
                    "configs of %s %r: %s",
                    "topic" if change.resource_type == 2 else "broker",
                    change.resource_name,
                    ", ".join(f"{r.name}={'(deleted)' if r.value is None else r.value}" for r in outcome.records),
                )
        self.persist()
        return {"throttle_time": 0, "responses": rows}

    def elect_leaders(self, req: Any, version: int) -> dict[str, Any]:
        election_type = int(getattr(req, "election_type", 0))
        wanted: list[tuple[str, list[int]]] = []
        if req.topic_partitions is None:
            wanted = [(t.name, sorted(t.partitions)) for t in self.core.topics.values()]
        else:
            wanted = [(tp.topic, [int(p) for p in tp.partitions]) for tp in req.topic_partitions]
        results = []
        for name, parts in wanted:
            rows = []
            t = self.core.topics.get(name)
            for p in parts:
                code, msg = Err.NONE, None
                if t is None or p not in t.partitions:
                    code, msg = Err.UNKNOWN_TOPIC_OR_PARTITION, "no such partition"
                else:
                    st = t.partitions[p]
                    if election_type == 0:
                        pref = st.replicas[0]
                        if st.leader == pref:
                            code, msg = Err.ELECTION_NOT_NEEDED, "the preferred replica already leads"
                        elif not self.core.elect_leader(name, p, pref):
                            code, msg = (
                                Err.PREFERRED_LEADER_NOT_AVAILABLE,
                                f"replica {pref} is not in the ISR or not live",
                            )
                    else:
                        if st.leader >= 0 and self.core.alive(st.leader):
                            code, msg = Err.ELECTION_NOT_NEEDED, "the partition has a live leader"
                        elif not self.core.elect_leader(name, p, unclean=True):
                            code, msg = Err.ELIGIBLE_LEADERS_NOT_AVAILABLE, "no live replica"
                rows.append({"partition_id": p, "error_code": code, "error_message": msg})
            results.append({"topic": name, "partition_result": rows})
        self.persist()
        return {"throttle_time": 0, "error_code": Err.NONE, "replica_election_results": results}


    def alter_reassignments(self, req: Any) -> dict[str, Any]:
        """AlterPartitionReassignments (KIP-455): each partition is started, redirected or cancelled on
        its own; the core decides and records, and completes each once its target replicas are in sync."""
        allow_rf = bool(getattr(req, "allow_replication_factor_change", True))
        responses: list[dict[str, Any]] = []

        def answer() -> dict[str, Any]:
            return {
                "throttle_time": 0,
                "allow_replication_factor_change": allow_rf,
                "error_code": Err.NONE,
                "error_message": None,
                "responses": responses,
            }

        if sum(len(t.partitions) for t in req.topics) > MAX_RECORDS_PER_USER_OP:
            # One record per partition at least: bounded like CreateTopics and CreatePartitions.
            for t in req.topics:
                rows = [_too_large({"partition_index": p.partition_index}) for p in t.partitions]
                responses.append({"name": t.name, "partitions": rows})
            return answer()
        for t in req.topics:
            rows = []
            for p in t.partitions:
                target = None if p.replicas is None else [int(b) for b in p.replicas]
                code, msg = self.core.alter_reassignment(t.name, int(p.partition_index), target, allow_rf)
                if not code:
                    log.info(
                        "%s-%d: %s",
                        t.name,
                        p.partition_index,
                        "reassignment cancelled" if target is None else f"reassigning to {target}",
                    )
                rows.append({"partition_index": p.partition_index, "error_code": code, "error_message": msg})
            responses.append({"name": t.name, "partitions": rows})
        self.persist()
        return answer()

    def create_acls(self, req: Any) -> dict[str, Any]:
        outcomes = self.core.create_acls([binding_of(c) for c in req.creations], MAX_RECORDS_PER_USER_OP)
        self.persist()
        rows = [{"error_code": o.error_code, "error_message": o.message} for o in outcomes]
        return {"throttle_time": 0, "results": rows}

    def delete_acls(self, req: Any) -> dict[str, Any]:
        outcomes = self.core.delete_acls([filter_of(f) for f in req.filters], MAX_RECORDS_PER_USER_OP)
        self.persist()
        rows = [
            {
                "error_code": o.error_code,
                "error_message": o.message,
                "matching_acls": [binding_row(b) for b in o.matched],
            }
            for o in outcomes
        ]
        return {"throttle_time": 0, "filter_results": rows}

    def alter_scram(self, req: Any) -> dict[str, Any]:
        outcomes = self.core.alter_scram(
            [ScramDeletion(d.name, int(d.mechanism)) for d in req.deletions],
            [
                ScramUpsertion(u.name, int(u.mechanism), int(u.iterations), bytes(u.salt), bytes(u.salted_password))
                for u in req.upsertions
            ],
        )
        self.persist()
        rows = [{"user": o.user, "error_code": o.error_code, "error_message": o.message} for o in outcomes]
        return {"throttle_time": 0, "results": rows}

    def list_reassignments(self, req: Any) -> dict[str, Any]:
        wanted = None if req.topics is None else [(t.name, [int(p) for p in t.partition_indexes]) for t in req.topics]
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for name, p, st in self.core.reassigning(wanted):
            by_topic.setdefault(name, []).append(
                {
                    "partition_index": p,
                    "replicas": list(st.replicas),
                    "adding_replicas": list(st.adding),
                    "removing_replicas": list(st.removing),
                }
            )
        topics = [{"name": n, "partitions": rows} for n, rows in by_topic.items()]
        return {"throttle_time": 0, "error_code": Err.NONE, "error_message": None, "topics": topics}


def _api_versions() -> dict[str, Any]:
    return {
        "error_code": Err.NONE,
        "api_keys": [
            {"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in sorted(CONTROLLER_APIS.items())
        ],
        "throttle_time": 0,
    }


def _dispatch(server: ControllerServer, conn: Any, header: RequestHeader, frame: memoryview) -> Any:
    key, version = header.api_key, header.api_version
    if not server.access.allows(server.core.image, header):
        log.warning(
            "closing %s: %s may not send api %d to the controller (brokers and controllers need CLUSTER_ACTION on "
            "the cluster: name their principal in super.users, or secure the controller listener with SASL)",
            getattr(conn, "peer", "?"),
            getattr(header.session, "principal", "?"),
            key,
        )
        conn.close()
        return NO_RESPONSE
    if key == 18:
        return _api_versions()
    if key in (17, 36):
        return sasl_on_plain_listener(header)
    req = decode_body(frame, header)
    if key in QUORUM_APIS:
        assert server.quorum is not None
        # Controllers dial each other as "controller-<id>-raft"; everyone else follows the log as an observer.
        observer = not (header.client_id or "").startswith("controller-")
        return server.quorum.handle(key, req, observer)
    if key == 55:
        return describe_quorum(server, req, version)
    if key == 60:
        return describe_cluster(server, version)
    if key in ACTIVE_ONLY and not server.active:
        return not_controller(key, version, req)
    before = server.proposed_last
    try:
        resp = _decide(server, conn, key, version, req)
    except NotLeader:
        return not_controller(key, version, req)
    if server.proposed_last != before:
        return server._answer_when_committed(key, version, req, resp)
    return resp


def _decide(server: ControllerServer, conn: Any, key: int, version: int, req: Any) -> dict[str, Any]:
    if key == 62:
        return server.broker_registration(conn, req)
    if key == 63:
        return server.broker_heartbeat(conn, req)
    if key == 56:
        return server.alter_partition(req, version)
    if key == 19:
        return server.create_topics(req)
    if key == 20:
        return server.delete_topics(req, version)
    if key == 37:
        return server.create_partitions(req)
    if key == 43:
        return server.elect_leaders(req, version)
    if key in (33, 44):
        return server.alter_configs(req, key == 44)
    if key == 45:
        return server.alter_reassignments(req)
    if key == 46:
        return server.list_reassignments(req)
    if key == 73:
        return server.assign_replicas_to_dirs(req)
    if key == 30:
        return server.create_acls(req)
    if key == 31:
        return server.delete_acls(req)
    if key == 51:
        return server.alter_scram(req)
    if key == 67:
        start = server.core.allocate_producer_ids(int(req.broker_id), PRODUCER_ID_BLOCK)
        server.persist()
        return {
            "throttle_time": 0,
            "error_code": Err.NONE,
            "producer_id_start": start,
            "producer_id_len": PRODUCER_ID_BLOCK,
        }
    raise ValueError(f"api {key} is not served by the controller")


def run_controller(config: ControllerConfig) -> None:
    from epochlog.server.lifecycle import run_until_signal

    run_until_signal(lambda: ControllerServer(config))
