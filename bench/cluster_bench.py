"""Replication benchmarks: RF=3 acks=all throughput next to a single broker, and write unavailability
after kill -9 of a partition leader and after its controlled shutdown.

  .venv/bin/python bench/cluster_bench.py [--scale 1.0] [--rounds 3] [--pairs 3]

Prints a table and writes JSON to bench/results/. The RF=3 figure is reported as a ratio to the
single-broker figure, measured in pairs: each RF=3 run right after a single-broker run of the same case,
both servers up throughout (this 2-core machine is shared and absolute numbers drift); the table gives
the median ratio and every pair's.
Two producer configurations: librdkafka's default (idempotence off, requests pipelined) and the
idempotent producer (one request in flight per partition). Each row also gives the CPU time every
process spent per MB written, read from /proc, which drifts far less than throughput does.
All processes are real: `epochlog up` for the single broker, `epochlog controller` + 3 `epochlog
broker` for the cluster, all on 127.0.0.1 and all stopped by pid at the end.
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import produce_consume
from brokers import start as start_single
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from proc_cpu import cpu_seconds
from results_file import write_results
from rich.console import Console
from rich.table import Table
from tests.integration.cluster_helpers import leader_epoch, partition_info, wait_until

from epochlog.server.cluster.local import LocalCluster, free_base_port


def create(bootstrap: str, name: str, rf: int, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    cfg = {"min.insync.replicas": str(min(rf, 2))}
    admin.create_topics([NewTopic(name, partitions, rf, config=cfg)])[name].result(20)


# librdkafka's own default is enable.idempotence=false (up to a million requests in flight); its
# idempotent producer sends one ProduceRequest at a time per partition (confluentinc/librdkafka PR #4989).
PRODUCERS = {"default": False, "idempotent": True}
CASES = (("1KiB", 1024, 1), ("100B", 100, 1), ("1KiB x3 partitions", 1024, 3))


def produce_throughput(
    bootstrap: str, rf: int, size: int, count: int, partitions: int, idempotence: bool, pids: dict[str, int]
) -> dict[str, Any]:
    """acks=all, the same loop as bench/produce_consume.py, with each server process's CPU time per MB."""
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    client0 = time.process_time()
    out = produce_consume.produce_throughput(bootstrap, size, count, "all", partitions, rf, idempotence=idempotence)
    mb = count * size / 1e6
    out["cpu_ms_per_mb"] = {name: round((cpu_seconds(pid) - before[name]) / mb * 1000, 2) for name, pid in pids.items()}
    out["cpu_ms_per_mb"]["client"] = round((time.process_time() - client0) / mb * 1000, 2)
    return out


def throughput_pairs(
    single: tuple[str, dict[str, int]], rf3: tuple[str, dict[str, int]], n_1k: int, n_100: int, pairs: int
) -> dict[str, Any]:
    """Every case runs ``pairs`` times against the single broker and then the cluster, back to back, so
    that each RF=3 run has a single-broker run taken moments before it: the machine's state (what other
    tenants do, how much memory the host has taken back) drifts over minutes, and a ratio of two runs
    taken far apart measured that drift as much as replication."""
    out: dict[str, Any] = {}
    for producer, idem in PRODUCERS.items():
        for case, size, parts in CASES:
            count = n_1k if size == 1024 else n_100
            runs = []
            for _ in range(pairs):
                s = produce_throughput(single[0], 1, size, count, parts, idem, single[1])
                r = produce_throughput(rf3[0], 3, size, count, parts, idem, rf3[1])
                runs.append({"single": s, "rf3": r, "ratio": r["msgs_per_s"] / s["msgs_per_s"]})
            out.setdefault(producer, {})[case] = runs
    return out


RESUME_BOUND_S = 10.0  # Kafka's clients see a new leader within seconds; longer is a failed failover


class WritesDidNotResume(RuntimeError):
    pass


