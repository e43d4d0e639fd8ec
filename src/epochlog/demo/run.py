"""The demo's orchestration: cluster, topic, producer, Spark query, leader kill, catch-up and the check.

Everything that is started here is stopped in run_demo's `finally`, in reverse order: the producer and
the watcher threads, the streaming query, Spark (including its JVM, when the demo launched it) and the
cluster's processes (by their own pids, through LocalCluster).
"""

from __future__ import annotations

import logging
import shutil
import signal
import threading
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from epochlog.demo.events import PageViewGenerator
from epochlog.demo.load import EventProducer, FaultSchedule, LeaderWatcher
from epochlog.demo.model import BROKER_SETTINGS, CONTROLLER_SETTINGS, DemoError, DemoOptions, DemoResult, TimelineEvent
from epochlog.demo.spark_job import SparkJob, quiet_log4j, read_aggregates, read_output, stop_spark
from epochlog.demo.txns import TxnCounter, add_metrics_ports, metrics_ports
from epochlog.demo.verify import compare, end_offsets, read_log
from epochlog.server.cluster.local import fresh_data_dir

log = logging.getLogger("epochlog.demo")


def _free_base_port() -> int:
    from epochlog.server.cluster.local import free_base_port

    try:
        return free_base_port(3, controllers=3)
    except RuntimeError as e:
        raise DemoError(str(e)) from None


