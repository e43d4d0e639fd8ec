"""`epochlog chaos`'s run: the cluster, the workload under the nemesis, the final heal and settle, the final
read, the checkers and the trace checker; and the JSON result.

Everything started here is stopped in run_chaos's ``finally`` in reverse order: the nemesis, the clients, the
watcher, then the cluster's processes (by their pids, through LocalCluster) and the proxies.
"""

from __future__ import annotations

import logging
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from epochlog.chaos.checkers import (
    KINDS,
    Anomaly,
    Verdict,
    check_availability,
    check_groups,
    check_queue,
    check_txn,
)
from epochlog.chaos.cluster import UNSAFE_TRUNCATION, ChaosCluster
from epochlog.chaos.disks import NEMESES as DISK_NEMESES
from epochlog.chaos.disks import NodeDisks, why_not
from epochlog.chaos.history import History
from epochlog.chaos.nemesis import Nemesis, Watcher
from epochlog.chaos.netns import NetnsUnavailable, choose_backend
from epochlog.chaos.workloads import QUIET, GroupMembers, LiveConsumer, QueueProducer, TxnProducer, final_read
from epochlog.server.cluster.local import fresh_data_dir

log = logging.getLogger("epochlog.chaos")

WORKLOADS = ("queue", "txn", "groups")
BUILT_WORKLOADS = ("queue", "txn", "groups")
UNSAFE = ("high-watermark-truncation",)
TOPICS = {"queue": "chaos-queue", "txn": "chaos-txn"}


class ChaosError(Exception):
    """The run could not be carried out (as opposed to: it ran and found anomalies)."""


@dataclass
class ChaosOptions:
    duration: float = 60.0
    workloads: list[str] = field(default_factory=lambda: ["queue"])
    nemeses: list[str] = field(default_factory=lambda: ["kill", "pause", "partition", "kip101", "controller", "leader"])
    seed: int | None = None
    settings: dict[str, str] = field(default_factory=dict)
    controllers: int = 3
    brokers: int = 3
    partitions: int = 4
    producers: int = 2
    consumers: int = 2
    rate: float = 50.0  # sends per second per producer
    txn_rate: float = 5.0  # transactions per second per transactional producer
    unsafe: list[str] = field(default_factory=list)
    data_dir: Path | None = None
    keep_data: bool = False
    settle_timeout: float = 60.0
    partition_backend: str = "auto"  # auto, netns or proxy (chaos/netns.py)
    fault_interval: tuple[float, float] = (2.0, 5.0)  # seconds between one fault's heal and the next, at random
    fault_duration: tuple[float, float] = (2.0, 7.0)  # seconds each fault lasts, at random
    delivery_timeout: float = 120.0  # the queue producers' message.timeout.ms, in seconds (Kafka's default)