def unavailability(
    lc: LocalCluster, how: str, seconds: float = 8.0, resume_bound_s: float = RESUME_BOUND_S
) -> dict[str, Any]:
    """Produce one acks=all message per millisecond; stop the leader (kill -9 or SIGTERM) a third of the
    way in; report the longest stretch without an acknowledgement and the time from the stop to the
    first acknowledgement of a message sent after it."""
    bs = lc.bootstrap
    topic = f"fail-{uuid.uuid4().hex[:8]}"
    create(bs, topic, 3)
    leader, epoch0 = wait_until(lambda: leader_epoch(bs, topic), 10, "a leader")
    acks: list[float] = []
    sent_after: dict[bytes, float] = {}
    first_after: list[float] = []
    errors: list[str] = []
    stop_at: list[float] = []

    def cb(err: Any, msg: Any) -> None:
        now = time.monotonic()
        if err is not None:
            errors.append(str(err))
            return
        acks.append(now)
        if msg.value() in sent_after and not first_after:
            first_after.append(now)

    p = Producer(
        {
            "bootstrap.servers": bs,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 0,
            "message.timeout.ms": 30000,
            "retry.backoff.ms": 20,
            "retry.backoff.max.ms": 200,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    p.produce(topic, b"warm", on_delivery=cb)
    p.flush(10)
    acks.clear()

    def stopper() -> None:
        time.sleep(seconds / 3)
        stop_at.append(time.monotonic())
        if how == "kill -9":
            lc.kill9(f"broker-{leader}")
        else:
            lc.signal(f"broker-{leader}", signal.SIGTERM)

    t = threading.Thread(target=stopper, daemon=True)
    t.start()
    t0 = time.monotonic()
    i = 0
    while time.monotonic() - t0 < seconds:
        v = b"%d" % i
        if stop_at:
            sent_after.setdefault(v, time.monotonic())
        p.produce(topic, v, on_delivery=cb)
        i += 1
        p.poll(0.001)
    p.flush(30)
    t_end = time.monotonic()
    t.join()
    t_stop = stop_at[0]
    # the end of the run closes the last gap: writes that never resume are one gap up to the end
    window = [*sorted(a for a in acks if a >= t_stop - 1), t_end]
    gaps = [b - a for a, b in itertools.pairwise(window)]
    worst = max(range(len(gaps)), key=gaps.__getitem__) if gaps else None
    resumed_s = first_after[0] - t_stop if first_after else None
    if resumed_s is None or resumed_s > resume_bound_s:
        raise WritesDidNotResume(
            f"{how} of broker-{leader}: "
            + (
                f"writes resumed only after {resumed_s:.1f}s"
                if resumed_s is not None
                else "no write sent after the stop was acknowledged"
            )
            + f" (bound {resume_bound_s:g}s; {len(errors)} delivery errors, first: {errors[:3]})"
        )
    new_leader, epoch1 = leader_epoch(bs, topic)
    lc.start_node(f"broker-{leader}")  # back for the next round
    wait_until(lambda: partition_info(bs, topic)[2] == [1, 2, 3], 30, "the ISR to be whole")
    return {
        "how": how,
        "sent": i,
        "acked": len(acks),
        "errors": len(errors),
        "longest_gap_ms": max(gaps) * 1000 if gaps else None,
        "longest_gap_starts_after_stop_ms": (window[worst] - t_stop) * 1000 if worst is not None else None,
        "stop_to_first_new_ack_ms": (first_after[0] - t_stop) * 1000 if first_after else None,
        "leader": [leader, new_leader],
        "epoch": [epoch0, epoch1],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3, help="failover rounds of each kind")
    ap.add_argument("--pairs", type=int, default=3, help="single-broker/RF=3 run pairs per throughput case")
    ap.add_argument("--failover-only", action="store_true", help="skip the throughput pairs")
    ap.add_argument(
        "--resume-bound-s", type=float, default=RESUME_BOUND_S, help="fail when writes take longer to resume"
    )
    args = ap.parse_args()
    n_1k = int(200_000 * args.scale)
    n_100 = int(1_000_000 * args.scale)
    results: dict[str, Any] = {"throughput": {}, "failover": []}

    work = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    lc = LocalCluster(work, 3, free_base_port(3))
    lc.start()
    single = start_single("epochlog")
    try:
        wait_until(
            lambda: len(AdminClient({"bootstrap.servers": lc.bootstrap}).list_topics(timeout=5).brokers) == 3,
            20,
            "three brokers",
        )
        # one partition: led by one broker; three partitions: leaders on all three brokers
        pids = {name: node.proc.pid for name, node in lc.nodes.items() if node.proc is not None}
        results["pairs"] = args.pairs
        if not args.failover_only:
            results["throughput"] = throughput_pairs(
                (single.bootstrap, {"broker": single.pid()}), (lc.bootstrap, pids), n_1k, n_100, args.pairs
            )
        single.stop()
        for _ in range(args.rounds):
            results["failover"].append(unavailability(lc, "kill -9", resume_bound_s=args.resume_bound_s))
            results["failover"].append(unavailability(lc, "controlled shutdown", resume_bound_s=args.resume_bound_s))
    except WritesDidNotResume as e:
        failed = str(e)
    else:
        failed = ""
    finally:
        single.stop()
        lc.stop()
        shutil.rmtree(work, ignore_errors=True)  # a run writes gigabytes
    results["failover_failed"] = failed or None
    write_results("cluster", results)
    show(results)
    if failed:
        print(f"FAILOVER FAILED: {failed}", file=sys.stderr)
        sys.exit(2)


def show(results: dict[str, Any]) -> None:
    c = Console(width=200)
    t = Table(title=f"acks=all produce throughput: RF=3 cluster vs single broker ({results['pairs']} run pairs each)")
    cols = ("producer", "case", "single MB/s", "RF=3 MB/s", "RF=3 / single: median", "every pair")
    for col in (*cols, "CPU ms/MB single", "CPU ms/MB RF=3"):
        t.add_column(col)
    for producer in PRODUCERS if results["throughput"] else ():
        for case, _size, _parts in CASES:
            runs = results["throughput"][producer][case]
            ratios = [r["ratio"] for r in runs]
            mid = runs[ratios.index(statistics.median_low(ratios))]  # the pair the median comes from
            t.add_row(
                producer,
                case,
                f"{statistics.median(r['single']['mb_per_s'] for r in runs):.1f}",
                f"{statistics.median(r['rf3']['mb_per_s'] for r in runs):.1f}",
                f"{statistics.median(ratios):.2f}x",
                " ".join(f"{x:.2f}" for x in ratios),
                " ".join(f"{k}={v}" for k, v in mid["single"]["cpu_ms_per_mb"].items()),
                " ".join(f"{k.replace('broker-', 'b')}={v}" for k, v in mid["rf3"]["cpu_ms_per_mb"].items()),
            )
    c.print(t)
    f = Table(title="write unavailability when the partition leader stops (acks=all, 1 msg/ms)")
    for col in ("how", "longest gap ms", "stop -> first new ack ms", "errors", "epochs"):
        f.add_column(col)
    for row in results["failover"]:
        gap = row["longest_gap_ms"]
        first = row["stop_to_first_new_ack_ms"]
        f.add_row(
            row["how"],
            f"{gap:.0f}" if gap is not None else "-",
            f"{first:.0f}" if first is not None else "-",
            str(row["errors"]),
            f"{row['epoch'][0]} -> {row['epoch'][1]}",
        )
    c.print(f)
    for how in ("kill -9", "controlled shutdown"):
        gaps = [r["longest_gap_ms"] for r in results["failover"] if r["how"] == how and r["longest_gap_ms"]]
        if gaps:
            c.print(f"{how}: median longest gap {statistics.median(gaps):.0f} ms over {len(gaps)} rounds")


if __name__ == "__main__":
    main()
