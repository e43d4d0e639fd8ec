"""The replicas this broker runs: it carries out the partition transitions ``partition_transitions``
(replication/transitions.py) decides from each metadata change, over the real logs, and keeps the group
and transaction coordinators on the internal topics' partitions it leads."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from epochlog.clock import now_ms
from epochlog.controller.image import TopicInfo
from epochlog.replication.partition import PartitionReplica
from epochlog.replication.transitions import Kind, Transition, partition_transitions
from epochlog.replication.types import PartitionState, Role, TruncationMode
from epochlog.server import tracing
from epochlog.server.internal_topics import OFFSETS_TOPIC, TXN_TOPIC
from epochlog.server.partition import Partition
from epochlog.storage.errors import KafkaStorageError
from epochlog.storage.replica_log import PartitionReplicaLog

if TYPE_CHECKING:
    from epochlog.server.cluster.broker import ClusterBroker

APPLY_YIELD_EVERY = 64  # partitions whose new state is applied between two turns of the event loop

log = logging.getLogger("epochlog.broker")


class ReplicaManager:
    def __init__(self, broker: ClusterBroker) -> None:
        self.broker = broker
        self.mode = TruncationMode(broker.config.replication_truncation_mode)
        # The partition states last carried out here: what the next metadata change is compared with.
        self._published: dict[tuple[str, int], PartitionState] = {}

    def transitions(self, changed: list[tuple[str, int]], deleted: list[TopicInfo]) -> list[Transition]:
        """What to do with the replicas here now that these partitions changed and these topics went."""
        b = self.broker
        keys = [(info.name, p) for info in deleted for p in sorted(info.partitions)] + changed
        gone = {info.name for info in deleted}
        states = b.image.states
        out = partition_transitions(b.config.node_id, self._published, states, keys, b.partitions.keys(), gone)
        for key in keys:
            st = states.get(key)
            if st is None:
                self._published.pop(key, None)
            else:
                self._published[key] = st
        return out

    async def carry_out_all(self, transitions: Iterable[Transition]) -> None:
        """Carry out every transition, giving the event loop a turn every APPLY_YIELD_EVERY of them.

        A partition taking leadership opens its log and writes its leader-epoch checkpoint (fsyncs); a
        broker starting with thousands of partitions would otherwise hold the loop for longer than
        ``broker.session.timeout.ms``: its heartbeats would not go out, the controller would fence it, and
        every partition it leads would go leaderless until it registered again (the 12-22 s before the first
        acknowledged produce of a 10,000-partition restart). One failed partition does not stop the rest."""
        for i, t in enumerate(transitions):
            try:
                self.carry_out(t)
            except Exception:
                log.exception("applying the state of %s-%d failed", *t.key)
            if i % APPLY_YIELD_EVERY == APPLY_YIELD_EVERY - 1:
                await asyncio.sleep(0)

    def carry_out(self, t: Transition) -> None:
        if t.kind is Kind.DELETE:
            self._drop(t.topic, t.partition)
        elif t.kind is Kind.REMOVE:
            assert t.state is not None
            self._remove(t.topic, t.partition, t.state)
        else:
            self._take_state(t)

    def topics_deleted(self, deleted: list[TopicInfo]) -> None:
        for info in deleted:
            if info.name not in self.broker.image.topics:
                self.broker.log_manager.delete_topic(info.name)  # logs of it no replica here ran
            log.info("deleted topic %s (%s)", info.name, info.topic_id)

    def _take_state(self, t: Transition) -> None:
        b = self.broker
        topic, p, st = t.topic, t.partition, t.state
        info = b.image.topics.get(topic)
        if st is None or info is None:
            return
        part = b.partitions.get((topic, p))
        if part is not None and part.offline:
            return  # its log directory failed: nothing is applied to it until the broker restarts
        if part is None:
            part = self._open(topic, p, info)
            if part is None:
                return
        self.apply_state(part, st)
        if t.kind is not Kind.UPDATE:
            log.info(
                "%s-%d: %s at epoch %d (leader %d, isr %s), log end %d, hw %d",
                topic,
                p,
                part.replica.role.value,
                part.replica.leader_epoch,
                st.leader,
                sorted(st.isr),
                part.log.log_end_offset,
                part.replica.high_watermark,
            )
        part.sync()
        part.notify()
        if topic in (OFFSETS_TOPIC, TXN_TOPIC):
            self.follow_coordination(topic, p)

    def _open(self, topic: str, p: int, info: TopicInfo) -> Partition | None:
        """A replica of this partition starts running here: over its log on disk, or a new one."""
        b = self.broker
        cfg = b.topic_log_config(info)
        plog = b.log_manager.get(topic, p)
        if plog is not None and plog.topic_id not in (None, info.uuid):
            log.warning("%s-%d on disk belongs to an older topic of that name; removing it", topic, p)
            b.log_manager.delete_partition(topic, p)
            plog = None
        if plog is None:
            try:
                plog = b.log_manager.create(topic, p, info.uuid, cfg)
            except KafkaStorageError as e:
                log.error("%s-%d: cannot create its log: %s", topic, p, e)
                return None
        else:
            plog.config = cfg
        replica = PartitionReplica(
            b.config.node_id,
            topic,
            p,
            PartitionReplicaLog(plog),
            min_insync_replicas=b.publisher.min_isr(info),
            replica_lag_time_max_ms=b.config.replica_lag_time_max_ms,
            truncation_mode=self.mode,
            high_watermark=plog.high_watermark,  # the checkpoint's; the core owns it from here
            tracer=tracing.partition_tracer(b.tracer, info.uuid),
            hw_needs_min_isr=b.image.cluster.elr_enabled,
            follower_silence_ms=2 * b.config.replica_fetch_wait_max_ms + 500,
        )
        replica.lease = b.lease
        part = Partition(topic, p, info.uuid, plog, replica, b.group_commit)
        b.partitions[(topic, p)] = part
        return part

    def _remove(self, topic: str, p: int, st: PartitionState) -> None:
        """The metadata moved this partition off this broker (a reassignment completed or was cancelled):
        stop serving and fetching it, answer whoever waits on it (acks=all produces get
        NOT_LEADER_OR_FOLLOWER and retry at the new leader), and delete the replica's log, as Kafka's
        StopReplica with delete does. Only ever after the record saying so, so no data is dropped early."""
        b = self.broker
        part = b.partitions.pop((topic, p), None)
        if part is None:
            if b.log_manager.get(topic, p) is not None:
                b.log_manager.delete_partition(topic, p)
            return
        self.apply_state(part, st)  # not a replica: the core drops its role
        part.sync()
        part.notify()
        if topic in (OFFSETS_TOPIC, TXN_TOPIC):
            self.follow_coordination(topic, p)
        if not part.offline:
            b.log_manager.delete_partition(topic, p)
        log.info("%s-%d: no longer a replica here (replicas %s); its log is deleted", topic, p, list(st.replicas))

    def _drop(self, topic: str, p: int) -> None:
        """Its topic was deleted: stop serving it, answer whoever waits on it, and delete its log."""
        b = self.broker
        part = b.partitions.pop((topic, p), None)
        if topic in (OFFSETS_TOPIC, TXN_TOPIC):
            self.follow_coordination(topic, p)
        if part is not None:
            part.sync()
            part.notify()
        if part is None or not part.offline:
            b.log_manager.delete_partition(topic, p)

    def apply_state(self, part: Partition, st: PartitionState) -> None:
        """Hand the core a partition state, counting ISR changes of a partition led before and after."""
        r = part.replica
        was_leading, isr = r.role is Role.LEADER, r.isr
        epoch = r.leader_epoch
        r.apply_state(st, now_ms())
        leading = was_leading and r.role is Role.LEADER and r.leader_epoch == epoch
        self.broker.metrics.isr_changed(isr, r.isr, leading)

    def follow_coordination(self, topic: str, p: int) -> None:
        """Coordinate the groups of __consumer_offsets-p (the transactional ids of __transaction_state-p)
        exactly while leading it."""
        b = self.broker
        if topic == TXN_TOPIC:
            b.txn.follow(p, b.partitions.get((topic, p)))
            return
        if not b.groups.loaded:
            return  # start() loads them once the coordinator runs
        part = b.partitions.get((OFFSETS_TOPIC, p))
        if part is not None and part.replica.role is Role.LEADER:
            b.groups.load_partition(p)
        else:
            b.groups.unload_partition(p)

    def update_ineligible(self) -> None:
        b = self.broker
        fenced = frozenset(x.broker_id for x in b.image.brokers.values() if x.fenced)
        for part in b.partitions.values():
            if part.replica.ineligible != fenced:
                part.replica.ineligible = fenced
                if part.delete_waiters:
                    part.sync()  # a DeleteRecords no longer waits for a replica on a fenced broker

    def remove_leftover_logs(self) -> None:
        """Logs of topics the metadata no longer has (deleted while this broker was down) go, and so do
        logs of partitions the metadata no longer assigns here (moved away by a reassignment that
        completed while this broker was down; the metadata is caught up before this runs)."""
        b = self.broker
        lm = b.log_manager
        for topic in sorted({t for t, _p in lm.logs}):
            if topic not in b.image.topics:
                log.warning("removing the logs of %s: the topic is not in the cluster metadata", topic)
                lm.delete_topic(topic)
                continue
            for t, p in [k for k in lm.logs if k[0] == topic]:
                st = b.image.states.get((t, p))
                if st is not None and b.config.node_id not in st.replicas:
                    log.warning("removing log %s-%d: the metadata assigns it to brokers %s", t, p, list(st.replicas))
                    lm.delete_partition(t, p)
                elif st is None:
                    log.warning("keeping log %s-%d although the metadata does not know that partition", t, p)
