"""A host's cores: `epochlog up --cores N` (N brokers side by side, each one Python process) at N = 1 and 2.

  .venv/bin/python bench/multicore_bench.py [--rounds 3] [--scale 1.0] [--size 1024]

Both clusters are built by the code `epochlog up --cores N` runs (cli/host_cluster.py) and stay up
throughout; rounds alternate which one goes first. Two placements on this 2-core machine:
- pinned: every broker on core 0, this process (the load: one confluent-kafka producer, then one consumer)
  on core 1. N = 2 has no more CPU than N = 1 here, so the figure is per-core efficiency: the brokers' CPU
  seconds per GB, which must not get worse with N = 2 (the cost of splitting one core's work in two).
- free: nothing pinned; N = 2 can use both cores but shares them with the load.
Throughput counts acknowledged (produced) and received (consumed) messages only. The idle CPU of each broker
and of the controller (heartbeats, metadata) is measured too: the fixed cost a process adds, which the
model for 16- and 64-core hosts (printed at the end, and in docs/architecture.md) is built from.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import produce_consume
from confluent_kafka import Consumer, TopicPartition
from proc_cpu import cpu_seconds as _cpu_s
from results_file import write_results
from rich.console import Console
from rich.table import Table

from epochlog.cli.host_cluster import host_cluster
from epochlog.server.cluster.local import LocalCluster, free_base_port

PARTITIONS = 4  # two per broker at N = 2: both brokers lead as much


def _pids(lc: LocalCluster) -> dict[str, int]:
    return {n.name: n.proc.pid for n in lc.nodes.values() if n.proc is not None}


def _brokers_cpu(lc: LocalCluster) -> float:
    return sum(_cpu_s(n.proc.pid) for n in lc.nodes.values() if n.role == "broker" and n.proc is not None)


def _pin(lc: LocalCluster, cores: set[int]) -> None:
    for pid in _pids(lc).values():
        os.sched_setaffinity(pid, cores)


def consume_all(bootstrap: str, topic: str, count: int) -> dict[str, Any]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"mc-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "fetch.max.bytes": 52_428_800,
                  "max.partition.fetch.bytes": 10_485_760})  # fmt: skip
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = 0
    t0 = time.perf_counter()
    deadline = t0 + 120
    while got < count and time.perf_counter() < deadline:
        got += sum(1 for m in c.consume(10000, 1.0) if not m.error())
    dt = time.perf_counter() - t0
    c.close()
    return {"msgs": got, "seconds": dt, "msgs_per_s": got / dt}


def one_run(lc: LocalCluster, size: int, count: int) -> dict[str, Any]:
    """Produce ``count`` messages of ``size`` bytes over PARTITIONS partitions (acks=all), then read them all."""
    cpu0, client0 = _brokers_cpu(lc), time.process_time()
    p = produce_consume.produce_throughput(lc.bootstrap, size, count, "all", PARTITIONS)
    cpu1, client1 = _brokers_cpu(lc), time.process_time()
    c = consume_all(lc.bootstrap, p["topic"], p["msgs"])
    cpu2, client2 = _brokers_cpu(lc), time.process_time()
    gb_p, gb_c = p["msgs"] * size / 1e9, c["msgs"] * size / 1e9
    return {
        "produce_msgs_per_s": p["msgs_per_s"], "produce_mb_per_s": p["mb_per_s"], "produce_errors": p["errors"],
        "consume_msgs_per_s": c["msgs_per_s"], "consume_mb_per_s": c["msgs_per_s"] * size / 1e6,
        "consumed": c["msgs"], "acked": p["msgs"],
        "broker_cpu_s_per_gb_produced": (cpu1 - cpu0) / gb_p if gb_p else None,
        "broker_cpu_s_per_gb_consumed": (cpu2 - cpu1) / gb_c if gb_c else None,
        "client_cpu_s_per_gb_produced": (client1 - client0) / gb_p if gb_p else None,
        "client_cpu_s_per_gb_consumed": (client2 - client1) / gb_c if gb_c else None,
    }  # fmt: skip


def idle_cost(lc: LocalCluster, seconds: float) -> dict[str, float]:
    """Each process's CPU share while no client does anything: its fixed cost (heartbeats, metadata)."""
    pids = _pids(lc)
    before = {name: _cpu_s(pid) for name, pid in pids.items()}
    time.sleep(seconds)
    return {name: (_cpu_s(pid) - before[name]) / seconds for name, pid in pids.items()}


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def model(
    per_core_gb_s: float, efficiency_2: float, broker_idle: float, ctrl_base: float, ctrl_per_broker: float
) -> list[dict[str, float]]:
    """Aggregate produce capacity of a host of ``cores`` cores running one broker per core: each broker's
    core gives ``per_core_gb_s`` less its idle share, times the per-core efficiency measured at N = 2 (the
    cost of splitting the work among processes, assumed to hold at N); the controller's heartbeat load grows
    with the brokers it serves. The client side, NIC and disk are left out: they are the host's, not ours."""
    out = []
    for cores in (1, 2, 16, 64):
        eff = 1.0 if cores == 1 else efficiency_2
        agg = cores * per_core_gb_s * (1 - broker_idle) * eff
        out.append({"cores": cores, "aggregate_gb_s": agg, "per_core_gb_s": agg / cores,
                    "controller_core_share": ctrl_base + ctrl_per_broker * (cores - 1)})  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0, help="message counts x this")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--idle-seconds", type=float, default=10.0)
    args = ap.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        sys.exit("needs at least 2 cores (one for the brokers, one for the load)")
    count = int((600_000 if args.size >= 1024 else 2_000_000) * args.scale)
    root = Path(tempfile.mkdtemp(prefix="epochlog-multicore-"))
    clusters: dict[int, LocalCluster] = {}
    results: dict[str, Any] = {"size": args.size, "count": count, "partitions": PARTITIONS,
                               "cpus": os.cpu_count(), "runs": {}}  # fmt: skip
    try:
        for n in (1, 2):
            clusters[n] = host_cluster(n, None, root / f"n{n}", free_base_port(n), None, [])
            clusters[n].start()
        time.sleep(2)  # registrations and the first heartbeats settle before anything is measured
        results["idle"] = {str(n): idle_cost(lc, args.idle_seconds) for n, lc in clusters.items()}
        all_cores = os.sched_getaffinity(0)
        for placement in ("pinned", "free"):
            for rnd in range(args.rounds):
                order = (1, 2) if rnd % 2 == 0 else (2, 1)
                for n in order:
                    lc = clusters[n]
                    if placement == "pinned":
                        _pin(lc, {0})
                        os.sched_setaffinity(0, {1})
                    else:
                        _pin(lc, all_cores)
                        os.sched_setaffinity(0, all_cores)
                    run = one_run(lc, args.size, count)
                    results["runs"].setdefault(placement, {}).setdefault(str(n), []).append(run)
                    print(f"{placement} round {rnd + 1} N={n}: produce {run['produce_mb_per_s']:.0f} MB/s, "
                          f"consume {run['consume_mb_per_s']:.0f} MB/s, broker CPU "
                          f"{run['broker_cpu_s_per_gb_produced']:.2f} s/GB produced", flush=True)  # fmt: skip
        os.sched_setaffinity(0, all_cores)
    finally:
        for lc in clusters.values():
            lc.stop()
        shutil.rmtree(root, ignore_errors=True)
    show(results)