def _judge_traces(res: DemoResult, data_dir: Path) -> None:
    """The trace checker over what the stopped processes traced: the simulator's invariants on this real run."""
    from epochlog.trace.sink import check_directory

    try:
        checker, _stream = check_directory(data_dir)
    except Exception as e:  # a report without the trace verdict beats no report
        res.problems.append(f"the traces could not be checked: {e!r}")
        return
    res.trace_checks, res.trace_events = checker.checks, checker.events
    res.trace_violations = [f"{v.invariant}: {v.detail}" for v in checker.violations]
    if checker.violations:
        res.problems.append(f"the trace checker found {len(checker.violations)} invariant violation(s); see {data_dir}")
    elif not checker.events:
        res.problems.append("the brokers and controllers traced nothing")


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    i = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[i]


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
    try:
        data_dir = fresh_data_dir(opts.data_dir, "epochlog-demo-")
    except ValueError as e:
        raise DemoError(str(e)) from None
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
    txns: TxnCounter | None = None
    t_start = [0.0]

    def clock() -> float:
        return time.monotonic() - t_start[0] if t_start[0] else 0.0

    def event(kind: str, text: str, at: float | None = None) -> None:
        res.timeline.append(TimelineEvent(clock() if at is None else at, kind, text))
        log.info("%s: %s", kind, text)

    prog = Progress(console, opts.duration)
    try:
        prog.phase(f"starting a local cluster: 3 controllers (a quorum) + 3 brokers (data and logs in {data_dir})")
        cluster = LocalCluster(
            data_dir,
            brokers=3,
            base_port=_free_base_port(),
            broker_settings=dict(BROKER_SETTINGS),
            controller_settings=dict(CONTROLLER_SETTINGS),
            controllers=3,
        )
        res.brokers, res.controllers = cluster.brokers, cluster.controllers
        brokers = {n.node_id: n.config for n in cluster.nodes.values() if n.role == "broker"}
        ports = metrics_ports(cluster.base_port, sorted(brokers))
        add_metrics_ports(brokers, ports)
        txns = TxnCounter(ports)
        cluster.start(timeout=60)
        bootstrap = cluster.bootstrap
        admin = admin_client({"bootstrap.servers": bootstrap, "logger": logging.getLogger("epochlog.demo.librdkafka")})
        create_topic(admin, opts.topic, opts.partitions, 3, {"min.insync.replicas": "2"})
        wait_for_partitions(admin, opts.topic, opts.partitions, timeout=30)
        res.eos_topic = f"{opts.topic}-eos"
        create_topic(admin, res.eos_topic, opts.partitions, 3, {"min.insync.replicas": "2"})
        wait_for_partitions(admin, res.eos_topic, opts.partitions, timeout=30)
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
            "starting Spark (local[2], 4 attempts per task) and two streaming queries reading with read_committed: "
            f"epochlog -> JSON -> Parquet, and epochlog -> the exactly-once sink -> {res.eos_topic} (one Kafka "
            f"transaction per task and micro-batch), every {opts.trigger_seconds:g} s"
        )
        from pyspark import SparkContext

        from epochlog.spark.pipeline import JVM_FAST_START, local_session

        launched_jvm = SparkContext._active_spark_context is None and SparkContext._gateway is None
        log4j = quiet_log4j(data_dir / "log4j2.properties", logs / "spark.log")
        sigint = signal.getsignal(signal.SIGINT)
        spark = local_session(
            "epochlog-demo",
            master="local[2,4]",
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
        job.start_copy(opts.trigger_seconds, res.eos_topic)
        for q in (job.query, job.eos_query):
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and q.isActive:
                if str(q.status.get("message", "")).startswith("Waiting"):
                    break
                time.sleep(0.2)
            if not q.isActive:
                raise DemoError(f"the streaming query failed to start: {q.exception()}")

        gen = PageViewGenerator(run_id=uuid.uuid4().hex[:6], seed=opts.seed)
        producer = EventProducer(bootstrap, opts.topic, gen, opts.rate)
        producer.start()
        if not producer.started.wait(10):
            raise DemoError("the producer thread did not start")
        t_start[0] = producer.t0
        watcher.start()
        prog.phase(
            f"producing page views at {opts.rate}/s for {opts.duration:g} s (acks=all, idempotent); "
            f"kill -9 of partition 0's leader and the active controller at {opts.duration * opts.kill_at:.0f} s, "
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
                stopped = [q for q in (job.query, job.eos_query) if q is not None and not q.isActive]
                if stopped:
                    exc = stopped[0].exception()
                    res.problems.append(f"the streaming query stopped: {exc}")
                    event("problem", f"the streaming query stopped: {str(exc)[:300]}")
                    break
                txns.poll()
                # Read after everything slow in this loop: the fault schedule names its victims before it kills.
                killed = faults.killed_names
                dead = [n.name for n in cluster.nodes.values() if not n.alive and n.name not in killed]
                if dead:
                    res.problems.append(f"{', '.join(dead)} exited on its own; see {logs}")
                    event("problem", f"{', '.join(dead)} exited on its own")
                    break
                leaders = ", ".join(
                    f"p{p} broker-{st.leader} e{st.epoch}" for p, st in sorted(watcher.snapshot().items())
                )
                if res.kill_t is not None:
                    leaders += f"  (broker-{res.killed_broker} and {res.killed_controller} killed at"
                    leaders += f" {res.kill_t:.1f} s"
                    leaders += f", restarted at {res.restart_t:.1f} s)" if res.restart_t is not None else ")"
                prog.update(
                    now,
                    [
                        ("producer", f"sent {producer.produced:,}  acked {producer.acked_count:,}"),
                        ("spark", f"{job.rows_written():,} rows in Parquet, {len(job.batches)} micro-batches"),
                        (
                            "txns",
                            f"{txns.total('commit'):,} committed, {txns.total('abort'):,} aborted "
                            f"(sink into {res.eos_topic})",
                        ),
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
        while time.monotonic() < deadline and job.query.isActive and job.eos_query.isActive:
            txns.poll()
            if all(
                all(done.get(p, 0) >= off for p, off in target.items())
                for done in (job.committed_offsets(), job.committed_offsets(job.eos_query))
            ):
                res.caught_up = True
                break
            time.sleep(0.5)
        if not res.caught_up:
            if job.query.isActive and job.eos_query.isActive:
                res.problems.append(f"the queries did not reach {target} within {opts.catch_up_timeout:g} s")
            elif not any("query stopped" in p for p in res.problems):
                q = job.query if not job.query.isActive else job.eos_query
                res.problems.append(f"the streaming query stopped: {q.exception()}")
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

        # The exactly-once copy, as a read_committed consumer sees it; read_uncommitted also sees the rows of
        # transactions that were aborted (task attempts that failed, e.g. while a leader was down).
        eos_rows = read_log(bootstrap, res.eos_topic, opts.partitions, isolation="read_committed")
        ec = compare(acked, eos_rows)
        res.eos_rows, res.eos_lost, res.eos_duplicated = ec.rows, ec.lost, ec.duplicated
        res.eos_examples = ec.lost_examples + ec.duplicate_examples
        res.eos_uncommitted_rows = len(read_log(bootstrap, res.eos_topic, opts.partitions))
        txns.poll()
        res.txn_committed, res.txn_aborted = txns.total("commit"), txns.total("abort")
        if ec.lost or ec.duplicated:
            res.problems.append(
                f"the exactly-once copy in {res.eos_topic} misses {ec.lost} acknowledged records and has "
                f"{ec.duplicated} duplicates (read_committed)"
            )
        if res.txn_committed <= 0:
            res.problems.append("the brokers counted no committed transaction")

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
        if cluster is not None:
            _judge_traces(res, data_dir)
        res.wall_seconds = time.monotonic() - wall0
        handler.close()
        root_epochlog.removeHandler(handler)
        root_epochlog.setLevel(old_level)
        root_epochlog.propagate = old_propagate
        keep = opts.keep_data or opts.data_dir is not None or not res.ok
        res.data_kept = keep
        if not keep:
            shutil.rmtree(data_dir, ignore_errors=True)
