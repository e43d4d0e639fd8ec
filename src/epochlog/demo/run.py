"""The demo's orchestration: cluster, topic, producer, Spark query, leader kill, catch-up and the check.

Everything that is started here is stopped in run_demo's `finally`, in reverse order: the producer and
the watcher threads, the streaming query, Spark (including its JVM, when the demo launched it) and the
cluster's processes (by their own pids, through LocalCluster).
"""

from __future__ import annotations

import json
import logging
import shutil
import signal
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from epochlog.demo.events import EVENT_DDL, PageViewGenerator

log = logging.getLogger("epochlog.demo")

BROKER_SETTINGS = {"replica.lag.time.max.ms": "5000", "group.initial.rebalance.delay.ms": "0"}
# Kafka's automatic preferred-leader rebalance, checked every 5 s instead of 300 s: once the killed broker is
# back in the ISR it takes its partitions back (a second, clean leader change in a new epoch).
CONTROLLER_SETTINGS = {"auto.leader.rebalance.enable": "true", "leader.imbalance.check.interval.seconds": "5"}


@dataclass
class DemoOptions:
    data_dir: Path | None = None
    duration: float = 60.0
    rate: int = 1000  # events per second
    report: Path = Path("epochlog-demo-report.html")
    keep_data: bool = False
    topic: str = "page-views"
    partitions: int = 3
    trigger_seconds: float = 3.0
    kill_at: float = 1 / 3  # fraction of the producing time
    restart_at: float = 2 / 3
    catch_up_timeout: float = 120.0
    seed: int = 7


@dataclass
class TimelineEvent:
    t: float  # seconds since the producer started
    kind: str  # kill, restart, leader, isr, phase, problem
    text: str


@dataclass
class PartitionState:
    leader: int
    epoch: int
    isr: tuple[int, ...] = ()


@dataclass
class LeaderChange:
    t: float
    partition: int
    old_leader: int
    old_epoch: int
    new_leader: int
    new_epoch: int


@dataclass
class BatchInfo:
    batch_id: int
    t: float  # when the batch finished writing, seconds since the producer started
    rows: int
    seconds: float


@dataclass
class DemoResult:
    topic: str = ""
    partitions: int = 0
    brokers: int = 3
    data_dir: str = ""
    data_kept: bool = False
    report_path: str = ""
    rate: int = 0
    duration: float = 0.0
    wall_seconds: float = 0.0
    produced: int = 0
    acked: int = 0
    produce_errors: dict[str, int] = field(default_factory=dict)
    unflushed: int = 0
    acked_per_second: list[int] = field(default_factory=list)
    ack_latency_ms: dict[str, float] = field(default_factory=dict)
    max_latency_at: float = 0.0
    in_log: int = -1
    log_lost: int = -1
    log_duplicated: int = -1
    in_output: int = 0
    output_batches: int = 0
    aggregate_rows: int = 0
    aggregate_total: int = 0
    top_countries: list[tuple[str, int]] = field(default_factory=list)
    lost: int = -1
    duplicated: int = -1
    mismatched: int = 0
    unacked_in_output: int = 0
    lost_examples: list[str] = field(default_factory=list)
    duplicate_examples: list[str] = field(default_factory=list)
    kill_t: float | None = None
    killed_broker: int | None = None
    killed_epoch: int | None = None
    failover_seconds: float | None = None
    restart_t: float | None = None
    leader_changes: list[LeaderChange] = field(default_factory=list)
    leaders_before: dict[int, tuple[int, int]] = field(default_factory=dict)
    leaders_after: dict[int, tuple[int, int]] = field(default_factory=dict)
    timeline: list[TimelineEvent] = field(default_factory=list)
    batches: list[BatchInfo] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    caught_up: bool = False

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.duplicated == 0 and self.mismatched == 0 and not self.problems


class DemoError(Exception):
    """The demo could not run (as opposed to: it ran and found a problem)."""


# -- small helpers ------------------------------------------------------------------------------------


def _free_base_port() -> int:
    from epochlog.server.cluster.local import free_base_port

    try:
        return free_base_port(3)
    except RuntimeError as e:
        raise DemoError(str(e)) from None


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    i = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[i]