def summarize(results: dict[str, Any]) -> dict[str, Any]:
    s: dict[str, Any] = {}
    for placement, by_n in results["runs"].items():
        row: dict[str, Any] = {}
        for n, runs in by_n.items():
            row[n] = {k: _median(runs, k) for k in runs[0] if isinstance(runs[0][k], (int, float))}
        for key in ("produce_mb_per_s", "consume_mb_per_s"):
            row[f"{key}_ratio_2_to_1"] = row["2"][key] / row["1"][key]
        for key in ("broker_cpu_s_per_gb_produced", "broker_cpu_s_per_gb_consumed"):
            row[f"{key}_ratio_2_to_1"] = row["2"][key] / row["1"][key]
        s[placement] = row
    idle = results["idle"]
    broker_idle = statistics.mean(v for k, v in idle["2"].items() if k.startswith("broker"))
    # The controller's own ticking is there with any number of brokers; what one more broker adds is the
    # difference (its heartbeats and registrations), which is what grows with the host's cores.
    ctrl_per_broker = max(0.0, idle["2"]["controller"] - idle["1"]["controller"])
    s["controller_idle_core_share_base"] = idle["1"]["controller"]
    pinned = s["pinned"]
    per_core = 1 / pinned["1"]["broker_cpu_s_per_gb_produced"]
    eff = 1 / pinned["broker_cpu_s_per_gb_produced_ratio_2_to_1"]
    s["model"] = model(per_core, eff, broker_idle, s["controller_idle_core_share_base"], ctrl_per_broker)
    s["broker_idle_core_share"] = broker_idle
    s["controller_idle_core_share_per_broker"] = ctrl_per_broker
    return s


def show(results: dict[str, Any]) -> None:
    results["summary"] = summarize(results)
    s = results["summary"]
    t = Table(title=f"epochlog up --cores N, {results['size']} B messages, {PARTITIONS} partitions, acks=all "
              f"(medians of {len(results['runs']['pinned']['1'])} alternating rounds)")  # fmt: skip
    for col in ("placement", "N", "produce MB/s", "consume MB/s", "broker CPU s/GB produced",
                "broker CPU s/GB consumed", "client CPU s/GB produced"):  # fmt: skip
        t.add_column(col, justify="right")
    for placement in ("pinned", "free"):
        for n in ("1", "2"):
            r = s[placement][n]
            t.add_row(placement, n, f"{r['produce_mb_per_s']:.0f}", f"{r['consume_mb_per_s']:.0f}",
                      f"{r['broker_cpu_s_per_gb_produced']:.2f}", f"{r['broker_cpu_s_per_gb_consumed']:.2f}",
                      f"{r['client_cpu_s_per_gb_produced']:.2f}")  # fmt: skip
        r = s[placement]
        t.add_row(placement, "2 / 1", f"{r['produce_mb_per_s_ratio_2_to_1']:.2f}x",
                  f"{r['consume_mb_per_s_ratio_2_to_1']:.2f}x",
                  f"{r['broker_cpu_s_per_gb_produced_ratio_2_to_1']:.2f}x",
                  f"{r['broker_cpu_s_per_gb_consumed_ratio_2_to_1']:.2f}x", "")  # fmt: skip
    console = Console()
    console.print(t)
    m = Table(title="model: one broker per core (pinned per-core figures, idle costs measured above)")
    for col in ("cores", "produce GB/s", "per core GB/s", "controller core share (heartbeats)"):
        m.add_column(col, justify="right")
    for row in s["model"]:
        m.add_row(str(row["cores"]), f"{row['aggregate_gb_s']:.2f}", f"{row['per_core_gb_s']:.3f}",
                  f"{row['controller_core_share']:.3f}")  # fmt: skip
    console.print(m)
    console.print(f"idle: a broker {s['broker_idle_core_share']:.4f} of a core; the controller "
                  f"{s['controller_idle_core_share_base']:.4f} of a core serving one broker, "
                  f"{s['controller_idle_core_share_per_broker']:.4f} more per broker")  # fmt: skip
    write_results("multicore", results)


if __name__ == "__main__":
    main()
