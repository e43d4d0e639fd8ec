"""The broker's session with the active controller: registration, heartbeats, controlled shutdown and the
report of a failed log directory (KIP-858)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from typing import TYPE_CHECKING

from kio.schema.assign_replicas_to_dirs.v0.request import (
    AssignReplicasToDirsRequest,
    DirectoryData,
    PartitionData,
    TopicData,
)
from kio.schema.broker_heartbeat.v1.request import BrokerHeartbeatRequest
from kio.schema.broker_registration.v4.request import BrokerRegistrationRequest, Listener
from kio.schema.types import BrokerId
from kio.static.primitive import i16, i32, i64, u16

from epochlog.clock import now_ms
from epochlog.protocol.errors import Err
from epochlog.server.cluster.backoff import ExponentialBackoff
from epochlog.server.cluster.peer import PeerError
from epochlog.server.listener_security import PROTOCOL_CODES

if TYPE_CHECKING:
    from epochlog.server.cluster.broker import ClusterBroker

log = logging.getLogger("epochlog.broker")


class BrokerSession:
    def __init__(self, broker: ClusterBroker) -> None:
        self.broker = broker
        self.epoch = -1  # the broker epoch the controller gave at the last registration
        self.leaving = False  # a controlled shutdown has begun: heartbeats say so, and never re-register
        self._expiry: asyncio.TimerHandle | None = None  # fires when the lease ends unless renewed first
        self._lapse_told = False  # the lease's lapse was logged

    async def register(self, previous_epoch: int) -> None:
        """``previous_epoch``: the epoch this broker's last clean shutdown recorded (-1 after a crash or a
        power loss); the controller compares it with the epoch it has on record (KIP-966)."""
        b = self.broker
        c = b.config
        req = BrokerRegistrationRequest(
            broker_id=BrokerId(c.node_id),
            cluster_id=b.cluster_id,
            incarnation_id=uuid.uuid4(),
            # Every advertised listener, the inter-broker one first: its address is the one peers dial.
            listeners=tuple(
                Listener(name=a.name, host=a.host, port=u16(a.port), security_protocol=i16(PROTOCOL_CODES[a.protocol]))
                for a in c.registered_listeners()
            ),
            features=(),
            rack=c.broker_rack,
            # KIP-966's signal: a broker that did not shut down cleanly may have lost unflushed records.
            previous_broker_epoch=i64(previous_epoch),
        )
        # One backoff for the whole registration, shared with the channel's own retries: a controller
        # that refuses this broker (its authorizer closes the connection) was asked every 50 ms.
        backoff = ExponentialBackoff()
        while True:
            try:
                resp = await b.controller.request("session", req, timeout=5, backoff=backoff)
                if resp.error_code == 0:
                    self.epoch = int(resp.broker_epoch)
                    log.info("broker %d registered with epoch %d", c.node_id, self.epoch)
                    return
                log.warning("registration refused: error %d", resp.error_code)
            except PeerError as e:
                log.info("waiting for the controller at %s:%d: %s", *b.controller.address, e)
            await asyncio.sleep(backoff.next())

    def heartbeat(self, want_shut_down: bool) -> BrokerHeartbeatRequest:
        b = self.broker
        return BrokerHeartbeatRequest(
            broker_id=BrokerId(b.config.node_id),
            broker_epoch=i64(self.epoch),
            current_metadata_offset=i64(b.image.offset),
            want_fence=False,
            want_shut_down=want_shut_down,
            offline_log_dirs=self._offline_dir_ids(),
        )

    def _offline_dir_ids(self) -> tuple[uuid.UUID, ...]:
        lm = self.broker.log_manager
        ids = (lm.directory_id_of(d) for d in lm.failures.offline_dirs)
        return tuple(sorted(i for i in ids if i is not None))

    async def controlled_shutdown(self) -> None:
        """Ask the controller to move our leaderships away and wait until the metadata says so."""
        b = self.broker
        self.leaving = True
        t0 = time.monotonic()
        deadline = t0 + b.config.controlled_shutdown_timeout_ms / 1000
        asked = False
        while time.monotonic() < deadline and not asked:
            try:
                resp = await b.controller.request("session", self.heartbeat(want_shut_down=True), timeout=2)
                asked = bool(resp.should_shut_down)
            except PeerError:
                await asyncio.sleep(0.1)
        # A partition on a failed log directory is not waited for: it applies no new state.
        while time.monotonic() < deadline and any(p.is_leader and not p.offline for p in b.partitions.values()):
            await asyncio.sleep(0.01)
        log.info("broker %d: controlled shutdown took %.0f ms", b.config.node_id, (time.monotonic() - t0) * 1000)

    async def report_offline_dir(self, failed: str) -> None:
        """KIP-858: tell the controller which directory failed (heartbeat offline_log_dirs) and which
        replicas it held (AssignReplicasToDirs), so it moves their leadership and ISR membership to
        other brokers. Not told within log.dir.failure.timeout.ms, the broker shuts down, as Kafka's."""
        b = self.broker
        dir_id = b.log_manager.directory_id_of(failed)
        by_topic: dict[uuid.UUID, list[int]] = {}
        for _t, p, topic_id in b.offline_by_dir.get(failed, []):
            by_topic.setdefault(topic_id, []).append(p)
        assign = AssignReplicasToDirsRequest(
            broker_id=BrokerId(b.config.node_id),
            broker_epoch=i64(self.epoch),
            directories=(
                DirectoryData(
                    id_=dir_id,
                    topics=tuple(
                        TopicData(
                            topic_id=tid, partitions=tuple(PartitionData(partition_index=i32(p)) for p in sorted(ps))
                        )
                        for tid, ps in by_topic.items()
                    ),
                ),
            ),
        )
        deadline = time.monotonic() + b.config.log_dir_failure_timeout_ms / 1000
        while not b.shutting_down:
            try:
                hb = await b.controller.request("session", self.heartbeat(want_shut_down=self.leaving), timeout=5)
                resp = await b.controller.request(
                    "rpc", dataclasses.replace(assign, broker_epoch=i64(self.epoch)), timeout=5
                )
                if not hb.error_code and not resp.error_code:
                    log.info("broker %d: told the controller that log directory %s failed", b.config.node_id, failed)
                    return
            except PeerError as e:
                log.info("reporting the failed log directory %s: %s", failed, e)
            if time.monotonic() >= deadline:
                log.critical(
                    "broker %d: could not tell the controller within log.dir.failure.timeout.ms that %s failed; "
                    "shutting down",
                    b.config.node_id,
                    failed,
                )
                b.exit_code = 1
                b.must_stop.set()
                return
            await asyncio.sleep(0.5)

    def _answered(self, sent: int, fenced: bool) -> None:
        """The active controller answered the heartbeat sent at ``sent``: the lease moves (the core decides
        how), and its end is watched so the leaderships' waiting writes are answered the moment it comes."""
        b = self.broker
        lease = b.lease
        held = lease.holds(now_ms())
        lease.answered(sent, fenced)
        if lease.holds(now_ms()) and not held:
            log.info("broker %d: the active controller vouches for it; serving its leaderships", b.config.node_id)
            self._lapse_told = False
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        if lease.enabled:
            delay = lease.remaining_ms(now_ms()) / 1000
            self._expiry = asyncio.get_running_loop().call_later(delay, self._lease_ended)

    def _lease_ended(self) -> None:
        """The lease ran out: leaders that no longer serve answer their waiting writes now. One whose ISR
        followers still fetch keeps serving; it is looked at again until they stop or the lease is back."""
        b = self.broker
        self._expiry = None
        now = now_ms()
        if b.lease.holds(now):
            return
        led = [p for p in b.partitions.values() if p.is_leader]
        stopped = [p for p in led if not p.replica.serves_as_leader(now)]
        if stopped and not self._lapse_told:
            self._lapse_told = True
            log.warning(
                "broker %d: no heartbeat answered by the active controller within broker.session.timeout.ms; "
                "answering clients of %d of its %d leaderships NOT_LEADER_OR_FOLLOWER until one is",
                b.config.node_id,
                len(stopped),
                len(led),
            )
        for part in stopped:
            part.sync()  # the core answers the waiting acks=all writes now
            part.notify()
        if len(stopped) < len(led):
            self._expiry = asyncio.get_running_loop().call_later(0.25, self._lease_ended)

    async def heartbeats(self) -> None:
        b = self.broker
        interval = b.config.broker_heartbeat_interval_ms / 1000
        while not b.shutting_down:
            try:
                # As Kafka's brokers do, heartbeats keep asking to shut down once that has begun: the
                # controller fences a broker that asks, and a plain heartbeat answered "fenced" would
                # register it again, bringing back leaderships the shutdown just moved away.
                sent = now_ms()
                # A third of the session: a heartbeat lost to a cut-off controller is sent again (to the new
                # one, once elected) while the lease from the last answered one still holds.
                timeout = min(5.0, b.config.broker_session_timeout_ms / 3000)
                req = self.heartbeat(want_shut_down=self.leaving)
                resp = await b.controller.request("session", req, timeout=timeout)
                if b.shutting_down:
                    return
                if resp.error_code == Err.NOT_CONTROLLER:
                    await asyncio.sleep(0.1)  # a failover is under way: the next heartbeat finds the new one
                    continue
                self._answered(sent, bool(resp.error_code or resp.is_fenced))
                if (resp.error_code or resp.is_fenced) and not self.leaving:
                    log.warning("broker %d is fenced by the controller; registering again", b.config.node_id)
                    await self.register(self.epoch)  # the same process: nothing was lost
                    # A registration starts with every directory online at the controller: say again
                    # which ones failed, or their replicas could be elected here.
                    for failed in b.log_manager.failures.offline_dirs:
                        b.spawn(self.report_offline_dir(failed))
                # A new active controller expects us at once (it fences brokers that stay silent).
                changed = b.controller.changed
                try:
                    await asyncio.wait_for(changed.wait(), interval)
                except TimeoutError:
                    pass
            except PeerError:
                await asyncio.sleep(0.2)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("heartbeat failed")
                await asyncio.sleep(interval)