# -- the producer -------------------------------------------------------------------------------------


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
    """kill -9 of partition 0's leader at kill_t and its restart at restart_t (seconds since the producer
    started), on its own thread so that nothing the main loop waits for (Spark calls) can delay them."""

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
        self._finish = threading.Event()

    def _wait_until(self, t: float) -> bool:
        """Sleep until clock() >= t; False when finish() came first."""
        while self.clock() < t:
            if self._finish.wait(min(0.05, max(t - self.clock(), 0.001))):
                return False
        return True

    def _kill(self) -> None:
        state = self.watcher.refresh()
        p0 = state[0]
        self.killed = f"broker-{p0.leader}"
        self.res.killed_broker, self.res.killed_epoch = p0.leader, p0.epoch
        self.cluster.kill9(self.killed)
        self.res.kill_t = self.clock()
        self.event("kill", f"kill -9 {self.killed}, leader of {self.watcher.topic}-0 in epoch {p0.epoch}")

    def _restart(self) -> None:
        assert self.killed is not None
        self.res.restart_t = self.clock()
        try:
            self.cluster.start_node(self.killed, timeout=60)
            self.event(
                "restart",
                f"{self.killed} restarted (listening after {self.clock() - self.res.restart_t:.1f} s)",
                at=self.res.restart_t,
            )
        except (RuntimeError, TimeoutError) as e:
            self.res.problems.append(f"{self.killed} did not restart: {e}")
            self.event("problem", f"{self.killed} did not restart: {e}")

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


# -- Spark ----------------------------------------------------------------------------------------------


class SparkJob:
    """The streaming query: epochlog source -> parse JSON -> raw events and per-window counts in Parquet.

    foreachBatch writes each micro-batch into directories named by its batch id with mode overwrite, so
    a micro-batch that Spark replays (after a failure between the write and the commit) replaces its own
    output instead of adding to it.
    """

    def __init__(self, spark: Any, bootstrap: str, topic: str, out_dir: Path, clock: Callable[[], float]):
        self.spark, self.bootstrap, self.topic, self.clock = spark, bootstrap, topic, clock
        self.raw = out_dir / "raw"
        self.aggregates = out_dir / "country_counts_10s"
        self.checkpoint = out_dir / "checkpoint"
        self.batches: dict[int, BatchInfo] = {}
        self.query: Any = None
        self._lock = threading.Lock()
        self._logged = False

    def _write_batch(self, df: Any, batch_id: int) -> None:
        from pyspark.sql import functions as F

        started = time.monotonic()
        df = df.persist()
        try:
            rows = df.count()
            if rows:
                name = f"batch={batch_id:06d}"
                df.write.mode("overwrite").parquet(str(self.raw / name))
                (
                    df.groupBy(F.window(F.timestamp_millis("ts"), "10 seconds").alias("w"), "country")
                    .agg(F.count("*").alias("views"), F.countDistinct("user").alias("users"))
                    .select(
                        F.col("w.start").alias("window_start"),
                        F.col("w.end").alias("window_end"),
                        "country",
                        "views",
                        "users",
                    )
                    .coalesce(1)
                    .write.mode("overwrite")
                    .parquet(str(self.aggregates / name))
                )
        finally:
            df.unpersist()
        with self._lock:
            self.batches[batch_id] = BatchInfo(batch_id, self.clock(), rows, time.monotonic() - started)

    def start(self, trigger_seconds: float) -> Any:
        from pyspark.sql import functions as F

        from epochlog.spark.pipeline import read_stream

        src = read_stream(
            self.spark,
            self.bootstrap,
            self.topic,
            startingOffsets="earliest",
            failOnDataLoss="true",
            # librdkafka in the Spark workers prints every refused connection to the killed broker on stderr;
            # those are expected here, and a real failure fails the query, which the demo reports.
            **{"kafka.log_level": "2"},
        )
        events = src.select(
            "partition",
            "offset",
            F.col("timestamp").alias("log_time"),
            F.from_json(F.col("value").cast("string"), EVENT_DDL).alias("e"),
        ).select("partition", "offset", "log_time", "e.*")
        self.query = (
            events.writeStream.queryName("epochlog_demo")
            .option("checkpointLocation", str(self.checkpoint))
            .foreachBatch(self._write_batch)
            .trigger(processingTime=f"{trigger_seconds:g} seconds")
            .start()
        )
        return self.query

    def rows_written(self) -> int:
        with self._lock:
            return sum(b.rows for b in self.batches.values())

    def batch_list(self) -> list[BatchInfo]:
        with self._lock:
            return sorted(self.batches.values(), key=lambda b: b.batch_id)

    def committed_offsets(self) -> dict[int, int]:
        """Next offset per partition of the last completed micro-batch, from the query's progress."""
        prog = self.query.lastProgress if self.query is not None else None
        if not prog:
            return {}
        out: dict[int, int] = {}
        for s in prog.get("sources", []):
            end = s.get("endOffset")
            if isinstance(end, str):
                try:
                    end = json.loads(end)
                except ValueError:
                    continue
            for p, pos in (end or {}).get(self.topic, {}).items():
                out[int(p)] = int(pos["offset"] if isinstance(pos, dict) else pos)
        return out

    def stop(self, timeout: float = 60.0) -> None:
        if self.query is None:
            return
        try:
            # Stopping while foreachBatch runs interrupts the Python callback, and Spark 4 then dies with a
            # StackOverflowError matching the long Py4J error text; stopping between triggers is clean.
            deadline = time.monotonic() + min(timeout, 30.0)
            while self.query.isActive and self.query.status.get("isTriggerActive") and time.monotonic() < deadline:
                time.sleep(0.1)
            for prog in [] if self._logged else self.query.recentProgress or []:  # where each batch's time went
                log.info(
                    "micro-batch %s: %s rows, durations %s",
                    prog.get("batchId"),
                    prog.get("numInputRows"),
                    prog.get("durationMs"),
                )
            self._logged = True
            if self.query.isActive:
                self.query.stop()
            self.query.awaitTermination(timeout)
        except Exception as e:  # a failed query raises here again; its exception was recorded already
            log.debug("query stop: %s", e)


