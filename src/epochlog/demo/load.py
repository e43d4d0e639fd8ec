"""The demo's live load and its faults: the event producer, the leader watcher and the kill schedule."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any

from epochlog.demo.events import PageViewGenerator
from epochlog.demo.model import DemoResult, LeaderChange, PartitionState, TimelineEvent

log = logging.getLogger("epochlog.demo")


class EventProducer(threading.Thread):
    """Produces page views at a steady rate with acks=all and idempotence, recording every acknowledgement."""

    def __init__(self, bootstrap: str, topic: str, gen: PageViewGenerator, rate: int, flush_timeout: float = 60.0):
        super().__init__(name="demo-producer", daemon=True)
        from confluent_kafka import Producer

        self.topic, self.gen, self.rate, self.flush_timeout = topic, gen, rate, flush_timeout
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "client.id": "epochlog-demo-producer",
                "logger": logging.getLogger("epochlog.demo.librdkafka"),
            }
        )
        self._stop_event = threading.Event()
        self.t0 = 0.0
        self.acked: dict[tuple[int, int], str] = {}
        self.acked_per_second: Counter[int] = Counter()
        self.latencies: list[tuple[float, float]] = []  # (ack time since t0, latency ms)
        self.errors: Counter[str] = Counter()
        self.failed_ids: list[str] = []
        self.produced = 0
        self.unflushed = 0
        self.started = threading.Event()

    def _on_delivery(self, event_id: str, sent: float, err: Any, msg: Any) -> None:
        now = time.monotonic()
        if err is not None:
            self.errors[str(err.name() if hasattr(err, "name") else err)] += 1
            self.failed_ids.append(event_id)
            return
        self.acked[(msg.partition(), msg.offset())] = event_id
        self.acked_per_second[int(now - self.t0)] += 1
        self.latencies.append((now - self.t0, (now - sent) * 1000.0))

    def run(self) -> None:
        self.t0 = time.monotonic()
        self.started.set()
        p = self.producer
        pending: tuple[str, bytes, bytes] | None = None
        try:
            while not self._stop_event.is_set():
                due = int((time.monotonic() - self.t0) * self.rate)
                # Bounded: at most one second's worth per turn, so a stall does not become a burst loop.
                for _ in range(min(due - self.produced, self.rate)):
                    if pending is None:
                        pending = self.gen.next()
                    event_id, key, value = pending
                    cb = partial(self._on_delivery, event_id, time.monotonic())
                    try:
                        p.produce(self.topic, value, key=key, on_delivery=cb)
                    except BufferError:  # the local queue is full: serve callbacks, try this event again
                        p.poll(0.05)
                        break
                    pending = None
                    self.produced += 1
                p.poll(0.01)
        finally:
            self.unflushed = p.flush(self.flush_timeout)

    def finish(self, timeout: float) -> None:
        self._stop_event.set()
        self.join(timeout)

    @property
    def acked_count(self) -> int:
        return len(self.acked)


# -- leaders, epochs and ISRs -------------------------------------------------------------------------


class LeaderWatcher(threading.Thread):
    """Polls Metadata for each partition's leader and leader epoch (and the ISR), recording every change."""

    def __init__(self, bootstrap: str, topic: str, clock: Callable[[], float], interval: float = 0.25):
        super().__init__(name="demo-leader-watcher", daemon=True)
        from epochlog.client.admin import admin_client
        from epochlog.client.epochs import LeaderEpochClient

        self.topic, self.clock, self.interval = topic, clock, interval
        self.client = LeaderEpochClient(bootstrap, timeout=2.0)
        self.admin = admin_client(
            {"bootstrap.servers": bootstrap, "logger": logging.getLogger("epochlog.demo.librdkafka")}
        )
        self.state: dict[int, PartitionState] = {}
        self.changes: list[LeaderChange] = []
        self.events: list[TimelineEvent] = []
        self.errors = 0
        self._stop_event = threading.Event()
        self._lock = threading.Lock()
        self._poll_lock = threading.Lock()

    def poll_once(self) -> dict[int, PartitionState]:
        with self._poll_lock:  # the fault thread polls too, and a Connection is not thread-safe
            return self._poll()

    def _poll(self) -> dict[int, PartitionState]:
        md = self.client.metadata([self.topic])
        isrs: dict[int, tuple[int, ...]] = {}
        try:
            t = self.admin.list_topics(self.topic, timeout=2).topics.get(self.topic)
            if t is not None and t.error is None:
                isrs = {p: tuple(sorted(pm.isrs)) for p, pm in t.partitions.items()}
        except Exception as e:  # ISR is extra information; leaders and epochs are what matters
            log.debug("list_topics failed: %s", e)
        out = {}
        for (topic, p), pl in md.items():
            if topic == self.topic and p >= 0 and pl.error == 0:
                prev = self.state.get(p)
                isr = isrs.get(p, prev.isr if prev else ())
                out[p] = PartitionState(pl.leader_id, pl.leader_epoch, isr)
        return out

    def _update(self, new: dict[int, PartitionState]) -> None:
        now = self.clock()
        with self._lock:
            for p, s in sorted(new.items()):
                old = self.state.get(p)
                if old is None:
                    continue
                if (old.leader, old.epoch) != (s.leader, s.epoch):
                    self.changes.append(LeaderChange(now, p, old.leader, old.epoch, s.leader, s.epoch))
                    self.events.append(
                        TimelineEvent(
                            now,
                            "leader",
                            f"{self.topic}-{p}: leader broker-{old.leader} (epoch {old.epoch}) -> "
                            f"broker-{s.leader} (epoch {s.epoch})",
                        )
                    )
                if old.isr != s.isr and s.isr:
                    self.events.append(
                        TimelineEvent(now, "isr", f"{self.topic}-{p}: ISR {list(old.isr)} -> {list(s.isr)}")
                    )
            self.state.update(new)

    def snapshot(self) -> dict[int, PartitionState]:
        with self._lock:
            return dict(self.state)

    def refresh(self) -> dict[int, PartitionState]:
        """One synchronous poll (used before the kill so the leader is current)."""
        self._update(self.poll_once())
        return self.snapshot()

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            try:
                self._update(self.poll_once())
            except Exception as e:
                self.errors += 1
                log.debug("metadata poll failed: %s", e)

    def stop(self, timeout: float = 10.0) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout)
        self.client.close()


