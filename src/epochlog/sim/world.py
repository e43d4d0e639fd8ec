"""The deterministic simulator: a seeded clock, network, disks, brokers, a controller and a producer.

It drives the same PartitionReplica (replication/) and Controller (controller/) the server uses.
Every event runs to completion; the invariant checker runs after each one.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from epochlog.controller.controller import Controller
from epochlog.controller.records import UncleanElection
from epochlog.replication.fetch_backoff import FetchBackoff
from epochlog.replication.lease import NO_LEASE, BrokerLease
from epochlog.replication.partition import PartitionReplica
from epochlog.replication.types import FetchOutcome, FetchRequest, FetchResponse, PartitionState, Role, TruncationMode
from epochlog.sim import transactions as txn
from epochlog.sim.disk_log import SimLog
from epochlog.sim.invariants import InvariantChecker, Violation
from epochlog.trace import events as trace
from epochlog.trace.check import TraceChecker, TraceViolation
from epochlog.trace.sink import CallbackTracer
from epochlog.transactions import verification
from epochlog.transactions.verification import needs_verification

TOPIC = "t"
PARTITION = 0
CONTROLLER = 0
PRODUCER = -1


@dataclass
class Faults:
    drop: float = 0.0
    duplicate: float = 0.0
    min_delay_ms: int = 1
    max_delay_ms: int = 5


@dataclass
class SimBroker:
    broker_id: int
    log: SimLog
    replica: PartitionReplica
    # Its lease (replication/lease.py), kept even when the replica is told to ignore it, so the checker
    # can judge a broker that serves past it.
    lease: BrokerLease
    alive: bool = True
    paused: bool = False
    clean_shutdown: bool = True
    persisted_hw: int = 0
    fetch_in_flight_until: int = 0  # 0: no fetch in flight; else when it counts as failed (unanswered)
    backoffs: dict[int, FetchBackoff] = field(default_factory=dict)  # per leader, as the server's fetchers
    sync_scheduled: bool = False  # durable mode: a group-commit sync of its log is on its way
    pending_acks: list[tuple[int, str]] = field(default_factory=list)
    inbox: list[tuple[int, Any]] = field(default_factory=list)  # held while paused


class World:
    def __init__(
        self,
        seed: int = 0,
        brokers: int = 3,
        mode: TruncationMode = TruncationMode.LEADER_EPOCH,
        min_isr: int = 1,
        unclean: bool = False,
        faults: Faults | None = None,
        replica_lag_time_max_ms: int = 1000,
        session_timeout_ms: int = 1500,
        replication_factor: int | None = None,
        transactions: bool = False,
        replica_fetch_backoff_ms: int | None = None,
        durable: bool = False,
        count_unsynced: bool = False,
        elr: bool = False,
        elr_hw_rule: bool = True,
        enforce_lease: bool = True,
    ) -> None:
        """``durable``: the topic's flush policy is flush.messages=1: brokers sync their logs by group commit,
        a while after appending (sync_delay_ms), and only synced records count toward acknowledgements;
        an acknowledged record must then survive a power loss of every replica. ``count_unsynced``: break
        that on purpose (the cores count their unsynced log ends).
        ``elr``: the cluster finalizes KIP-966 as a new real cluster does; ``elr_hw_rule`` False drops its
        broker half (the HW held while the ISR is below min ISR), for a break-on-purpose run."""
        self.durable = durable
        self.count_unsynced = count_unsynced
        self.sync_delay_ms = (1, 40)
        self.rng = random.Random(seed)
        self.seed = seed
        self.now = 0
        self.mode = mode
        self.min_isr = min_isr
        self.faults = faults or Faults()
        self.lag_ms = replica_lag_time_max_ms
        self.session_ms = session_timeout_ms
        self.enforce_lease = enforce_lease  # False: Kafka's broker, which serves until the metadata moves it
        # Scaled as the simulator's other times are: Kafka's defaults keep 1 s of backoff to 30 s of lag.
        self.fetch_backoff_ms = (
            replica_lag_time_max_ms // 30 if replica_fetch_backoff_ms is None else replica_fetch_backoff_ms
        )
        self._queue: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = 0
        self.events = 0
        self.partitioned: set[frozenset[int]] = set()
        self.controller = Controller(session_timeout_ms=session_timeout_ms, min_isr=min_isr, elr_version=int(elr))
        if elr:
            self.controller.init_features()
        self.hw_needs_min_isr = elr and elr_hw_rule
        self.flush_chance = 0.2  # per broker tick: the page cache written back now and then
        self.brokers: dict[int, SimBroker] = {}
        self.history: list[str] = []
        self.acked: dict[int, str] = {}  # offset -> value acknowledged to the acks=all producer
        self.next_value = 0
        self.checker = InvariantChecker(self)
        # The same invariants real brokers' traces are checked against, fed by the cores as they move.
        self.trace = TraceChecker()
        self._unclean_seen = 0  # controller records already looked at for unclean elections
        self.snapshots: list[tuple[str, dict[int, dict[str, Any]]]] = []
        self.txn_producer = txn.TxnProducer(self) if transactions else None
        self.read_committed = txn.ReadCommittedChecker(self) if transactions else None
        for b in range(1, brokers + 1):
            log = SimLog()
            log.transactional = transactions
            self.brokers[b] = self._new_broker(b, log)
            self.controller.register_broker(b, 0)
        self.controller.create_topic(TOPIC, 1, replication_factor or brokers, unclean_leader_election=unclean)
        # Brokers that have held a replica: a reassignment that removes one must still tell it (a real
        # broker follows the whole metadata log), or it would keep serving its old term.
        self.known_replicas: set[int] = set(self.state().replicas)
        self._push_states(reliable=True)

    # -- plumbing ---------------------------------------------------------------------------
    def _new_broker(self, b: int, log: SimLog, hw: int = 0) -> SimBroker:
        tracer = CallbackTracer(self.trace.feed, b, trace.BROKER, lambda: self.now)
        tracer.emit(trace.Start())
        replica = PartitionReplica(
            b,
            TOPIC,
            PARTITION,
            log,
            min_insync_replicas=self.min_isr,
            replica_lag_time_max_ms=self.lag_ms,
            truncation_mode=self.mode,
            tracer=tracer,
            hw_needs_min_isr=self.hw_needs_min_isr,
        )
        replica.high_watermark = min(hw, log.log_end_offset)
        replica.durability.sync_before_ack = self.durable
        replica.durability.count_unsynced = self.count_unsynced
        replica.durability.synced(log.flushed, log.log_end_offset)  # what a restart finds is on disk
        # (Re)registered now: the controller's session starts now, and so does the lease.
        lease = BrokerLease(self.session_ms, expires_ms=self.now + self.session_ms)
        replica.lease = lease if self.enforce_lease else NO_LEASE
        return SimBroker(b, log, replica, lease, persisted_hw=hw)

    def log_event(self, text: str) -> None:
        self.history.append(f"t={self.now:>6}ms {text}")

    def schedule(self, delay: int, fn: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (self.now + max(delay, 0), self._seq, fn))

    def send(self, src: int, dst: int, msg: Any, reliable: bool = False) -> None:
        if not reliable:
            if frozenset((src, dst)) in self.partitioned:
                return
            if self.rng.random() < self.faults.drop:
                return
        copies = 2 if (not reliable and self.rng.random() < self.faults.duplicate) else 1
        for _ in range(copies):
            delay = self.rng.randint(self.faults.min_delay_ms, self.faults.max_delay_ms)
            self.schedule(delay, partial(self._deliver, src, dst, msg))

    def _deliver(self, src: int, dst: int, msg: Any) -> None:
        if dst in (CONTROLLER, PRODUCER):
            self._on_message(dst, src, msg)
            return
        b = self.brokers[dst]
        if not b.alive:
            return
        if b.paused:
            b.inbox.append((src, msg))
            return
        self._on_message(dst, src, msg)

    def step(self) -> bool:
        if not self._queue:
            return False
        t, _, fn = heapq.heappop(self._queue)
        self.now = max(self.now, t)
        fn()
        self.events += 1
        self.checker.check()
        return True

    def run_until(self, t: int) -> None:
        while self._queue and self._queue[0][0] <= t:
            self.step()
        self.now = max(self.now, t)

    def run_for(self, ms: int) -> None:
        self.run_until(self.now + ms)

    @property
    def violations(self) -> list[Violation]:
        return self.checker.violations

    @property
    def trace_violations(self) -> list[TraceViolation]:
        """What the trace checker found in the cores' events (kept apart: the scenarios name the sim's own)."""
        return self.trace.finish().violations

    # -- the controller -----------------------------------------------------------------------
    def _told(self, st: PartitionState) -> list[int]:
        """Who hears of a partition state: its replicas, then former replicas (in id order)."""
        out = list(st.replicas) + sorted(self.known_replicas - set(st.replicas))
        self.known_replicas |= set(st.replicas)
        return out

    def _trace_unclean(self) -> None:
        """Tell the trace checker of unclean elections, as a broker's metadata would."""
        records = self.controller.records
        for r in records[self._unclean_seen :]:
            if isinstance(r, UncleanElection):
                event = trace.Unclean(r.topic, r.partition, r.leader)
                self.trace.feed(trace.Stamped(CONTROLLER, trace.CONTROLLER, -1, self.now, event))
        self._unclean_seen = len(records)

    def _push_states(self, reliable: bool = False) -> None:
        self._trace_unclean()
        for _t, _p, st in self.controller.drain_changes():
            self.log_event(f"controller: leader={st.leader} epoch={st.leader_epoch} isr={sorted(st.isr)}")
            for b in self._told(st):
                self.send(CONTROLLER, b, ("state", st), reliable=reliable)

    def controller_tick(self) -> None:
        self.controller.tick(self.now)
        self._push_states()

    def state(self) -> PartitionState:
        return self.controller.topics[TOPIC].partitions[PARTITION]

    # -- message handling ----------------------------------------------------------------------
    def _on_message(self, dst: int, src: int, msg: Any) -> None:
        kind = msg[0]
        if dst == CONTROLLER:
            if kind == "heartbeat":
                fenced = not self.controller.heartbeat(src, self.now)
                if fenced and self.brokers[src].alive:
                    self.controller.register_broker(src, self.now)
                    self.log_event(f"broker {src} re-registers")
                self.send(CONTROLLER, src, ("heartbeat_answer", msg[1], fenced))
                # Brokers follow the metadata log: the answer carries the latest partition state,
                # so a lost push is repaired on the next heartbeat.
                self.send(CONTROLLER, src, ("state", self.state()))
            elif kind == "alter":
                err, st = self.controller.alter_partition(msg[1])
                self.send(CONTROLLER, src, ("alter_result", msg[1], err, st))
            self._push_states()
            return
        if dst == PRODUCER:
            if kind == "verify" and self.txn_producer is not None:
                _, value, markers = msg
                self.send(PRODUCER, src, ("verified", value, self.txn_producer.verify(value), markers))
            elif kind == "ack":
                _, offset, value, isr, committed_at = msg
                self.acked[offset] = value
                self.checker.on_ack(offset, value, isr, committed_at)
            return
        b = self.brokers[dst]
        r = b.replica
        if kind == "state":
            pushed: PartitionState = msg[1]
            was = (r.role, r.leader_epoch)
            r.apply_state(pushed, self.now)
            if (r.role, r.leader_epoch) != was:
                self.log_event(
                    f"broker {dst} becomes {r.role.value} at epoch {r.leader_epoch} "
                    f"(leo={b.log.log_end_offset} hw={r.high_watermark})"
                )
                b.pending_acks = [] if r.role is not Role.LEADER else b.pending_acks
                self.checker.on_role_change(dst)
        elif kind == "heartbeat_answer":
            self.heartbeat_answered(b, msg[1], msg[2])
        elif kind == "alter_result":
            _, proposal, err, st = msg
            r.on_isr_change_answer(proposal, err, st, self.now)
        elif kind == "fetch":
            req: FetchRequest = msg[1]
            decision, proposal = r.handle_fetch(req, self.now)
            batches = b.log.read(decision.read_from, 10) if decision.read_from >= 0 else None
            resp = FetchResponse(
                decision.error,
                decision.high_watermark,
                decision.diverging,
                batches,
                r.leader_epoch,
                decision.log_start_offset,
                asked_epoch=req.current_leader_epoch,
                asked_offset=req.fetch_offset,
            )
            self.send(dst, src, ("fetch_response", resp))
            if proposal is not None:
                self.send(dst, CONTROLLER, ("alter", proposal))
            self._release_acks(b)
        elif kind == "fetch_response":
            resp = msg[1]
            b.fetch_in_flight_until = 0
            outcome = r.handle_fetch_response(resp)  # the core drops answers to an older term or position
            if r.needs_sync():
                self._schedule_sync(b)
            self._backoff(b, src).after_answer(PARTITION, outcome, r.leader_epoch, self.now)
            if outcome is FetchOutcome.TRUNCATED:
                self.log_event(
                    f"broker {dst} truncates to {b.log.log_end_offset} "
                    f"(diverging epoch {resp.diverging.epoch if resp.diverging else '?'})"
                )
        elif kind == "produce":
            _, value = msg
            if self.txn_producer is not None:
                entry = txn.producer_entry(b.log.entries)
                if needs_verification(txn.parse(value)[0] == "rec", True, txn.PRODUCER_EPOCH, entry):
                    self.send(dst, PRODUCER, ("verify", value, txn.markers_applied(b.log.entries)))
                    return
            self._leader_write(b, value)
        elif kind == "verified":
            _, value, coordinator, markers = msg
            code = verification.answer(coordinator, markers, txn.markers_applied(b.log.entries), txn.PRODUCE_VERSION)
            if code:
                self.log_event(f"broker {dst} refuses {value}: {code.name}")
                return
            self._leader_write(b, value)

    def _leader_write(self, b: SimBroker, value: str) -> None:
        r = b.replica
        if self.txn_producer is not None and r.role is Role.LEADER and txn.hangs(b.log.entries, value):
            self.checker._fail("hanging-transaction", f"leader {b.broker_id} opens a decided transaction: {value}")
        appended = r.append([value], self.now, acks=-1)
        if appended.error:
            return
        self.checker.on_leader_append(b.broker_id, r.leader_epoch, value)
        b.pending_acks.append((appended.first_offset, value))
        self._schedule_sync(b)
        self._release_acks(b)

    def _schedule_sync(self, b: SimBroker) -> None:
        """Durable mode: one sync covers every append since the last (group commit), a while later; a
        crash before it loses them, and the cores must not have counted them."""
        if not self.durable or b.sync_scheduled:
            return
        b.sync_scheduled = True
        self.schedule(self.rng.randint(*self.sync_delay_ms), partial(self._sync, b))

    def _sync(self, b: SimBroker) -> None:
        b.sync_scheduled = False
        if self.brokers[b.broker_id] is not b or not b.alive:
            return  # it crashed meanwhile: the sync never happened
        if b.paused:
            self._schedule_sync(b)
            return
        b.log.flush()
        b.replica.synced(b.log.log_end_offset)
        self._release_acks(b)

    def _backoff(self, b: SimBroker, leader: int) -> FetchBackoff:
        """The rule the server's fetcher follows (replication/fetch_backoff.py), one per leader."""
        if leader not in b.backoffs:
            b.backoffs[leader] = FetchBackoff(self.fetch_backoff_ms)
        return b.backoffs[leader]

    def heartbeat_answered(self, b: SimBroker, sent_ms: int, fenced: bool) -> None:
        """The controller answered the heartbeat ``b`` sent at ``sent_ms``: the lease core decides."""
        b.lease.answered(sent_ms, fenced)
        self._release_acks(b)

    def _release_acks(self, b: SimBroker) -> None:
        r = b.replica
        if not r.serves_as_leader(self.now):
            if b.pending_acks and r.role is Role.LEADER:
                n = len(b.pending_acks)
                self.log_event(f"broker {b.broker_id}: lease expired; {n} write(s) answered NOT_LEADER")
            b.pending_acks = []
            return
        keep = []
        for offset, value in b.pending_acks:
            if r.is_committed(offset):
                self.checker.on_leader_ack(b.broker_id)
                isr = r.isr | r.pending_isr.new_isr if r.pending_isr is not None else r.isr
                self.send(b.broker_id, PRODUCER, ("ack", offset, value, isr, self.now))
            else:
                keep.append((offset, value))
        b.pending_acks = keep

    # -- periodic work ---------------------------------------------------------------------------
    def broker_tick(self, bid: int) -> None:
        b = self.brokers[bid]
        if not b.alive or b.paused:
            return
        r = b.replica
        self.send(bid, CONTROLLER, ("heartbeat", self.now))
        if r.role is Role.FOLLOWER and b.fetch_in_flight_until and self.now >= b.fetch_in_flight_until:
            b.fetch_in_flight_until = 0
            self._backoff(b, r.leader_id).after_failure(self.now)  # unanswered: the request failed
        if r.needs_sync():
            self._schedule_sync(b)
        if r.role is Role.FOLLOWER and not b.fetch_in_flight_until:
            backoff = self._backoff(b, r.leader_id)
            req = r.next_fetch() if backoff.may_fetch(PARTITION, r.leader_epoch, self.now) else None
            if req is not None:
                b.fetch_in_flight_until = self.now + 200
                self.send(bid, r.leader_id, ("fetch", req))
        if r.role is Role.LEADER:
            proposal = r.next_isr_change(self.now)  # a shrink, or the unanswered change again
            if proposal is not None:
                self.send(bid, CONTROLLER, ("alter", proposal))
            self._release_acks(b)
        if self.rng.random() < self.flush_chance:
            b.log.flush()
            r.synced(b.log.log_end_offset)
            b.persisted_hw = r.high_watermark

    def produce(self) -> None:
        st = self.state()
        if st.leader < 0:
            return
        if self.txn_producer is not None:
            v = self.txn_producer.next_value()
            if v is None:
                return
            value = v
        else:
            value = f"m{self.next_value}"
        self.next_value += 1
        self.send(PRODUCER, st.leader, ("produce", value))

    def start_periodic(self, until: int, produce_every: int = 20, tick_every: int = 25) -> None:
        for t in range(self.now, until, tick_every):
            for bid in self.brokers:
                self.schedule(t - self.now + self.rng.randint(0, 5), partial(self.broker_tick, bid))
            self.schedule(t - self.now, self.controller_tick)
        if produce_every:
            for t in range(self.now, until, produce_every):
                self.schedule(t - self.now, self.produce)

    # -- faults and operator actions ---------------------------------------------------------------
    def crash(self, bid: int, hard: bool = True, tear: bool = False) -> None:
        b = self.brokers[bid]
        if not b.alive:
            return
        b.alive = False
        b.paused = False
        b.inbox = []
        b.clean_shutdown = not hard
        if hard:
            lost = b.log.crash(tear_last=tear)
            self.checker.on_hard_crash(bid)
            b.replica.tracer.emit(trace.Crash(lost))
            self.log_event(f"broker {bid} crashes hard, losing {lost} unflushed record(s)")
        else:
            b.log.flush()
            b.persisted_hw = b.replica.high_watermark
            self.log_event(f"broker {bid} shuts down cleanly")

    def restart(self, bid: int) -> None:
        old = self.brokers[bid]
        if old.alive:
            return
        self.brokers[bid] = self._new_broker(bid, old.log, old.persisted_hw)
        self.log_event(
            f"broker {bid} restarts (leo={old.log.log_end_offset} hw={old.persisted_hw}"
            f"{'' if old.clean_shutdown else ', after an unclean shutdown'})"
        )
        self.controller.register_broker(bid, self.now, clean_shutdown=old.clean_shutdown)
        # The controller's view is sent to the restarted broker even if nothing changed.
        for st in self.controller.topics[TOPIC].partitions.values():
            if bid in st.replicas or bid in self.known_replicas:
                self.send(CONTROLLER, bid, ("state", st))
        self._push_states()

    def pause(self, bid: int) -> None:
        self.brokers[bid].paused = True
        self.log_event(f"broker {bid} paused")

    def resume(self, bid: int) -> None:
        b = self.brokers[bid]
        b.paused = False
        inbox, b.inbox = b.inbox, []
        self.log_event(f"broker {bid} resumed with {len(inbox)} queued message(s)")
        for src, msg in inbox:
            self._on_message(bid, src, msg)

    def fence(self, bid: int) -> None:
        self.controller.fence(bid)
        self._push_states()

    def elect(self, bid: int | None = None) -> None:
        self.controller.elect_leader(TOPIC, PARTITION, bid)
        self._push_states()

    def reassign(self, target: list[int] | None) -> None:
        """AlterPartitionReassignments for the partition: move it to ``target``, or cancel (None)."""
        code, _msg = self.controller.alter_reassignment(TOPIC, PARTITION, target)
        self.log_event(f"reassign to {target}: error {code}")
        self._push_states()

    def partition_network(self, a: int, b: int) -> None:
        self.partitioned.add(frozenset((a, b)))

    def heal_network(self) -> None:
        self.partitioned.clear()

    def snapshot(self, label: str) -> None:
        """Each replica's log as (offset, epoch, value) rows, HW and role, for the report."""
        view = {}
        for bid, b in self.brokers.items():
            view[bid] = {
                "alive": b.alive,
                "role": b.replica.role.value,
                "epoch": b.replica.leader_epoch,
                "hw": b.replica.high_watermark,
                "entries": [(o, e.epoch, e.value) for o, e in enumerate(b.log.entries)],
                "epochs": [(e.epoch, e.start_offset) for e in b.log.cache.entries()],
            }
        self.snapshots.append((label, view))

    # -- helpers for scripted scenarios ------------------------------------------------------------
    def deliver_all(self, limit_ms: int = 50) -> None:
        self.run_for(limit_ms)

    def leader_append(self, bid: int, value: str) -> int:
        """Append directly at a leader (a produce that arrived), returning the offset."""
        b = self.brokers[bid]
        appended = b.replica.append([value], self.now, acks=1)  # a script's write: min.insync.replicas aside
        if appended.error:
            raise AssertionError(f"broker {bid} refuses the scripted write of {value}: error {appended.error}")
        first = appended.first_offset
        self.checker.on_leader_append(bid, b.replica.leader_epoch, value)
        b.pending_acks.append((first, value))
        self._schedule_sync(b)
        self.log_event(f"leader {bid} appends {value} at offset {first} (epoch {b.replica.leader_epoch})")
        self._release_acks(b)
        self.run_for(10)
        return first

    def follower_fetch(self, bid: int, deliver_response: bool = True) -> None:
        """One synchronous fetch round trip from follower ``bid`` to its leader."""
        b = self.brokers[bid]
        r = b.replica
        req = r.next_fetch()
        if req is None:
            return
        leader = self.brokers[r.leader_id]
        decision, proposal = leader.replica.handle_fetch(req, self.now)
        if proposal is not None:
            err, st = self.controller.alter_partition(proposal)
            leader.replica.on_isr_change_answer(proposal, err, st, self.now)
            self.controller.drain_changes()
        self._release_acks(leader)
        self.run_for(10)  # deliver the acks
        if not deliver_response:
            self.log_event(f"broker {bid} fetched from offset {req.fetch_offset}; the response is lost")
            return
        batches = leader.log.read(decision.read_from, 10) if decision.read_from >= 0 else None
        resp = FetchResponse(
            decision.error, decision.high_watermark, decision.diverging, batches, leader.replica.leader_epoch
        )
        outcome = r.handle_fetch_response(resp)
        self.log_event(
            f"broker {bid} fetch from offset {req.fetch_offset} (last epoch {req.last_fetched_epoch}): "
            f"{outcome.value}, leo={b.log.log_end_offset} hw={r.high_watermark}"
        )
        self.checker.check()

    def apply_controller_now(self) -> None:
        """Deliver the controller's pending decisions to every live broker immediately."""
        self._trace_unclean()
        for _t, _p, st in self.controller.drain_changes():
            self.log_event(f"controller: leader={st.leader} epoch={st.leader_epoch} isr={sorted(st.isr)}")
            for bid in self._told(st):
                b = self.brokers[bid]
                if b.alive and not b.paused:
                    self._on_message(bid, CONTROLLER, ("state", st))
        self.checker.check()
