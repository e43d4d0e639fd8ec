"""The durable mode's price: flush.messages=1 (group commit) against the default flush policy, in one run.

  .venv/bin/python bench/durable_bench.py [--scale 1.0] [--rounds 3] [--latency-s 5]

Both modes run on the same servers, as two topics (the policy is a topic config, flush.messages, whose
broker default is log.flush.interval.messages): a single `epochlog up`, and a cluster of `epochlog
controller` + three `epochlog broker` with RF 3 and min.insync.replicas 2. Each round runs the default
and the durable topic back to back (alternating which goes first, each after an os.sync() so that
neither pays for the other's writeback), so each durable figure has a default one taken moments from it
(this 2-core machine is shared and absolute numbers drift); the table gives medians and the median of
the per-round ratios. Measured: 1 KiB produce throughput with acks=all (acknowledged messages only,
librdkafka's default producer, linger 5 ms, as bench/produce_consume.py), and the acknowledgement
latency of acks=all writes sent at a fixed 1,000 messages/s. Prints a table and writes JSON to
bench/results/. All processes are real, on 127.0.0.1, stopped by pid at the end.

``--baseline-src DIR`` adds an A/B of the durable mode itself on one node: a broker run from another
source tree (DIR is its ``src``, e.g. a checkout from before group commit, which fsynced inside each
append) against this tree's, alternately, for throughput and ack latency.
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
from brokers import start as start_single
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from results_file import write_results
from rich.console import Console
from rich.table import Table
from tests.integration.cluster_helpers import wait_until

from epochlog.server.cluster.local import LocalCluster, free_base_port

MODES = {"default": {}, "durable": {"flush.messages": "1"}}


def ack_latency(bootstrap: str, rf: int, topic_config: dict[str, str], rate: int, seconds: float) -> dict[str, Any]:
    """acks=all writes sent at ``rate`` per second; each one's time from produce() to its acknowledgement."""
    topic = f"lat-{uuid.uuid4().hex[:8]}"
    produce_consume.create_topic(bootstrap, topic, 1, rf, topic_config=topic_config)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for _ in range(50):  # warm-up: metadata, connection, the first segment
        p.produce(topic, b"warm")
    p.flush(30)
    acks_ms: list[float] = []
    errors = [0]
    sent_at: dict[bytes, float] = {}

    def done(err: Any, msg: Any) -> None:
        if err is None:
            acks_ms.append((time.perf_counter() - sent_at[msg.value()]) * 1000)
        else:
            errors[0] += 1

    n = int(rate * seconds)
    t0 = time.perf_counter()
    for i in range(n):
        target = t0 + i / rate
        while (now := time.perf_counter()) < target:
            p.poll(min(target - now, 0.001))
        key = b"%08d" % i
        sent_at[key] = time.perf_counter()
        p.produce(topic, key, on_delivery=done)
        p.poll(0)
    left = p.flush(30)
    xs = sorted(acks_ms)

    def pct(q: float) -> float:
        return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")

    return {
        "rate": rate,
        "sent": n,
        "acked": len(xs),
        "errors": errors[0] + left,
        "ack_p50_ms": pct(0.5),
        "ack_p99_ms": pct(0.99),
        "ack_max_ms": xs[-1] if xs else float("nan"),
    }