def stop_spark(spark: Any, launched_jvm: bool) -> None:
    """Stop the session; when the demo launched the JVM, end that process too (by its pid, via Popen)."""
    try:
        spark.stop()
    except Exception as e:
        log.warning("spark.stop failed: %s", e)
    if not launched_jvm:
        return
    from pyspark import SparkContext

    gw = SparkContext._gateway
    proc = getattr(gw, "proc", None)
    try:
        if gw is not None:
            gw.shutdown()
    except Exception as e:
        log.debug("gateway shutdown: %s", e)
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except Exception:
            proc.kill()
            proc.wait(10)
    SparkContext._gateway = None
    SparkContext._jvm = None


def _quiet_log4j(path: Path, log_file: Path) -> Path:
    path.write_text(
        "rootLogger.level = warn\n"
        "rootLogger.appenderRef.file.ref = file\n"
        "appender.file.type = File\n"
        "appender.file.name = file\n"
        f"appender.file.fileName = {log_file}\n"
        "appender.file.layout.type = PatternLayout\n"
        "appender.file.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n\n"
    )
    return path


# -- checking the output --------------------------------------------------------------------------------


def read_output(raw: Path) -> list[tuple[int, int, str]]:
    """(partition, offset, id) of every row in the raw Parquet output."""
    import pyarrow.dataset as ds

    if not raw.exists() or not any(raw.iterdir()):
        return []
    table = ds.dataset(str(raw), format="parquet", partitioning="hive").to_table(columns=["partition", "offset", "id"])
    return list(
        zip(
            table.column("partition").to_pylist(),
            table.column("offset").to_pylist(),
            table.column("id").to_pylist(),
            strict=True,
        )
    )


def read_aggregates(path: Path) -> tuple[int, int, list[tuple[str, int]]]:
    """(rows, total views, views per country, most first) of the per-window aggregates."""
    import pyarrow.dataset as ds

    if not path.exists() or not any(path.iterdir()):
        return 0, 0, []
    t = ds.dataset(str(path), format="parquet", partitioning="hive").to_table(columns=["country", "views"])
    per: Counter[str] = Counter()
    for c, v in zip(t.column("country").to_pylist(), t.column("views").to_pylist(), strict=True):
        per[c] += v
    return t.num_rows, sum(per.values()), per.most_common()


def _consumer(bootstrap: str) -> Any:
    from confluent_kafka import Consumer

    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"epochlog-demo-check-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
            "logger": logging.getLogger("epochlog.demo.librdkafka"),
        }
    )


