"""The controller process: the I/O shell around controller/Controller and its metadata log.

Brokers register (BrokerRegistration), heartbeat (BrokerHeartbeat), ask for ISR changes
(AlterPartition) and follow the ordered metadata log by fetching ``__cluster_metadata-0``; admin
requests (CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders, AlterConfigs,
IncrementalAlterConfigs, AlterPartitionReassignments, ListPartitionReassignments) arrive forwarded by a broker.
Every decision is appended to the metadata log and fsynced before anyone is answered or told.

Here: the server's lifecycle, its connections and how it follows the quorum; the requests are handled in
controller_apis and controller_admin, the configuration is controller_config's. What to do on its timer, on
a closed connection, after knocking on brokers and when to snapshot is decided in controller/ (see
quorum_controller.py); this module carries it out.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path
from typing import Any

from epochlog.clock import now_ms
from epochlog.controller.controller import Controller
from epochlog.controller.image import scram_credential_of
from epochlog.controller.leader_balance import BalancePolicy
from epochlog.controller.quorum_controller import ACTIVATION_GRACE_MS, NotActive, QuorumController
from epochlog.controller.records import MetadataRecord, ScramCredentialSet
from epochlog.protocol.codec import RequestHeader
from epochlog.raft.messages import SnapshotId
from epochlog.raft.roles import Role
from epochlog.security.scram_credentials import ScramCredential
from epochlog.server.cluster.bootstrap import read_bootstrap
from epochlog.server.cluster.controller_apis import dispatch, is_supported
from epochlog.server.cluster.controller_authz import ControllerAccess, controller_authorizer
from epochlog.server.cluster.controller_config import ControllerConfig
from epochlog.server.limits import ConnectionLimits
from epochlog.server.metrics import ControllerMetrics
from epochlog.server.quorum.driver import NotLeader, QuorumDriver
from epochlog.server.tracing import node_tracer
from epochlog.storage import bootstrap_voters
from epochlog.trace.events import CONTROLLER as CONTROLLER_SRC

log = logging.getLogger("epochlog.controller")


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


class ControllerServer:
    """One member of the controller quorum. The quorum's leader is the active controller: it decides,
    and answers once its records are committed. The others (standbys) replay the committed log so that
    any of them can take over where the last left off."""

    def __init__(self, config: ControllerConfig) -> None:
        self.config = config
        # What to apply, when to be active, what to propose: decided in controller/quorum_controller.py.
        balance = BalancePolicy(
            config.auto_leader_rebalance_enable,
            config.leader_imbalance_check_interval_s * 1000,
            config.leader_imbalance_per_broker_percentage,
        )
        self.qc = QuorumController(
            config.session_timeout_ms,
            ACTIVATION_GRACE_MS,
            balance,
            config.snapshot_bytes,
            config.min_insync_replicas,
            config.eligible_leader_replicas_version,
        )
        self.quorum: QuorumDriver | None = None
        self.connections: set[Any] = set()
        # KIP-858, per broker: its failed log directories (heartbeats) and which replicas each holds.
        self.offline_dirs: dict[int, set[uuid.UUID]] = {}
        self.dir_assignments: dict[int, dict[uuid.UUID, set[tuple[str, int]]]] = {}
        self.server: asyncio.Server | None = None
        self._tasks: list[asyncio.Task[None]] = []
        # KafkaConnection asks its owner which versions it serves; a plain function, not a method.
        self.is_supported = is_supported
        # The cluster id from the config, or (a combined node, formatted by its broker) the first broker's.
        self.cluster_id = config.cluster_id
        self.metrics = ControllerMetrics()
        self.serving = False  # the listener is up and the quorum member running
        self._epochs: dict[tuple[str, int], int] = {}  # leader epochs as last persisted, to count elections
        self._bootstrap_cache: list[MetadataRecord] | None = None
        self.access = ControllerAccess(controller_authorizer(config.raw))
        self.limits: ConnectionLimits | None = None  # its listener serves the quorum and the brokers only
        # Set when the controller must stop by itself (its metadata log directory failed); exit_code says why.
        self.must_stop = asyncio.Event()
        self.exit_code = 0

    async def start(self) -> None:
        self.config.log_dir.mkdir(parents=True, exist_ok=True)
        from epochlog.server.connection import KafkaConnection
        from epochlog.server.listener_security import listener_security
        from epochlog.server.peer_security import peer_security

        loop = asyncio.get_running_loop()
        listener = self.config.listener
        sec = listener_security(self.config.raw, listener)
        self.server = await loop.create_server(
            lambda: KafkaConnection(self, sec),
            self.config.host,
            self.config.port,
            reuse_address=True,
            ssl=sec.ssl_context,
        )
        # The other voters listen on the same controller listener: dial them as it asks.
        raft_security = peer_security(
            self.config.raw, listener.name, listener.protocol, "sasl.mechanism.controller.protocol"
        )
        # A directory formatted for a dynamic quorum (KIP-853) starts from its formatted voters; else the static ones.
        formatted = bootstrap_voters.read(self.config.log_dir)
        if formatted is not None:
            voters = dict(self.config.voters)
        else:
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
            tracer=node_tracer(
                self.config.trace_enable,
                Path(self.config.trace_dir or self.config.log_dir),
                self.config.node_id,
                CONTROLLER_SRC,
            ),
            on_disk_failure=self._on_disk_failure,
            formatted_voters=None if formatted is None else formatted[1],
            bootstrap_servers=self.config.bootstrap_servers,
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

    def _on_disk_failure(self, reason: str) -> None:
        self.qc.active = False
        self.exit_code = 1
        self.must_stop.set()

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
        self.qc.on_commit(hw, lambda start, end: (r for _, r in qlog.read_records(start, end)))
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
        """A snapshot of the committed state when the core says one is due, so the log can be trimmed."""
        assert self.quorum is not None
        qlog = self.quorum.log
        end = self.qc.snapshot_due(qlog.log_start_offset)
        if end is None:
            return
        epoch = qlog.log.epoch_cache.epoch_for_offset(end - 1)
        snap = SnapshotId(end, max(epoch, 0))
        qlog.write_snapshot(snap, self.core.snapshot_records())
        self.qc.snapshot_taken()
        quorum = self.quorum
        quorum._step(lambda: quorum.node.snapshot_taken(snap))
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
        self.metrics.records_persisted(new, self._epochs)

    async def _ticker(self) -> None:
        while True:
            await asyncio.sleep(0.1)
            if not self.active:
                continue
            try:
                moved = self.qc.tick(now_ms())
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
        targets = self.qc.probe_targets(self.config.node_id if self.config.colocated_broker else None)
        results = await asyncio.gather(*(_refuses(t.host, t.port) for t in targets))
        if not self.active:
            return
        for t, refused in zip(targets, results, strict=True):
            if refused and self.qc.probe_refused(t.broker):
                log.info("broker %d refused a connection at %s:%d; fenced without waiting", t.broker, t.host, t.port)
        try:
            self.persist()
        except NotLeader:
            pass

    def on_connection_lost(self, conn: Any) -> None:
        # Stopping (stop() deactivates first) or a standby: the core fences nothing.
        broker = self.qc.connection_lost(conn)
        if broker is None:
            return
        log.info("broker %d: its session connection closed; fencing it", broker)
        try:
            self.persist()
        except NotLeader:
            pass

    def observe_request(self, request: str, started: float) -> None:
        pass  # the controller's requests are not timed

    # -- handlers --------------------------------------------------------------------------
    def dispatch_from(self, conn: Any, header: RequestHeader, frame: memoryview) -> Any:
        return dispatch(self, conn, header, frame)


def run_controller(config: ControllerConfig) -> None:
    from epochlog.server.lifecycle import run_until_signal

    run_until_signal(lambda: ControllerServer(config))
