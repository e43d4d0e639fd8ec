"""The controller's state and the one path by which a partition's state changes: a PartitionChange record
made by ``_set`` (with the ELR that follows from the new ISR) or by ``_elect`` (elr.choose). Controller
(controller.py) builds every decision on these."""

from __future__ import annotations

from epochlog.controller import elr
from epochlog.controller import records as rec
from epochlog.controller.image import BrokerInfo, ClusterImage, TopicInfo
from epochlog.controller.records import MetadataRecord
from epochlog.replication.types import PartitionState

NO_LEADER = elr.NO_LEADER

# A break-on-purpose switch for the simulator (never set by a server): a broker back from an unclean
# shutdown stays eligible, so a test can show the invariant that rule protects firing.
UNSAFE_KEEP_UNCLEAN_IN_ELR = "keep-unclean-in-elr"


class PartitionChanges:
    """The metadata image and the one way partition states change: records, applied as they are made."""

    def __init__(self, session_timeout_ms: int = 9000, min_isr: int = 1, elr_version: int = 1) -> None:
        self.session_timeout_ms = session_timeout_ms
        self.default_min_isr = min_isr  # the controller's static min.insync.replicas
        self.elr_version = elr_version  # eligible.leader.replicas.version a new cluster finalizes
        self.unsafe: set[str] = set()
        self.image = ClusterImage()
        self.records: list[MetadataRecord] = []
        self.changed: list[tuple[str, int]] = []  # partitions whose state changed since drained
        self.activated_ms = 0  # when this controller last became the active one

    # The metadata state is the image's; these name its parts as the decisions below read them.
    @property
    def brokers(self) -> dict[int, BrokerInfo]:
        return self.image.brokers

    @property
    def topics(self) -> dict[str, TopicInfo]:
        return self.image.topics

    @property
    def next_producer_id(self) -> int:
        return self.image.next_producer_id

    @property
    def offline_replicas(self) -> dict[int, set[tuple[str, int]]]:
        return self.image.offline_replicas

    # -- records -------------------------------------------------------------------------
    def _record(self, *records: MetadataRecord) -> None:
        """Decisions: each record, in order, is kept for the caller to persist and applied like any other."""
        for record in records:
            self.records.append(record)
            self.changed += self.image.apply(record).partitions

    def _set(
        self,
        topic: str,
        partition: int,
        state: PartitionState,
        reassignment: bool = False,
        unclean_shutdown: frozenset[int] = frozenset(),
        elr_decided: bool = False,
    ) -> None:
        """Record ``state``. A reassignment in progress carries on unless ``reassignment`` says that
        ``state.adding``/``state.removing`` are the new word on it (only the reassignment steps change it).
        The ELR follows the new ISR (elr.target_elr) unless an election already decided it."""
        t = self.topics.get(topic)
        current = t.partitions.get(partition) if t is not None else None
        adding, removing = state.adding, state.removing
        if not reassignment:
            adding, removing = (current.adding, current.removing) if current is not None else ((), ())
        eligible = state.elr
        if not elr_decided:
            eligible, _ = self._target_elr(t, current, state.isr, state.replicas, unclean_shutdown)
        last_known: tuple[int, ...] = ()
        if t is not None and self.image.elr_enabled:
            remembered = elr.last_known_leader(current, state.isr, state.leader)
            last_known = tuple(r for r in remembered if r in state.replicas)
        self._record(
            rec.PartitionChange(
                topic,
                partition,
                state.leader,
                state.leader_epoch,
                tuple(sorted(state.isr)),
                tuple(state.replicas),
                state.partition_epoch,
                tuple(adding),
                tuple(removing),
                tuple(eligible),
                tuple(last_known),
            )
        )

    def _target_elr(
        self,
        t: TopicInfo | None,
        current: PartitionState | None,
        isr: frozenset[int],
        replicas: tuple[int, ...],
        unclean: frozenset[int],
    ) -> tuple[tuple[int, ...], tuple[int, ...]]:
        if t is None or not self.image.elr_enabled:
            return (), ()
        if UNSAFE_KEEP_UNCLEAN_IN_ELR in self.unsafe:
            unclean = frozenset()
        eligible, last_known = elr.target_elr(current, isr, self.image.min_isr(t, self.default_min_isr), unclean)
        # A reassignment that drops a replica drops it from both lists: it holds no copy to lead from.
        return tuple(r for r in eligible if r in replicas), tuple(r for r in last_known if r in replicas)

    def drain_changes(self) -> list[tuple[str, int, PartitionState]]:
        out = [(t, p, self.topics[t].partitions[p]) for t, p in dict.fromkeys(self.changed) if t in self.topics]
        self.changed = []
        return out

    def alive(self, broker_id: int) -> bool:
        b = self.brokers.get(broker_id)
        return b is not None and not b.fenced and not b.shutting_down

    def _elect(
        self,
        t: TopicInfo,
        p: int,
        st: PartitionState,
        preferred: int | None = None,
        unclean: bool | None = None,
        unclean_shutdown: frozenset[int] = frozenset(),
    ) -> None:
        """Elect for ``st`` (the partition with its new ISR; the stored state is the one before)."""
        current = t.partitions.get(p)
        eligible, last_known = self._target_elr(t, current, st.isr, st.replicas, unclean_shutdown)

        def acceptable(r: int) -> bool:
            return self.alive(r) and r not in unclean_shutdown and (t.name, p) not in self.offline_replicas.get(r, ())

        allow_unclean = self.image.unclean_enabled(t) if unclean is None else unclean
        choice = elr.choose(
            st.replicas,
            st.isr,
            eligible,
            last_known,
            acceptable,
            allow_unclean,
            preferred,
            elr_rules=self.image.elr_enabled,
        )
        if choice.leader == NO_LEADER and st.leader == NO_LEADER and current is not None:
            if (current.isr, current.elr, current.last_known_elr) == (choice.isr, choice.elr, choice.last_known_elr):
                return  # still nobody to lead, and nothing else changed
        if choice.unclean:
            self._record(rec.UncleanElection(t.name, p, choice.leader))
        self._set(
            t.name,
            p,
            PartitionState(
                choice.leader,
                st.leader_epoch + 1,
                choice.isr,
                st.replicas,
                st.partition_epoch + 1,
                elr=choice.elr,
                last_known_elr=choice.last_known_elr,
            ),
            elr_decided=True,
        )