# -- the fault ------------------------------------------------------------------------------------------


class FaultSchedule(threading.Thread):
    """kill -9 of partition 0's leader and the active controller at kill_t and their restart at restart_t
    (seconds since the producer started), on its own thread so that nothing the main loop waits for (Spark
    calls) can delay them."""

    def __init__(
        self,
        cluster: Any,
        watcher: LeaderWatcher,
        res: DemoResult,
        event: Callable[..., None],
        clock: Callable[[], float],
        kill_t: float,
        restart_t: float,
    ):
        super().__init__(name="demo-faults", daemon=True)
        self.cluster, self.watcher, self.res, self.event, self.clock = cluster, watcher, res, event, clock
        self.kill_t, self.restart_t = kill_t, restart_t
        self.killed: str | None = None
        self.killed_names: set[str] = set()
        self._finish = threading.Event()

    def _wait_until(self, t: float) -> bool:
        """Sleep until clock() >= t; False when finish() came first."""
        while self.clock() < t:
            if self._finish.wait(min(0.05, max(t - self.clock(), 0.001))):
                return False
        return True

    def _kill(self) -> None:
        """kill -9 of partition 0's leader and of the active controller at the same moment: both the data
        path and the control path must fail over, and the partition's new leader needs the new controller."""
        state = self.watcher.refresh()
        p0 = state[0]
        controller = self.cluster.active_controller(timeout=10)
        self.killed = f"broker-{p0.leader}"
        self.killed_names = {self.killed, controller.name}
        self.res.killed_broker, self.res.killed_epoch = p0.leader, p0.epoch
        self.res.killed_controller = controller.name
        self.cluster.kill9(controller.name)
        self.cluster.kill9(self.killed)
        self.res.kill_t = self.clock()
        self.event(
            "kill",
            f"kill -9 {self.killed}, leader of {self.watcher.topic}-0 in epoch {p0.epoch}, "
            f"and of {controller.name}, the active controller",
        )
        self._watch_controller(controller.node_id)

    def _watch_controller(self, old: int) -> None:
        from epochlog.client.quorum import leader_of

        ports = [n.port for n in self.cluster.controller_nodes() if n.alive]
        while not self._finish.is_set() and self.clock() - (self.res.kill_t or 0) < 30:
            leader = leader_of(ports)
            if leader not in (-1, old):
                # The quorum names its leader by node id; the demo names nodes as their log files do.
                name = next((n.name for n in self.cluster.controller_nodes() if n.node_id == leader), str(leader))
                self.res.new_controller = name
                self.res.controller_failover_seconds = self.clock() - (self.res.kill_t or 0)
                self.event(
                    "controller",
                    f"{name} is active, {self.res.controller_failover_seconds:.2f} s after the kill",
                )
                return
            self._finish.wait(0.05)

    def _restart(self) -> None:
        assert self.killed is not None
        self.res.restart_t = self.clock()
        for name in sorted(self.killed_names):
            try:
                self.cluster.start_node(name, timeout=60)
                self.event(
                    "restart",
                    f"{name} restarted (listening after {self.clock() - self.res.restart_t:.1f} s)",
                    at=self.res.restart_t,
                )
            except (RuntimeError, TimeoutError) as e:
                self.res.problems.append(f"{name} did not restart: {e}")
                self.event("problem", f"{name} did not restart: {e}")

    def run(self) -> None:
        try:
            if self._wait_until(self.kill_t):
                self._kill()
                if self._wait_until(self.restart_t):
                    self._restart()
        except Exception as e:
            self.res.problems.append(f"the fault schedule failed: {e!r}")
            log.exception("fault schedule")

    def cancel(self, timeout: float = 70.0) -> None:
        """Stop the schedule without restarting anything (clean-up: the cluster is stopped next)."""
        self._finish.set()
        if self.is_alive():
            self.join(timeout)

    def finish(self, timeout: float) -> None:
        """End the schedule; a killed broker that was not restarted yet is restarted now."""
        self._finish.set()
        self.join(timeout)
        if self.killed is not None and self.res.restart_t is None and not self.is_alive():
            self._restart()