@dataclass
class ChaosResult:
    opts: ChaosOptions
    seed: int
    history: History
    verdict: Verdict
    txn_history: History | None = None
    group_history: History | None = None
    group_members_joined: int = 0
    group_errors: dict[str, int] = field(default_factory=dict)
    skipped: list[dict[str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    trace_checks: int = 0
    trace_events: int = 0
    trace_violations: list[str] = field(default_factory=list)
    data_dir: str = ""
    data_kept: bool = False
    wall_s: float = 0.0
    nemesis_errors: list[str] = field(default_factory=list)
    producers_replaced: int = 0
    partition_backend: str = "proxy"
    partition_backend_why: str = ""

    @property
    def ok(self) -> bool:
        return self.verdict.anomalies == 0 and not self.problems

    def as_json(self) -> dict[str, Any]:
        v = self.verdict
        return {
            "verdict": "valid" if self.ok else ("anomalies" if v.anomalies else "unknown"),
            "seed": self.seed,
            "duration_s": self.opts.duration,
            "workloads": self.opts.workloads,
            "nemeses": self.opts.nemeses,
            "unsafe": self.opts.unsafe,
            "cluster": {
                "controllers": self.opts.controllers,
                "brokers": self.opts.brokers,
                "partitions": self.opts.partitions,
                "settings": self.opts.settings,
            },
            "partition_backend": {
                "asked": self.opts.partition_backend,
                "used": self.partition_backend,
                "why": self.partition_backend_why,
            },
            "skipped": self.skipped,
            "acked": v.acked,
            "attempted": v.attempted,
            "failed": v.failed,
            "unknown_outcome": v.unknown,
            "read_final": v.read_final,
            "final_read_complete": self.history.final_complete,
            "anomalies": v.anomalies,
            **{k: v.counts[k] for k in KINDS},
            "txn": self._txn_json(),
            "groups": self._groups_json(),
            "failed_write_share": round(v.failed_write_share, 6),
            "longest_unavailable_s": round(v.longest_unavailable_s, 3),
            "longest_unavailable_from_s": round(v.longest_unavailable_from_s, 3),
            # Each isolation of a leader: seconds until all its partitions took writes again (faults[].led_resume_s),
            # against issue 24's bound, broker.session.timeout.ms + 2 s.
            **_leader_isolations_json(v.leader_isolation_resume_s, self.opts.settings),
            "leader_isolation_before_heal": v.leader_isolation_before_heal,
            "fault_interval_s": list(self.opts.fault_interval),
            "fault_duration_s": list(self.opts.fault_duration),
            "delivery_timeout_s": self.opts.delivery_timeout,
            "faults": [f.as_json() for f in self.history.faults],
            "examples": [a.as_json() for a in v.examples],
            "trace": {"checks": self.trace_checks, "events": self.trace_events, "violations": self.trace_violations},
            "problems": self.problems,
            "notes": self.history.notes,
            "nemesis_errors": self.nemesis_errors,
            "producers_replaced": self.producers_replaced,
            "data_dir": self.data_dir if self.data_kept else None,
            "wall_s": round(self.wall_s, 1),
        }

    def _txn_json(self) -> dict[str, Any] | None:
        h = self.txn_history
        if h is None:
            return None
        by = {o: sum(1 for t in h.txns if t.outcome == o) for o in ("committed", "aborted", "unknown")}
        return {**by, "read_final": len(h.final), "final_read_complete": h.final_complete}

    def _groups_json(self) -> dict[str, Any] | None:
        h = self.group_history
        if h is None:
            return None
        reads = sum(len(r) for r in h.reads.values())
        return {
            "members_joined": self.group_members_joined,
            "reads": reads,
            "commits": len(h.commits),
            "errors": self.group_errors,
        }


def _leader_isolations_json(times: list[float | None], settings: dict[str, str]) -> dict[str, Any]:
    try:
        bound = int(settings.get("broker.session.timeout.ms", "9000")) / 1000 + 2
    except ValueError:  # the brokers refused it at start; the run did not get this far
        bound = 11.0
    done = [t for t in times if t is not None]
    return {
        "leader_isolation_resume_s": [None if t is None else round(t, 3) for t in times],
        "leader_isolation_resume_max_s": round(max(done), 3) if done else None,
        "leader_isolation_unrecovered": len(times) - len(done),
        "leader_isolation_bound_s": bound,
        "leader_isolation_over_bound": sum(1 for t in done if t > bound) + len(times) - len(done),
    }


def skipped_parts(opts: ChaosOptions, backend: str = "proxy", backend_why: str = "") -> list[dict[str, str]]:
    """What was asked for or exists but did not run, and why: the output says so rather than staying silent."""
    out = [
        {
            "what": f"workload {w}",
            "why": "not built yet" if w not in BUILT_WORKLOADS else f"not asked for (--workload {w})",
        }
        for w in WORKLOADS
        if w not in opts.workloads or w not in BUILT_WORKLOADS
    ]
    no_fuse = why_not() if any(n in opts.nemeses for n in DISK_NEMESES) else None
    for n in DISK_NEMESES:
        if n not in opts.nemeses:
            out.append({"what": f"nemesis {n}", "why": f"not asked for (--nemesis {n})"})
        elif no_fuse is not None:
            out.append({"what": f"nemesis {n}", "why": f"no FUSE file system under the data directories: {no_fuse}"})
    if backend == "proxy" and ({"partition", "kip101"} & set(opts.nemeses)):
        how = "TCP proxies this command controls between nodes"
        out.append({"what": "partition by network namespaces", "why": f"{backend_why}; partitions use {how}"})
    return out


def _judge_traces(res: ChaosResult, data_dir: Path) -> None:
    from epochlog.trace.sink import check_directory

    try:
        checker, _stream = check_directory(data_dir)
    except Exception as e:
        res.problems.append(f"the traces could not be checked: {e!r}")
        return
    res.trace_checks, res.trace_events = checker.checks, checker.events
    res.trace_violations = [f"{v.invariant}: {v.detail}" for v in checker.violations]
    for tv in checker.violations:
        res.verdict.add(Anomaly("trace_violation", -1, -1, f"{tv.invariant}: {tv.detail}", []))
    if not checker.events:
        res.problems.append("the brokers and controllers traced nothing")


def _workload_line(opts: ChaosOptions, topics: list[str]) -> str:
    rf = min(3, opts.brokers)
    parts = []
    if "queue" in opts.workloads:
        parts.append(f"queue: {opts.producers} idempotent acks=all producers at {opts.rate:g}/s each")
    if "txn" in opts.workloads:
        parts.append(f"txn: {opts.producers} transactional producers at {opts.txn_rate:g} transactions/s each")
    if "groups" in opts.workloads:
        parts.append("groups: 3 members of one group reading the queue topic, one replaced every ~8 s")
    return (
        f"workloads {'; '.join(parts)}; topics {', '.join(topics)} ({opts.partitions} partitions, RF {rf}, "
        f"min.insync.replicas=2), {opts.consumers} consumers each reading every partition; nemeses "
        f"{', '.join(opts.nemeses)} for {opts.duration:g} s"
    )


def _progress_line(history: History, txn_history: History | None) -> str:
    acked = sum(1 for s in history.sends if s.ok)
    line = f"  {history.now():5.1f} s: sent {len(history.sends):,}, acked {acked:,}"
    if txn_history is not None:
        done = sum(1 for t in txn_history.txns if t.outcome == "committed")
        line += f"; transactions {len(txn_history.txns):,}, committed {done:,}"
    last = history.faults[-1] if history.faults else None
    return line + (f"; last fault {last.kind} {last.target} at {last.at_s:.1f} s" if last else "")


def _wait_consumers_caught_up(consumers: list[LiveConsumer], histories: list[History | None], timeout: float) -> None:
    """Until the live consumers stop receiving records (they have read what the log holds), at most timeout."""
    deadline = time.monotonic() + timeout
    last, still = -1, 0
    while time.monotonic() < deadline:
        n = sum(len(h.reads.get(c.name, [])) for h in histories if h is not None for c in consumers)
        still = still + 1 if n == last else 0
        if still >= 6:
            return
        last = n
        time.sleep(0.5)


def run_chaos(opts: ChaosOptions, say: Callable[[str], None]) -> ChaosResult:
    wall0 = time.monotonic()
    seed = opts.seed if opts.seed is not None else random.randrange(1, 2**31)
    unknown = [w for w in opts.workloads if w not in WORKLOADS]
    if unknown:
        raise ChaosError(f"unknown workload(s) {', '.join(unknown)}: choose from {', '.join(WORKLOADS)}")
    if "groups" in opts.workloads and "queue" not in opts.workloads:
        opts.workloads = ["queue", *opts.workloads]  # the group reads what the queue workload writes
    if not any(w in BUILT_WORKLOADS for w in opts.workloads):
        raise ChaosError(f"none of the workloads {', '.join(opts.workloads)} is built yet (built: queue, txn)")
    bad = [u for u in opts.unsafe if u not in UNSAFE]
    if bad:
        raise ChaosError(f"unknown --unsafe {', '.join(bad)}: choose from {', '.join(UNSAFE)}")
    try:
        backend, backend_why = choose_backend(opts.partition_backend)
    except (ValueError, NetnsUnavailable) as e:
        raise ChaosError(str(e)) from None
    history = History()
    res = ChaosResult(opts, seed, history, Verdict(), skipped=skipped_parts(opts, backend, backend_why))
    res.partition_backend, res.partition_backend_why = backend, backend_why
    try:
        data_dir = fresh_data_dir(opts.data_dir, "epochlog-chaos-")
    except ValueError as e:
        raise ChaosError(str(e)) from None
    res.data_dir = str(data_dir)
    broker_settings = dict(opts.settings)
    if "high-watermark-truncation" in opts.unsafe:
        broker_settings.update(UNSAFE_TRUNCATION)
    # The controllers' session is the one the brokers' lease must not outlast: one setting for both.
    session = {k: v for k, v in opts.settings.items() if k == "broker.session.timeout.ms"}
    cluster = ChaosCluster(
        data_dir, opts.controllers, opts.brokers, broker_settings, session, partition_backend=backend
    )
    (data_dir / "logs").mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(data_dir / "logs" / "chaos.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("epochlog")
    old_level, old_propagate = root.level, root.propagate
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    root.propagate = False  # librdkafka's errors under faults are expected: to chaos.log, not the terminal
    nemesis: Nemesis | None = None
    watcher: Watcher | None = None
    disks: NodeDisks | None = None
    want_disks = any(n in opts.nemeses for n in DISK_NEMESES) and why_not() is None
    producers: list[QueueProducer] = []
    consumers: list[LiveConsumer] = []
    txn_producers: list[TxnProducer] = []
    txn_consumers: list[LiveConsumer] = []
    group: GroupMembers | None = None
    started = False
    try:
        links = "links between nodes through proxies" if backend == "proxy" else "each in its own network namespace"
        say(
            f"starting {opts.controllers} controllers + {opts.brokers} brokers, {links} "
            f"(data and logs in {data_dir}); seed {seed}"
        )
        started = True  # build() may make namespaces before it fails: the clean-up must run
        cluster.build()
        net = cluster.network
        if net is not None:
            stale = f"; removed a crashed run's {', '.join(net.cleaned_stale)}" if net.cleaned_stale else ""
            say(f"partitions by iptables in network namespaces {net.prefix}-*, subnet {net.subnet}{stale}")
        if want_disks:
            disks = NodeDisks(cluster)
            disks.mount()
            say("every node's data directory is under powerfs (unsynced writes kept in memory until fsync)")
        cluster.start()
        from epochlog.client.admin import admin_client, create_topic, wait_for_partitions

        admin = admin_client({"bootstrap.servers": cluster.bootstrap, **QUIET})
        topics = [topic for w, topic in TOPICS.items() if w in opts.workloads]
        for topic in topics:
            create_topic(admin, topic, opts.partitions, min(3, opts.brokers), {"min.insync.replicas": "2"})
            wait_for_partitions(admin, topic, opts.partitions, timeout=30)
        del admin  # its librdkafka handle would keep dialling the brokers until the end
        if not cluster.wait_healthy(topics, opts.partitions, 60):
            raise ChaosError("the cluster did not become healthy within 60 s of starting")
        history.t0 = time.monotonic()
        boot, parts = cluster.bootstrap, opts.partitions
        if "queue" in opts.workloads:
            q = TOPICS["queue"]
            consumers += [LiveConsumer(f"consumer-{i}", boot, q, parts, history) for i in range(1, opts.consumers + 1)]
            producers += [
                QueueProducer(f"producer-{i}", boot, q, parts, opts.rate, history, opts.delivery_timeout)
                for i in range(1, opts.producers + 1)
            ]
        if "txn" in opts.workloads:
            t = TOPICS["txn"]
            res.txn_history = txn_history = History(t0=history.t0)
            txn_consumers += [
                LiveConsumer(f"txn-consumer-{i}", boot, t, parts, txn_history) for i in range(1, opts.consumers + 1)
            ]
            txn_producers += [
                TxnProducer(f"txn-{i}", boot, t, parts, opts.txn_rate, txn_history, seed + i)
                for i in range(1, opts.producers + 1)
            ]
        if "groups" in opts.workloads:
            res.group_history = History(t0=history.t0)
            group = GroupMembers(boot, TOPICS["queue"], res.group_history, 3, 8.0, seed)
        watcher = Watcher(cluster, history, topics[:1])
        nemesis = Nemesis(
            cluster,
            history,
            opts.nemeses,
            topics,
            seed,
            until_s=opts.duration,
            interval_s=opts.fault_interval,
            duration_s=opts.fault_duration,
            disks=disks,
        )
        for c in [*consumers, *txn_consumers]:
            c.start()
        for qp in producers:
            qp.start()
        for tp in txn_producers:
            tp.start()
        if group is not None:
            group.start()
        watcher.start()
        nemesis.start()
        say(_workload_line(opts, topics))
        next_print = 10.0
        while history.now() < opts.duration:
            time.sleep(0.5)
            if history.now() >= next_print:
                next_print += 10.0
                say(_progress_line(history, res.txn_history))
        nemesis.stop()
        res.nemesis_errors = list(nemesis.errors)
        if disks is not None:
            disks.heal_all()
        restarted = cluster.heal_everything()
        history.note("final heal" + (f"; restarted {', '.join(restarted)}" if restarted else ""))
        say("healing every fault and letting the cluster settle")
        if not cluster.wait_healthy(topics, opts.partitions, opts.settle_timeout):
            res.problems.append(f"the cluster did not settle (every partition led, ISR full) {opts.settle_timeout:g} s")
        settle_until = history.now() + 3.0  # writes after the heal: the cluster must take them again
        while history.now() < settle_until:
            time.sleep(0.25)
        flush_s = opts.delivery_timeout + 10  # every send has an outcome by then, acknowledged or timed out
        for p in producers:
            left = p.stop(flush_s)
            res.producers_replaced += p.replaced
            if left:
                res.problems.append(f"{p.name}: {left} sends had no outcome after {flush_s:g} s")
        for tp in txn_producers:
            tp.stop()
            res.producers_replaced += tp.replaced
        history.workload_end_s = history.now()
        _wait_consumers_caught_up([*consumers, *txn_consumers], [history, res.txn_history], 30)
        for c in [*consumers, *txn_consumers]:
            c.stop()
        if group is not None:
            group.stop()
            res.group_members_joined, res.group_errors = group.joined, dict(group.errors)
        say("final read of every partition from the beginning")
        for h, w in ((history, "queue"), (res.txn_history, "txn")):
            if h is not None and w in opts.workloads:
                h.final_complete = final_read(boot, TOPICS[w], parts, h, 120)
                if not h.final_complete:
                    res.problems.append(f"the final read of {TOPICS[w]} did not reach every end in 120 s: lost unknown")
    except ChaosError:
        raise
    except Exception as e:
        log.exception("the chaos run failed")
        raise ChaosError(f"{type(e).__name__}: {e}; data and logs kept in {data_dir}") from e
    finally:
        steps: list[tuple[str, Callable[[], Any]]] = []
        if nemesis is not None:
            steps.append(("nemesis", nemesis.stop))
        steps += [(p.name, partial(p.stop, 10.0)) for p in producers]
        steps += [(tp.name, tp.stop) for tp in txn_producers]
        steps += [(c.name, c.stop) for c in [*consumers, *txn_consumers]]
        if group is not None:
            steps.append(("group", group.stop))
        if watcher is not None:
            steps.append(("watcher", watcher.stop))
        if started:
            steps.append(("cluster", cluster.stop))
        if disks is not None:
            steps.append(("powerfs mounts", disks.unmount))  # after the processes that hold their files
        for what, step in steps:
            try:
                step()
            except BaseException as e:
                log.warning("stopping the %s failed: %r", what, e)
                if what == "cluster" and cluster.local is not None:
                    for node in cluster.local.nodes.values():
                        if node.alive and node.proc is not None:
                            node.proc.kill()
        handler.close()
        root.removeHandler(handler)
        root.setLevel(old_level)
        root.propagate = old_propagate
    res.verdict = Verdict()
    if "queue" in opts.workloads:
        check_queue(history, res.verdict)
        res.verdict.read_final = len(history.final)
    check_availability(history, res.verdict)
    if res.txn_history is not None:
        check_txn(res.txn_history, res.verdict)
    if res.group_history is not None:
        check_groups(res.group_history, res.verdict, history.final)
    _judge_traces(res, data_dir)
    res.wall_s = time.monotonic() - wall0
    res.data_kept = opts.keep_data or opts.data_dir is not None or not res.ok
    if not res.data_kept:
        shutil.rmtree(data_dir, ignore_errors=True)
    return res