def _watermarks(c: Any, topic: str, partitions: int, timeout: float = 30.0) -> dict[int, int]:
    """High watermarks, asked through a consumer (which refreshes its metadata when leaders move)."""
    from confluent_kafka import KafkaException, TopicPartition

    out: dict[int, int] = {}
    deadline = time.monotonic() + timeout
    for p in range(partitions):
        while True:
            try:
                high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
                if high >= 0:
                    out[p] = high
                    break
            except KafkaException as e:
                log.info("watermarks of %s-%s: %s", topic, p, e)
            if time.monotonic() > deadline:
                raise DemoError(f"no high watermark for {topic}-{p} within {timeout:g} s")
            time.sleep(0.5)
    return out


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    c = _consumer(bootstrap)
    try:
        return _watermarks(c, topic, partitions)
    finally:
        c.close()


def read_log(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> list[tuple[int, int, str]]:
    """(partition, offset, id) of every record in the topic, read straight from the brokers."""
    from confluent_kafka import TopicPartition

    c = _consumer(bootstrap)
    out: list[tuple[int, int, str]] = []
    try:
        ends = _watermarks(c, topic, partitions)
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions) if ends[p] > 0])
        pos = dict.fromkeys(range(partitions), 0)
        deadline = time.monotonic() + timeout
        while any(pos[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            for m in c.consume(5000, 0.5):
                if m.error():
                    continue
                try:
                    eid = json.loads(m.value())["id"]
                except (ValueError, KeyError, TypeError):
                    eid = f"<unparsable at {m.partition()}:{m.offset()}>"
                out.append((m.partition(), m.offset(), eid))
                pos[m.partition()] = m.offset() + 1
    finally:
        c.close()
    return out


@dataclass
class Comparison:
    rows: int
    lost: int
    duplicated: int
    mismatched: int
    not_acked: int
    lost_examples: list[str]
    duplicate_examples: list[str]


def compare(acked: dict[tuple[int, int], str], rows: list[tuple[int, int, str]]) -> Comparison:
    """Acknowledged records against what was found, by event id and by (partition, offset).

    lost: acknowledged ids not found; duplicated: rows beyond the first for an id; mismatched: an
    acknowledged (partition, offset) that holds a different event (the offset was reused: truncation);
    not_acked: found ids the producer never saw acknowledged (allowed after a failed delivery).
    """
    seen: Counter[str] = Counter(r[2] for r in rows)
    acked_ids = set(acked.values())
    lost_ids = sorted(acked_ids - seen.keys())
    dups = {i: n for i, n in seen.items() if n > 1}
    at = {(p, o): i for p, o, i in rows}
    mismatched = sum(1 for po, i in acked.items() if po in at and at[po] != i)
    id_to_po = {i: po for po, i in acked.items()}
    return Comparison(
        rows=len(rows),
        lost=len(lost_ids),
        duplicated=sum(n - 1 for n in dups.values()),
        mismatched=mismatched,
        not_acked=sum(1 for i in seen if i not in acked_ids),
        lost_examples=[f"{i} (acked at {id_to_po[i][0]}:{id_to_po[i][1]})" for i in lost_ids[:5]],
        duplicate_examples=[f"{i} x{n}" for i, n in list(dups.items())[:5]],
    )


# -- the run --------------------------------------------------------------------------------------------


class Progress:
    """Progress while the demo runs: a live block of a few lines on a terminal, a line every few seconds
    otherwise (pipes, CI, the test)."""

    def __init__(self, console: Any, total: float, every: float = 5.0):
        self.console, self.total, self.every = console, total, every
        self.t0 = time.monotonic()
        self._last = -1e9
        self._live: Any = None

    def phase(self, text: str) -> None:
        self.console.print(f"[bold cyan][{time.monotonic() - self.t0:5.1f}s][/] {text}", highlight=False)

    def __enter__(self) -> Progress:
        if self.console.is_terminal:
            from rich.live import Live

            self._live = Live(console=self.console, refresh_per_second=4, transient=False)
            self._live.start()
        return self

    def update(self, elapsed: float, lines: list[tuple[str, str]]) -> None:
        """lines: (label, text) pairs, e.g. ("producer", "sent 1,000 acked 990")."""
        if self._live is not None:
            from rich.console import Group
            from rich.progress_bar import ProgressBar
            from rich.table import Table

            head = Table.grid(padding=(0, 1))
            head.add_row(
                "[bold]streaming[/]",
                ProgressBar(total=self.total, completed=min(elapsed, self.total), width=30),
                f"{elapsed:5.1f} / {self.total:g} s",
            )
            body = Table.grid(padding=(0, 1))
            for label, text in lines:
                body.add_row(f"  [dim]{label:>9}[/]", text)
            self._live.update(Group(head, body))
        elif elapsed - self._last >= self.every:
            self._last = elapsed
            status = "  ".join(f"{label}: {text}" for label, text in lines)
            self.console.print(f"  [{elapsed:5.1f}s/{self.total:g}s] {status}", highlight=False, soft_wrap=True)

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


def run_demo(opts: DemoOptions, console: Any) -> DemoResult:
    import importlib.util

    from epochlog.client.admin import admin_client, create_topic, wait_for_partitions
    from epochlog.server.cluster.local import LocalCluster

    missing = [m for m in ("pyspark", "pyarrow") if importlib.util.find_spec(m) is None]
    if missing:
        raise DemoError(f"{' and '.join(missing)} not installed: pip install -e '.[spark]' (or bash scripts/setup)")
    wall0 = time.monotonic()
    res = DemoResult(topic=opts.topic, partitions=opts.partitions, rate=opts.rate, duration=opts.duration)
    if opts.data_dir is not None:
        data_dir = Path(opts.data_dir).resolve()
        if data_dir.exists() and any(data_dir.iterdir()):
            raise DemoError(f"--data-dir {data_dir} is not empty; give a new or empty directory")
        data_dir.mkdir(parents=True, exist_ok=True)
    else:
        data_dir = Path(tempfile.mkdtemp(prefix="epochlog-demo-")).resolve()
    res.data_dir = str(data_dir)
    logs = data_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(logs / "demo.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root_epochlog = logging.getLogger("epochlog")
    root_epochlog.addHandler(handler)
    old_level, old_propagate = root_epochlog.level, root_epochlog.propagate
    root_epochlog.setLevel(logging.INFO)
    root_epochlog.propagate = False  # librdkafka's connection noise and Spark planning logs go to demo.log

    cluster: Any = None
    spark: Any = None
    launched_jvm = False
    job: SparkJob | None = None
    producer: EventProducer | None = None
    watcher: LeaderWatcher | None = None
    faults: FaultSchedule | None = None
    t_start = [0.0]

    def clock() -> float:
        return time.monotonic() - t_start[0] if t_start[0] else 0.0

    def event(kind: str, text: str, at: float | None = None) -> None:
        res.timeline.append(TimelineEvent(clock() if at is None else at, kind, text))
        log.info("%s: %s", kind, text)

    prog = Progress(console, opts.duration)
    try:
        prog.phase(f"starting a local cluster: controller + 3 brokers (data and logs in {data_dir})")
        cluster = LocalCluster(
            data_dir,
            brokers=3,
            base_port=_free_base_port(),
            broker_settings=dict(BROKER_SETTINGS),
            controller_settings=dict(CONTROLLER_SETTINGS),
        )
        cluster.start(timeout=60)
        bootstrap = cluster.bootstrap
        admin = admin_client({"bootstrap.servers": bootstrap, "logger": logging.getLogger("epochlog.demo.librdkafka")})
        create_topic(admin, opts.topic, opts.partitions, 3, {"min.insync.replicas": "2"})
        wait_for_partitions(admin, opts.topic, opts.partitions, timeout=30)
        watcher = LeaderWatcher(bootstrap, opts.topic, clock)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            state = watcher.refresh()
            if len(state) == opts.partitions and all(s.leader >= 0 for s in state.values()):
                break
            time.sleep(0.2)
        else:
            raise DemoError(f"partitions of {opts.topic} have no leaders after 30 s")
        res.leaders_before = {p: (s.leader, s.epoch) for p, s in watcher.snapshot().items()}
        leaders = ", ".join(f"p{p}: broker-{s.leader} epoch {s.epoch}" for p, s in sorted(watcher.snapshot().items()))
        prog.phase(
            f"cluster up at {bootstrap}; topic {opts.topic}: {opts.partitions} partitions, replication factor 3, "
            f"min.insync.replicas=2 ({leaders})"
        )

        prog.phase(
            "starting Spark (local[2]) and the streaming query: epochlog -> JSON -> Parquet every "
            f"{opts.trigger_seconds:g} s"
        )
        from pyspark import SparkContext

        from epochlog.spark.pipeline import JVM_FAST_START, local_session

        launched_jvm = SparkContext._active_spark_context is None and SparkContext._gateway is None
        log4j = _quiet_log4j(data_dir / "log4j2.properties", logs / "spark.log")
        sigint = signal.getsignal(signal.SIGINT)
        spark = local_session(
            "epochlog-demo",
            jvm_options=f"{JVM_FAST_START} -Dlog4j2.configurationFile=file:{log4j}",
            extra={"spark.ui.showConsoleProgress": "false"},
        )
        # PySpark replaces the SIGINT handler with one that cancels every job and raises KeyboardInterrupt each
        # time; a second Ctrl-C would then cut the clean-up below short. Put the caller's handler back.
        if threading.current_thread() is threading.main_thread() and sigint is not None:
            signal.signal(signal.SIGINT, sigint)
        spark.sparkContext.setLogLevel("ERROR")
        job = SparkJob(spark, bootstrap, opts.topic, data_dir / "spark", clock)
        job.start(opts.trigger_seconds)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and job.query.isActive:
            if str(job.query.status.get("message", "")).startswith("Waiting"):
                break
            time.sleep(0.2)
        if not job.query.isActive:
            raise DemoError(f"the streaming query failed to start: {job.query.exception()}")

        gen = PageViewGenerator(run_id=uuid.uuid4().hex[:6], seed=opts.seed)
        producer = EventProducer(bootstrap, opts.topic, gen, opts.rate)
        producer.start()
        if not producer.started.wait(10):
            raise DemoError("the producer thread did not start")
        t_start[0] = producer.t0
        watcher.start()
        prog.phase(
            f"producing page views at {opts.rate}/s for {opts.duration:g} s (acks=all, idempotent); "
            f"kill -9 of partition 0's leader at {opts.duration * opts.kill_at:.0f} s, "
            f"restart at {opts.duration * opts.restart_at:.0f} s"
        )

        faults = FaultSchedule(
            cluster, watcher, res, event, clock, opts.duration * opts.kill_at, opts.duration * opts.restart_at
        )
        faults.start()
        with prog:
            while clock() < opts.duration:
                time.sleep(0.25)
                now = clock()
                killed = faults.killed
                if job.query is not None and not job.query.isActive:
                    exc = job.query.exception()
                    res.problems.append(f"the streaming query stopped: {exc}")
                    event("problem", f"the streaming query stopped: {str(exc)[:300]}")
                    break
                dead = [n.name for n in cluster.nodes.values() if not n.alive and n.name != killed]
                if dead:
                    res.problems.append(f"{', '.join(dead)} exited on its own; see {logs}")
                    event("problem", f"{', '.join(dead)} exited on its own")
                    break
                leaders = ", ".join(
                    f"p{p} broker-{st.leader} e{st.epoch}" for p, st in sorted(watcher.snapshot().items())
                )
                if res.kill_t is not None:
                    leaders += f"  (broker-{res.killed_broker} killed at {res.kill_t:.1f} s"
                    leaders += f", restarted at {res.restart_t:.1f} s)" if res.restart_t is not None else ")"
                prog.update(
                    now,
                    [
                        ("producer", f"sent {producer.produced:,}  acked {producer.acked_count:,}"),
                        ("spark", f"{job.rows_written():,} rows in Parquet, {len(job.batches)} micro-batches"),
                        ("leaders", leaders),
                    ],
                )

        prog.phase("stopping the producer and waiting for every acknowledgement")
        producer.finish(timeout=90)
        if producer.is_alive():
            res.problems.append("the producer did not finish flushing within 90 s")
        res.unflushed = producer.unflushed
        faults.finish(timeout=90)  # restarts the killed broker now if the run ended before its time

        target = end_offsets(bootstrap, opts.topic, opts.partitions)
        for (p, o), _ in producer.acked.items():  # the log's end is at least past every acknowledged record
            if o + 1 > target.get(p, 0):
                target[p] = o + 1
        prog.phase(f"letting the query catch up to the end of the log {target}")
        deadline = time.monotonic() + opts.catch_up_timeout
        while time.monotonic() < deadline and job.query.isActive:
            done = job.committed_offsets()
            if all(done.get(p, 0) >= off for p, off in target.items()):
                res.caught_up = True
                break
            time.sleep(0.5)
        if not res.caught_up:
            if job.query.isActive:
                res.problems.append(f"the query did not reach {target} within {opts.catch_up_timeout:g} s")
            elif not any("query stopped" in p for p in res.problems):
                res.problems.append(f"the streaming query stopped: {job.query.exception()}")
        event("phase", "query caught up" if res.caught_up else "query did not catch up")
        job.stop()

        prog.phase("checking: acknowledged records against the log and the Parquet output")
        # The producer thread has ended: its counters are final.
        res.produced = producer.produced
        res.acked = producer.acked_count
        res.produce_errors = dict(producer.errors)
        last = max(producer.acked_per_second, default=-1)
        res.acked_per_second = [producer.acked_per_second.get(s, 0) for s in range(last + 1)]
        lat = sorted(v for _, v in producer.latencies)
        res.ack_latency_ms = {
            "p50": _percentile(lat, 0.5),
            "p99": _percentile(lat, 0.99),
            "max": lat[-1] if lat else 0.0,
        }
        if producer.latencies:
            res.max_latency_at = max(producer.latencies, key=lambda x: x[1])[0]
        acked = dict(producer.acked)

        log_rows = read_log(bootstrap, opts.topic, opts.partitions)
        lc = compare(acked, log_rows)
        res.in_log, res.log_lost, res.log_duplicated = lc.rows, lc.lost, lc.duplicated
        if lc.lost or lc.duplicated:
            res.problems.append(
                f"the log itself (read back with a consumer) misses {lc.lost} acknowledged records and has "
                f"{lc.duplicated} duplicates: a broker-side problem; see {logs}"
            )
        if lc.mismatched:
            res.problems.append(f"{lc.mismatched} acknowledged offsets in the log hold a different event")

        out_rows = read_output(job.raw)
        oc = compare(acked, out_rows)
        res.in_output, res.lost, res.duplicated, res.mismatched = oc.rows, oc.lost, oc.duplicated, oc.mismatched
        res.unacked_in_output = oc.not_acked
        res.lost_examples, res.duplicate_examples = oc.lost_examples, oc.duplicate_examples
        res.batches = job.batch_list()
        res.output_batches = sum(1 for b in res.batches if b.rows)
        res.aggregate_rows, res.aggregate_total, res.top_countries = read_aggregates(job.aggregates)
        if res.aggregate_total != res.in_output:
            res.problems.append(
                f"the per-window counts add up to {res.aggregate_total:,}, the raw output has {res.in_output:,} rows"
            )
        res.leaders_after = {p: (s.leader, s.epoch) for p, s in watcher.refresh().items()}
        changes = list(watcher.changes)
        res.leader_changes = changes
        if res.kill_t is not None:
            after = [c for c in changes if c.partition == 0 and c.t >= res.kill_t]
            if after:
                res.failover_seconds = after[0].t - res.kill_t
            else:
                res.problems.append(f"no new leader for {opts.topic}-0 was seen after the kill")
        res.timeline = sorted(res.timeline + watcher.events, key=lambda e: e.t)
        return res
    except DemoError as e:
        res.problems.append(str(e))
        raise DemoError(f"{e}; data and logs kept in {data_dir}") from e
    except Exception as e:
        log.exception("the demo failed")
        res.problems.append(repr(e))
        raise DemoError(f"{type(e).__name__}: {e}; data and logs kept in {data_dir}") from e
    finally:
        # Each step on its own: a failure (or a late Ctrl-C) in one must not leave the cluster running.
        steps: list[tuple[str, Callable[[], None]]] = []
        if producer is not None and producer.is_alive():
            steps.append(("producer", partial(producer.finish, 30)))
        if faults is not None:
            steps.append(("fault schedule", faults.cancel))
        if watcher is not None:
            steps.append(("leader watcher", watcher.stop))
        if job is not None:
            steps.append(("streaming query", job.stop))
        if spark is not None:
            steps.append(("Spark", partial(stop_spark, spark, launched_jvm)))
        if cluster is not None:
            steps.append(("cluster", cluster.stop))
        for what, step in steps:
            try:
                step()
            except BaseException as e:
                log.warning("stopping the %s failed: %r", what, e)
                if cluster is not None and what == "cluster":
                    for node in cluster.nodes.values():  # last resort, by pid
                        if node.alive and node.proc is not None:
                            node.proc.kill()
        res.wall_seconds = time.monotonic() - wall0
        handler.close()
        root_epochlog.removeHandler(handler)
        root_epochlog.setLevel(old_level)
        root_epochlog.propagate = old_propagate
        keep = opts.keep_data or opts.data_dir is not None or not res.ok
        res.data_kept = keep
        if not keep:
            shutil.rmtree(data_dir, ignore_errors=True)