def disk_sync_latency(directory: Path, samples: int = 300) -> dict[str, float]:
    """The floor under every durable acknowledgement: this disk's fdatasync after a 1 KiB append."""
    path = directory / "sync-probe"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    xs = []
    try:
        for _ in range(samples):
            os.write(fd, b"x" * 1024)
            t = time.perf_counter()
            os.fdatasync(fd)
            xs.append((time.perf_counter() - t) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    xs.sort()
    return {"p50_ms": xs[len(xs) // 2], "p99_ms": xs[int(len(xs) * 0.99)], "max_ms": xs[-1]}


def run_setup(bootstrap: str, rf: int, count: int, rounds: int, latency_s: float) -> dict[str, Any]:
    out: dict[str, Any] = {"rf": rf, "throughput": [], "latency": {}}
    for i in range(rounds):
        pair = {}
        # Alternate which mode goes first, and start each run with no dirty pages left by the one before:
        # the kernel writes a default run's data back later, and a durable run right after it would wait
        # for that writeback in its own fsyncs.
        for mode in sorted(MODES, reverse=bool(i % 2)):
            os.sync()
            r = produce_consume.produce_throughput(bootstrap, 1024, count, "all", 1, rf, topic_config=MODES[mode])
            pair[mode] = r
            print(f"  rf={rf} {mode}: {r['mb_per_s']:.1f} MB/s ({r['errors']} errors)", file=sys.stderr)
        pair["ratio"] = pair["durable"]["msgs_per_s"] / pair["default"]["msgs_per_s"]
        out["throughput"].append(pair)
    for mode, cfg in MODES.items():
        os.sync()
        out["latency"][mode] = ack_latency(bootstrap, rf, cfg, 1000, latency_s)
        print(f"  rf={rf} {mode} latency: {out['latency'][mode]}", file=sys.stderr)
    runs = out["throughput"]
    out["summary"] = {
        "default_mb_per_s": statistics.median(p["default"]["mb_per_s"] for p in runs),
        "durable_mb_per_s": statistics.median(p["durable"]["mb_per_s"] for p in runs),
        "ratio": statistics.median(p["ratio"] for p in runs),
        "ratios": [round(p["ratio"], 3) for p in runs],
    }
    return out


def baseline_ab(baseline_src: str, count: int, rounds: int, latency_s: float) -> dict[str, Any]:
    """The durable mode on one node, a broker from ``baseline_src`` against one from this tree."""
    here = str(Path(__file__).resolve().parent.parent / "src")
    durable = MODES["durable"]
    brokers = {}
    saved = os.environ.get("PYTHONPATH")
    try:
        for name, src in (("baseline", baseline_src), ("this tree", here)):
            os.environ["PYTHONPATH"] = src  # the broker process imports epochlog from there
            brokers[name] = start_single("epochlog")
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    out: dict[str, Any] = {"baseline_src": baseline_src, "runs": []}
    try:
        for _ in range(rounds):
            for name, b in brokers.items():
                os.sync()
                tp = produce_consume.produce_throughput(b.bootstrap, 1024, count, "all", topic_config=durable)
                os.sync()
                lat = ack_latency(b.bootstrap, 1, durable, 1000, latency_s)
                out["runs"].append({"broker": name, "throughput": tp, "latency": lat})
                print(f"  A/B {name}: {tp['mb_per_s']:.1f} MB/s, ack p50 {lat['ack_p50_ms']:.1f} ms "
                      f"p99 {lat['ack_p99_ms']:.1f} ms", file=sys.stderr)  # fmt: skip
    finally:
        for b in brokers.values():
            b.stop()
    for name in brokers:
        mine = [r for r in out["runs"] if r["broker"] == name]
        out[name] = {
            "mb_per_s": statistics.median(r["throughput"]["mb_per_s"] for r in mine),
            "ack_p50_ms": statistics.median(r["latency"]["ack_p50_ms"] for r in mine),
            "ack_p99_ms": statistics.median(r["latency"]["ack_p99_ms"] for r in mine),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the 200,000 messages per throughput run")
    ap.add_argument("--rounds", type=int, default=3, help="default/durable pairs per setup")
    ap.add_argument("--latency-s", type=float, default=5.0, help="seconds of 1,000 msgs/s per latency run")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    ap.add_argument("--baseline-src", help="A/B the durable mode against a broker run from this src directory")
    args = ap.parse_args()
    count = int(200_000 * args.scale)
    results: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "command": " ".join(["bench/durable_bench.py", *sys.argv[1:]]),
        "messages_per_run": count,
        "modes": MODES,
        "setups": {},
    }
    work = Path(tempfile.mkdtemp(prefix="bench-durable-"))
    results["fdatasync_1KiB_before"] = disk_sync_latency(work)
    single = start_single("epochlog")
    lc = LocalCluster(work, 3, free_base_port(3))
    try:
        results["setups"]["single node"] = run_setup(single.bootstrap, 1, count, args.rounds, args.latency_s)
        single.stop()
        lc.start()
        wait_until(
            lambda: len(AdminClient({"bootstrap.servers": lc.bootstrap}).list_topics(timeout=5).brokers) == 3,
            30,
            "three brokers",
        )
        results["setups"]["3 brokers, RF 3"] = run_setup(lc.bootstrap, 3, count, args.rounds, args.latency_s)
        results["fdatasync_1KiB_after"] = disk_sync_latency(work)
        lc.stop()
        if args.baseline_src:
            results["baseline_ab"] = baseline_ab(args.baseline_src, count, args.rounds, args.latency_s)
    finally:
        single.stop()
        lc.stop()
        shutil.rmtree(work, ignore_errors=True)  # a run writes gigabytes
    show(results)
    write_results("durable", results, Path(args.out))


def show(results: dict[str, Any]) -> None:
    table = Table(title="default vs durable (flush.messages=1, group commit): 1 KiB acks=all, confluent-kafka")
    for col in ("setup", "default MB/s", "durable MB/s", "durable/default", "per round"):
        table.add_column(col, justify="right" if col != "setup" else "left")
    for col in ("ack p50/p99 default", "ack p50/p99 durable"):
        table.add_column(col + " (1k msgs/s)", justify="right")
    for name, r in results["setups"].items():
        s, lat = r["summary"], r["latency"]
        table.add_row(
            name,
            f"{s['default_mb_per_s']:.1f}",
            f"{s['durable_mb_per_s']:.1f}",
            f"{s['ratio']:.2f}x",
            " ".join(f"{x:.2f}" for x in s["ratios"]),
            f"{lat['default']['ack_p50_ms']:.1f} / {lat['default']['ack_p99_ms']:.1f} ms",
            f"{lat['durable']['ack_p50_ms']:.1f} / {lat['durable']['ack_p99_ms']:.1f} ms",
        )
    Console().print(table)
    for when in ("before", "after"):
        d = results.get(f"fdatasync_1KiB_{when}")
        if d:
            print(f"this disk's fdatasync of a 1 KiB append, {when} the run: p50 {d['p50_ms']:.2f} ms, "
                  f"p99 {d['p99_ms']:.2f} ms")  # fmt: skip
    ab = results.get("baseline_ab")
    if ab:
        for name in ("baseline", "this tree"):
            r = ab[name]
            print(f"durable mode, one node, {name}: {r['mb_per_s']:.1f} MB/s, ack p50 {r['ack_p50_ms']:.1f} ms, "
                  f"p99 {r['ack_p99_ms']:.1f} ms (medians)")  # fmt: skip


if __name__ == "__main__":
    main()
