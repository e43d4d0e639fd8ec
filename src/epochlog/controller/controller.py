"""The controller's decisions over the cluster metadata image, free of I/O.

Every change is an ordered metadata record (kept in ``self.records``) applied to the image;
the caller persists the records and tells brokers about partition changes. Rules:
- leader election picks a live, unfenced ISR member and bumps the leader epoch;
- a returning leader that re-registers gets a new epoch (KIP-101, "Returning Leaders");
- the ISR never gains fenced or offline brokers (KIP-320); a fenced broker leaves every ISR;
- unclean election only when the topic allows it;
- KIP-966 (when the metadata log finalized eligible.leader.replicas.version): replicas leaving an ISR
  below min.insync.replicas become eligible leader replicas, the ISR may empty, and a broker back from an
  unclean shutdown leaves every ISR and ELR (the rules in elr.py);
- AlterPartition is guarded by the leader epoch and the partition epoch;
- preferred-leader election moves leadership back to the first replica.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

from epochlog.codes import Err
from epochlog.config_defs import GROUP_BOUNDS, RESOURCE_TOPIC
from epochlog.controller import acls, client_quotas, partition_growth, reassignment, scram
from epochlog.controller import records as rec
from epochlog.controller.config_changes import ConfigChange, ConfigOutcome, duplicates, plan
from epochlog.controller.image import ELR_FEATURE, BrokerInfo, TopicInfo
from epochlog.controller.partition_changes import (
    NO_LEADER,
    UNSAFE_KEEP_UNCLEAN_IN_ELR,
    PartitionChanges,
)
from epochlog.controller.records import MetadataRecord
from epochlog.replication.types import AlterIsr, PartitionState
from epochlog.security.acl import AclBinding
from epochlog.security.acl_filters import AclFilter

__all__ = [
    "NO_LEADER",
    "UNSAFE_KEEP_UNCLEAN_IN_ELR",
    "BrokerInfo",
    "Controller",
    "TopicInfo",
]


class Controller(PartitionChanges):
    def init_features(self) -> bool:
        """A new cluster (nothing registered, no topic, no feature yet) finalizes KIP-966 at the level this
        controller is configured with, as Kafka 4.1 formats new clusters with eligible.leader.replicas.version=1.
        An existing cluster keeps what its log says. True if a record was made."""
        image = self.image
        if ELR_FEATURE in image.features or image.brokers or image.topics:
            return False
        self._record(rec.FeatureLevel(ELR_FEATURE, self.elr_version))
        return True

    @classmethod
    def replay(
        cls,
        records: list[MetadataRecord],
        session_timeout_ms: int = 9000,
        now_ms: int | None = None,
        min_isr: int = 1,
        elr_version: int = 1,
    ) -> Controller:
        """Rebuild the image from its own ordered records (the metadata log), recording nothing new.

        Without ``now_ms`` every broker comes back fenced and must register again. With it (a
        controller restarting under a running cluster), brokers that were live when the log ended
        get a fresh session starting at ``now_ms``: one that keeps heartbeating stays, and one that
        died meanwhile is fenced when that session expires, which moves its leaderships away. (Fencing
        them all at once would leave partitions led by a broker nobody will ever fence again.)
        """
        c = cls(session_timeout_ms, min_isr, elr_version)
        for record in records:
            c.apply(record)
        for b in c.brokers.values():
            if now_ms is None:
                b.fenced = True
            else:
                b.last_heartbeat_ms = now_ms
        c.records = list(records)
        return c

    def apply(self, record: MetadataRecord) -> None:
        """Apply one committed record made elsewhere (replay, or a standby following the quorum)."""
        self.image.apply(record)

    def activate(self, now_ms: int, grace_ms: int | None = None) -> None:
        """This controller just became the active one. Every live broker must heartbeat it within
        ``grace_ms`` (the session timeout if None) or be fenced: live brokers find a new active controller
        as soon as the metadata log names it, while a broker that died with the old controller never
        will, and its partitions should not wait a whole session timeout for a new leader."""
        grace = self.session_timeout_ms if grace_ms is None else min(grace_ms, self.session_timeout_ms)
        self.activated_ms = now_ms
        for b in self.brokers.values():
            b.last_heartbeat_ms = now_ms - self.session_timeout_ms + grace

    def unheard(self) -> list[BrokerInfo]:
        """Brokers that count as alive but have not spoken to this controller since it became active:
        the ones it cannot vouch for, having none of the previous controller's session history."""
        return [
            b
            for b in self.brokers.values()
            if not b.fenced and not b.shutting_down and b.last_heartbeat_ms < self.activated_ms
        ]

    def broker_unreachable(self, broker_id: int) -> bool:
        """Its listener refused a connection: the process is gone. A broker still unheard since the
        activation is fenced now instead of at the end of the grace, so its partitions get new leaders
        as soon as the controller quorum has one (the counterpart of a session connection closing under
        a controller that has been active all along). One that has heartbeat since is left alone."""
        b = self.brokers.get(broker_id)
        if b is None or b.fenced or b.shutting_down or b.last_heartbeat_ms >= self.activated_ms:
            return False
        self.fence(broker_id)
        return True

    def snapshot_records(self) -> list[MetadataRecord]:
        """Records that rebuild this state from nothing: what a metadata snapshot holds."""
        return self.image.snapshot()

    # -- brokers -------------------------------------------------------------------------
    def register_broker(
        self,
        broker_id: int,
        now_ms: int,
        clean_shutdown: bool = True,
        host: str = "",
        port: int = 0,
        listeners: tuple[tuple[str, str, int], ...] = (),
        previous_epoch: int | None = None,
        rack: str | None = None,
    ) -> int:
        """A broker (re)joins. With ``previous_epoch`` (the broker epoch its clean-shutdown marker holds,
        -1 without one) the shutdown was clean only if it matches the epoch on record (KIP-966, Kafka's
        PreviousBrokerEpoch); otherwise ``clean_shutdown`` says. After an unclean shutdown the broker may
        have lost unflushed records: it leaves every ISR it shares with other live members (with KIP-966,
        every ISR and ELR) and must catch up again."""
        known = self.brokers.get(broker_id)
        if previous_epoch is not None:
            clean_shutdown = known is not None and previous_epoch == known.epoch
        epoch = (known.epoch if known else 0) + 1
        self._record(
            rec.BrokerRegistration(
                broker_id,
                epoch,
                host or (known.host if known else ""),
                port or (known.port if known else 0),
                clean_shutdown,
                listeners or (known.listeners if known else ()),
                rack=rack,
            )
        )
        b = self.brokers[broker_id]
        b.last_heartbeat_ms = now_ms
        if not clean_shutdown and self.image.elr_enabled:
            self._unclean_shutdown(broker_id)
        for t in self.topics.values():
            for p, st in t.partitions.items():
                others = [r for r in st.isr if r != broker_id and self.alive(r)]
                if not clean_shutdown and not self.image.elr_enabled and broker_id in st.isr and others:
                    shrunk = PartitionState(
                        st.leader, st.leader_epoch, st.isr - {broker_id}, st.replicas, st.partition_epoch
                    )
                    if st.leader == broker_id or st.leader == NO_LEADER:
                        self._elect(t, p, shrunk)
                    else:
                        self._set(
                            t.name,
                            p,
                            PartitionState(st.leader, st.leader_epoch, shrunk.isr, st.replicas, st.partition_epoch + 1),
                        )
                    continue
                if st.leader == broker_id:
                    # KIP-101: a returning leader was not re-elected, yet must start a new epoch.
                    self._set(
                        t.name,
                        p,
                        PartitionState(broker_id, st.leader_epoch + 1, st.isr, st.replicas, st.partition_epoch + 1),
                    )
                elif st.leader == NO_LEADER and broker_id in st.replicas:
                    self._elect(t, p, st)
        return b.epoch

    def _unclean_shutdown(self, broker_id: int) -> None:
        """Kafka's handleBrokerUncleanShutdown: out of every ISR and ELR, and never the leader chosen here."""
        gone = frozenset({broker_id})
        for t in self.topics.values():
            for p, st in list(t.partitions.items()):
                if broker_id not in st.isr and broker_id not in st.elr:
                    continue
                shrunk = PartitionState(st.leader, st.leader_epoch, st.isr - gone, st.replicas, st.partition_epoch)
                if st.leader in (broker_id, NO_LEADER):
                    self._elect(t, p, shrunk, unclean_shutdown=gone)
                else:
                    shrunk.partition_epoch += 1
                    self._set(t.name, p, shrunk, unclean_shutdown=gone)

    def allocate_producer_ids(self, broker_id: int, count: int = 1000) -> int:
        """A block of idempotent producer ids for one broker (Kafka's AllocateProducerIds): ids are unique
        across the cluster because only the controller hands them out, and the record makes it durable."""
        start = self.next_producer_id
        self._record(rec.ProducerIds(broker_id, start + count))
        return start

    def heartbeat(self, broker_id: int, now_ms: int) -> bool:
        b = self.brokers.get(broker_id)
        if b is None or b.fenced:
            return False
        b.last_heartbeat_ms = now_ms
        return True

    def tick(self, now_ms: int) -> None:
        for b in self.brokers.values():
            if not b.fenced and now_ms - b.last_heartbeat_ms > self.session_timeout_ms:
                self.fence(b.broker_id)

    def fence(self, broker_id: int) -> None:
        b = self.brokers.get(broker_id)
        if b is None or b.fenced:
            return
        self._record(rec.BrokerFenced(broker_id))
        self._move_away(broker_id)

    def controlled_shutdown(self, broker_id: int) -> None:
        b = self.brokers.get(broker_id)
        if b is None:
            return
        # Recorded first: it takes the broker out of alive(), so no election below picks it.
        self._record(rec.BrokerShuttingDown(broker_id))
        self._move_away(broker_id)

    def replicas_offline(self, broker_id: int, partitions: list[tuple[str, int]]) -> list[tuple[str, int]]:
        """A log directory of ``broker_id`` failed with these replicas on it (Kafka's
        ReplicationControlManager.handleDirectoriesOffline): they leave the ISR and, where the broker
        led, an in-sync replica elsewhere is elected; a sole in-sync replica leaves the partition
        leaderless rather than serve from a dead disk. Returns the replicas newly marked offline."""
        known = self.offline_replicas.get(broker_id, set())
        new = [
            (t, p)
            for t, p in dict.fromkeys(partitions)
            if (t, p) not in known
            and t in self.topics
            and broker_id in getattr(self.topics[t].partitions.get(p), "replicas", ())
        ]
        if not new:
            return []
        self._record(rec.ReplicasOffline(broker_id, tuple(new)))
        for t, p in new:
            info = self.topics[t]
            st = info.partitions[p]
            isr = st.isr - {broker_id} if len(st.isr) > 1 else st.isr
            if st.leader == broker_id:
                self._elect(info, p, PartitionState(st.leader, st.leader_epoch, isr, st.replicas, st.partition_epoch))
            elif isr != st.isr:
                self._set(t, p, PartitionState(st.leader, st.leader_epoch, isr, st.replicas, st.partition_epoch + 1))
        return new

    def _move_away(self, broker_id: int) -> None:
        for t in self.topics.values():
            for p, st in list(t.partitions.items()):
                if broker_id not in st.replicas:
                    continue
                # Without KIP-966 never below one member: a leaderless partition's last in-sync replica
                # stays, so it can lead again when it returns. With it the ISR may empty: that replica is
                # then in the ELR, which says the same and also survives its unclean restart's check.
                keep_last = len(st.isr) == 1 and not self.image.elr_enabled
                isr = st.isr if keep_last else st.isr - {broker_id}
                if st.leader == broker_id:
                    self._elect(t, p, PartitionState(st.leader, st.leader_epoch, isr, st.replicas, st.partition_epoch))
                elif isr != st.isr:
                    self._set(
                        t.name, p, PartitionState(st.leader, st.leader_epoch, isr, st.replicas, st.partition_epoch + 1)
                    )

    # -- topics and elections ------------------------------------------------------------
    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        unclean_leader_election: bool = False,
        topic_id: str = "",
        configs: dict[str, str] | None = None,
    ) -> None:
        live = sorted(b for b in self.brokers if self.alive(b))
        if replication_factor > len(live):
            raise ValueError(f"replication factor {replication_factor} exceeds {len(live)} live brokers")
        self._record(rec.Topic(name, partitions, unclean_leader_election, topic_id, dict(configs or {})))
        racks = {b: self.brokers[b].rack for b in live}
        for p, state in enumerate(partition_growth.place(0, partitions, replication_factor, live, racks)):
            self._set(name, p, state)

    def assignment_problem(self, assignments: Mapping[int, Sequence[int]]) -> tuple[int, str] | None:
        """Why CreateTopics' explicit replica assignments are refused (Kafka's controller checks, in its
        order): partitions numbered 0..n-1, each list valid (replica_list_problem), one replication factor
        for all, and at least one replica of each partition live to lead it. None if acceptable."""
        if sorted(assignments) != list(range(len(assignments))):
            return Err.INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence"
        sizes = set()
        for p, replicas in sorted(assignments.items()):
            problem = reassignment.replica_list_problem(replicas, self.brokers)
            if problem:
                return Err.INVALID_REPLICA_ASSIGNMENT, problem
            sizes.add(len(replicas))
            if not any(self.alive(r) for r in replicas):
                return (
                    Err.INVALID_REPLICA_ASSIGNMENT,
                    f"All brokers specified in the manual partition assignment for partition {p} "
                    "are fenced or in controlled shutdown.",
                )
        if len(sizes) > 1:
            return (
                Err.INVALID_REPLICA_ASSIGNMENT,
                "All partitions in the manual partition assignment should have the same number of replicas",
            )
        return None

    def create_topic_assigned(
        self,
        name: str,
        assignments: dict[int, Sequence[int]],
        unclean_leader_election: bool = False,
        topic_id: str = "",
        configs: dict[str, str] | None = None,
    ) -> None:
        """A topic with the replicas the client chose (checked by assignment_problem first): the ISR is
        the live ones, the first of them leads."""
        self._record(rec.Topic(name, len(assignments), unclean_leader_election, topic_id, dict(configs or {})))
        for p in range(len(assignments)):
            replicas = tuple(assignments[p])
            isr = frozenset(r for r in replicas if self.alive(r))
            leader = next(r for r in replicas if r in isr)
            self._set(name, p, PartitionState(leader, 0, isr, replicas, 0))

    def add_partitions(
        self, name: str, count: int, assignments: Sequence[Sequence[int]] | None = None, validate_only: bool = False
    ) -> partition_growth.Refusal | None:
        """Grow ``name`` to ``count`` partitions on the replicas asked for, or spread over the live brokers
        and their racks (partition_growth decides); the refusal, if any, with Kafka's error."""
        live = sorted(b for b in self.brokers if self.alive(b))
        t = self.topics[name]
        racks = {b: self.brokers[b].rack for b in live}
        plan = partition_growth.plan_growth(
            name, t.partitions, count, assignments, self.brokers, live, self.alive, racks
        )
        if isinstance(plan, partition_growth.Refusal):
            return plan
        if not validate_only:
            for p, state in enumerate(plan, start=len(t.partitions)):
                self._set(name, p, state)
        return None

    def import_topic(
        self, name: str, topic_id: str, configs: dict[str, str], leader_epochs: list[int], replica: int
    ) -> None:
        """Adopt a topic that one node already holds on disk (a data dir from before combined mode):
        every partition is led by ``replica`` at the epoch it reached, so the node's epoch caches stay
        valid; when the node registers it is a returning leader and gets the next epoch."""
        unclean = configs.get("unclean.leader.election.enable", "false").lower() == "true"
        self._record(rec.Topic(name, len(leader_epochs), unclean, topic_id, dict(configs)))
        for p, epoch in enumerate(leader_epochs):
            self._set(name, p, PartitionState(replica, epoch, frozenset({replica}), (replica,), 0))

    def delete_topic(self, name: str) -> None:
        if name in self.topics:
            self._record(rec.TopicDeleted(name))

    # -- dynamic configs ------------------------------------------------------------------
    def alter_configs(
        self,
        changes: list[ConfigChange],
        incremental: bool,
        validate_only: bool = False,
        group_bounds: Mapping[str, int] = GROUP_BOUNDS,
    ) -> list[ConfigOutcome]:
        """(Incremental)AlterConfigs: one outcome per resource, in request order. Accepted changes are
        recorded (unless ``validate_only``); turning unclean election on elects a leader, uncleanly, for
        each partition of the affected topics that has none (Kafka's controller does so too)."""
        dup = duplicates(changes)
        outcomes = []
        for change in changes:
            if (change.resource_type, change.resource_name) in dup:
                outcomes.append(ConfigOutcome(Err.INVALID_REQUEST, "Each resource may appear only once in a request"))
                continue
            outcome = plan(self.image, change, incremental, group_bounds)
            outcomes.append(outcome)
            if outcome.error_code or validate_only:
                continue
            self._record(*outcome.records)
            if any(r.name == "unclean.leader.election.enable" for r in outcome.records):
                scope = [change.resource_name] if change.resource_type == RESOURCE_TOPIC else list(self.topics)
                self.elect_leaderless(scope)
        return outcomes

    # -- security metadata (decided in controller/acls.py and controller/scram.py) ----------------
    # A request that would write more than ``max_records`` is refused whole (Kafka's MAX_RECORDS_PER_USER_OP).
    def create_acls(self, bindings: Sequence[AclBinding], max_records: int | None = None) -> list[acls.AclCreation]:
        outcomes, records = acls.plan_create(self.image.acls, bindings, lambda: str(uuid.uuid4()))
        if max_records is not None and len(records) > max_records:
            return [acls.AclCreation(Err.POLICY_VIOLATION, acls.TOO_LARGE) for _ in bindings]
        self._record(*records)
        return outcomes

    def delete_acls(self, filters: Sequence[AclFilter], max_records: int | None = None) -> list[acls.AclDeletion]:
        outcomes, records = acls.plan_delete(self.image.acls, filters)
        if max_records is not None and len(records) > max_records:
            return [acls.AclDeletion(Err.POLICY_VIOLATION, acls.TOO_LARGE) for _ in filters]
        self._record(*records)
        return outcomes

    def alter_scram(
        self, deletions: Sequence[scram.ScramDeletion], upsertions: Sequence[scram.ScramUpsertion]
    ) -> list[scram.ScramOutcome]:
        outcomes, records = scram.plan_alter(self.image.scram, deletions, upsertions)
        self._record(*records)
        return outcomes

    def alter_client_quotas(
        self, alterations: Sequence[client_quotas.QuotaAlteration], validate_only: bool = False
    ) -> list[client_quotas.QuotaOutcome]:
        outcomes, records = client_quotas.plan_alter(self.image.client_quotas, alterations)
        if not validate_only:
            self._record(*records)
        return outcomes

    def bootstrap(self, records: Sequence[MetadataRecord]) -> bool:
        """Append the data directory's bootstrap records, once in the life of the metadata log."""
        if self.image.bootstrapped:
            return False
        self._record(*records, rec.BootstrapApplied(len(records)))
        return True

    def elect_leaderless(self, topics: list[str]) -> list[tuple[str, int]]:
        """Elect where a partition of ``topics`` has no live leader and unclean election now allows one."""
        moved = []
        for name in topics:
            t = self.topics.get(name)
            if t is None or not self.image.unclean_enabled(t):
                continue
            for p, st in list(t.partitions.items()):
                if (st.leader == NO_LEADER or not self.alive(st.leader)) and self.elect_leader(name, p):
                    moved.append((name, p))
        return moved

    def elect_leader(self, topic: str, partition: int, broker: int | None = None, unclean: bool | None = None) -> bool:
        """Force an election; with ``broker``, only that replica may win (tests, preferred); ``unclean``
        overrides the topic's unclean.leader.election.enable (ElectLeaders with the UNCLEAN type)."""
        t = self.topics[topic]
        st = t.partitions[partition]
        before = st.leader_epoch
        self._elect(t, partition, st, preferred=broker, unclean=unclean)
        return t.partitions[partition].leader_epoch != before

    def elect_preferred(self) -> list[tuple[str, int]]:
        moved = []
        for t in self.topics.values():
            for p, st in t.partitions.items():
                pref = st.replicas[0]
                if st.leader != pref and pref in st.isr and self.alive(pref) and self.elect_leader(t.name, p, pref):
                    moved.append((t.name, p))
        return moved

    def imbalance(self) -> dict[int, float]:
        """Per broker: the share of partitions it is preferred for but does not lead."""
        preferred: dict[int, int] = {}
        not_leading: dict[int, int] = {}
        for t in self.topics.values():
            for st in t.partitions.values():
                pref = st.replicas[0]
                preferred[pref] = preferred.get(pref, 0) + 1
                if st.leader != pref:
                    not_leading[pref] = not_leading.get(pref, 0) + 1
        return {b: not_leading.get(b, 0) / n for b, n in preferred.items()}

    # -- AlterPartition ------------------------------------------------------------------
    def alter_partition(self, req: AlterIsr) -> tuple[int, PartitionState | None]:
        t = self.topics.get(req.topic)
        if t is None or req.partition not in t.partitions:
            return Err.NOT_LEADER_OR_FOLLOWER, None
        st = t.partitions[req.partition]
        if req.leader_id != st.leader:
            return Err.NOT_LEADER_OR_FOLLOWER, st
        if req.leader_epoch != st.leader_epoch:
            return Err.FENCED_LEADER_EPOCH, st
        if req.partition_epoch != st.partition_epoch:
            return Err.INVALID_UPDATE_VERSION, st
        added = req.new_isr - st.isr
        if any(not self.alive(r) for r in added):
            return Err.INELIGIBLE_REPLICA, st  # KIP-320: never add fenced or offline replicas
        if st.leader not in req.new_isr:
            return Err.INVALID_UPDATE_VERSION, st
        new = PartitionState(st.leader, st.leader_epoch, frozenset(req.new_isr), st.replicas, st.partition_epoch + 1)
        self._set(req.topic, req.partition, new)
        # A joining replica reaching the ISR may finish a reassignment: then the leader gets the newer state.
        self._maybe_complete(t, req.partition)
        return 0, t.partitions[req.partition]

    # -- reassignment (KIP-455; the arithmetic is in reassignment.py) ---------------------------
    def alter_reassignment(
        self, topic: str, partition: int, target: Sequence[int] | None, allow_rf_change: bool = True
    ) -> tuple[int, str | None]:
        """AlterPartitionReassignments for one partition: move it to ``target``, or cancel (None).
        ``allow_rf_change`` False (KIP-860, v1's flag) refuses a target of another size than the original.
        Returns (error code, message); on an error nothing is recorded."""
        t = self.topics.get(topic)
        if t is None or partition not in t.partitions:
            return Err.UNKNOWN_TOPIC_OR_PARTITION, f"partition {topic}-{partition} does not exist"
        st = t.partitions[partition]
        if target is None:
            if not reassignment.is_reassigning(st):
                return Err.NO_REASSIGNMENT_IN_PROGRESS, f"no reassignment of {topic}-{partition} to cancel"
            self._move(t, partition, reassignment.original_of(st))
            return Err.NONE, None
        problem = reassignment.replica_list_problem(target, self.brokers)
        if problem:
            return Err.INVALID_REPLICA_ASSIGNMENT, problem
        rf = len(reassignment.original_of(st).replicas)
        if not allow_rf_change and len(target) != rf:
            return Err.INVALID_REPLICATION_FACTOR, f"The replication factor is changed from {rf} to {len(target)}"
        self._move(t, partition, reassignment.start(st, target))
        self._maybe_complete(t, partition)  # a pure removal has nothing to wait for
        return Err.NONE, None

    def reassigning(self, topics: Sequence[tuple[str, Sequence[int]]] | None) -> list[tuple[str, int, PartitionState]]:
        """ListPartitionReassignments: the partitions of ``topics`` (all topics if None) that are moving.
        Unknown topics and partitions are left out, as Kafka's controller does."""
        wanted = [(name, list(self.topics[name].partitions)) for name in self.topics] if topics is None else topics
        out = []
        for name, parts in wanted:
            t = self.topics.get(name)
            if t is None:
                continue
            for p in parts:
                st = t.partitions.get(p)
                if st is not None and reassignment.is_reassigning(st):
                    out.append((name, p, st))
        return out

    def _maybe_complete(self, t: TopicInfo, partition: int) -> None:
        done = reassignment.completion(t.partitions[partition])
        if done is not None:
            self._move(t, partition, done, completing=True)

    def _move(self, t: TopicInfo, partition: int, new: reassignment.ReplicaSet, completing: bool = False) -> None:
        """Take the partition to ``new``. Replicas that leave are fenced out by a new leader epoch (their
        fetches at the old one are refused; KRaft bumps the epoch when replicas are removed too). A leader
        that leaves hands over to the first live in-sync replica of the new set; a completion that would
        find none waits instead (the target replicas may come back), anything else leaves it leaderless."""
        st = t.partitions[partition]
        removed = set(st.replicas) - set(new.replicas)
        leader, epoch = st.leader, st.leader_epoch + (1 if removed else 0)
        if leader not in new.replicas or leader not in new.isr:
            candidates = [
                r
                for r in new.replicas
                if r in new.isr and self.alive(r) and (t.name, partition) not in self.offline_replicas.get(r, ())
            ]
            if not candidates and completing:
                return
            leader = candidates[0] if candidates else NO_LEADER
            epoch = st.leader_epoch + 1
            if new.unclean and leader != NO_LEADER:
                self._record(rec.UncleanElection(t.name, partition, leader))
        self._set(
            t.name,
            partition,
            PartitionState(
                leader, epoch, new.isr, new.replicas, st.partition_epoch + 1, adding=new.adding, removing=new.removing
            ),
            reassignment=True,
        )
