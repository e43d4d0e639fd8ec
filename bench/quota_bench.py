"""Client quotas on one `epochlog up` node, with confluent-kafka clients:

1. accuracy: a producer (producer_byte_rate) and a consumer (consumer_byte_rate) held to a quota on their
   client.id, for a few targets, each running flat out; the measured rate (acknowledged payload bytes for
   the producer, payload bytes handed to the application for the consumer) over --span seconds after a
   warm-up of the quota's whole sampled span (quota.window.num 5 x 1 s windows, as in
   tests/integration/test_quota_enforcement.py: Kafka lets the first windows' worth through unthrottled),
   its ratio to the target, and the throttle time librdkafka's statistics reported (`brokers.*.throttle`).
   An unthrottled producer's rate alone and next to a throttled one, alternating.
2. accounting cost: unthrottled produce throughput and the broker's CPU time per MB with no quota
   configured and with a default client producer_byte_rate of 10 GB/s (applies to every client, never
   binds: every produce request is measured), alternating in the same broker process, --rounds pairs.

  PYTHONPATH=src .venv/bin/python bench/quota_bench.py [--span 20] [--rounds 7] [--count 200000]
      [--only accuracy|producers|cost] [--producer-batch-bytes 32768] [--producer-queue-messages 2000]
      [--py-spy PATH]

Quotas are set with `epochlog configs --entity-type clients` (confluent-kafka's AdminClient has no
AlterClientQuotas). Prints tables and writes JSON to bench/results/quota-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import produce_consume
from brokers import RunningBroker, start
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from proc_cpu import cpu_seconds
from results_file import write_results
from rich.console import Console
from rich.table import Table
from tests.integration.cluster_helpers import wait_until
from tests.integration.helpers import create_topic, produce
from tests.integration.quorum_procs import epochlog
from tests.integration.quota_load import PAYLOAD, WARMUP, WINDOWS, ProducerLoad, end_offset

KIB = 1024
TARGETS = {"256 KiB/s": 256 * KIB, "1 MiB/s": KIB * KIB, "4 MiB/s": 4 * KIB * KIB}
NEVER_BINDS = 10e9  # bytes/s: far above what this machine can produce
COST_CASES = {
    # produce_consume.py's settings: few large requests (5 x --count messages a run: long enough to time)
    "1 KiB, linger 5 ms, 1 MB batches": (1024, 5, {}),
    # many small requests: where a per-request cost shows most
    "1 KiB, linger 0, 16 KiB batches": (1024, 2, {"linger.ms": "0", "batch.size": "16384"}),
}


def set_quota(bootstrap: str, client: str | None, key: str, value: float | None) -> None:
    """Set (None: delete) a client quota with `epochlog configs`, and wait until the broker describes it."""
    entity = ["--entity-name", client] if client is not None else ["--entity-default"]
    change = ["--add-config", f"{key}={value:.0f}"] if value is not None else ["--delete-config", key]
    epochlog("configs", "-b", bootstrap, "--alter", "--entity-type", "clients", *entity, *change)

    def shown() -> bool:
        out = epochlog("configs", "-b", bootstrap, "--describe", "--entity-type", "clients", *entity)
        return (f"{key}={value:.1f}" in out) if value is not None else (key not in out)

    wait_until(shown, 30, f"{key} of {client or 'the default client'} to be {value}")


def throttle_summary(samples: list[tuple[float, int, int]], t0: float, t1: float) -> dict[str, Any]:
    """librdkafka's per statistics interval throttle (avg, max ms) over [t0, t1]: the median interval's
    average, the largest, and how many intervals saw a throttle."""
    inside = [(avg, mx) for t, avg, mx in samples if t0 <= t <= t1]
    return {
        "throttle_avg_ms_median": statistics.median(a for a, _ in inside) if inside else 0,
        "throttle_max_ms": max((m for _, m in inside), default=0),
        "throttled_intervals": len(inside),
    }


def _topic(bootstrap: str, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, name)
    return name


def _span(load: ProducerLoad, bootstrap: str, seconds: float) -> dict[str, Any]:
    """The load's acknowledged and the broker's appended payload rate over the next ``seconds``."""
    t0, b0, o0 = time.monotonic(), load.acked_bytes, end_offset(bootstrap, load.topic)
    while time.monotonic() - t0 < seconds:
        time.sleep(0.2)
    t1, b1, o1 = time.monotonic(), load.acked_bytes, end_offset(bootstrap, load.topic)
    return {
        "rate": (b1 - b0) / (t1 - t0),
        "appended_rate": (o1 - o0) * PAYLOAD / (t1 - t0),
        **throttle_summary(load.throttles, t0, t1),
    }


def producer_accuracy(bootstrap: str, label: str, target: int, span: float, conf: dict[str, Any]) -> dict[str, Any]:
    client = f"q-produce-{target}"
    set_quota(bootstrap, client, "producer_byte_rate", target)
    load = ProducerLoad(bootstrap, _topic(bootstrap, "quota-p"), client, conf=conf)
    load.start()
    try:
        time.sleep(WARMUP)  # load, not synchronization: the quota's windows fill
        row = _span(load, bootstrap, span)
    finally:
        load.finish()
    return {"client": "producer", "target": label, "target_bytes_per_s": target, **row,
            "ratio": row["rate"] / target, "errors": load.errors}  # fmt: skip


def _consumer(bootstrap: str, topic: str, client: str, stats: list[tuple[float, int, int]]) -> Consumer:
    def on_stats(raw: str) -> None:
        for b in json.loads(raw).get("brokers", {}).values():
            t = b.get("throttle", {})
            if int(t.get("cnt", 0)) > 0:
                stats.append((time.monotonic(), int(t.get("avg", 0)), int(t.get("max", 0))))

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{client}",
            "client.id": client,
            "enable.auto.commit": False,
            # A small prefetch queue: what the application is handed follows what the broker sent.
            "queued.max.messages.kbytes": 1024,
            "fetch.queue.backoff.ms": 10,
            "max.partition.fetch.bytes": 262144,
            "statistics.interval.ms": 500,
            "stats_cb": on_stats,
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    return c


def _filled_topic(bootstrap: str, total: int) -> str:
    topic = _topic(bootstrap, "quota-c")
    produce(bootstrap, topic, [b"y" * PAYLOAD] * (total // PAYLOAD), {"batch.size": 65536})
    return topic


def consumer_ceiling(bootstrap: str, total: int = 64 * KIB * KIB) -> dict[str, Any]:
    """The same consumer with no quota: what it reads per second on this machine, from its first message
    to the last of ``total`` bytes (the quota rows are meaningful only well below this)."""
    stats: list[tuple[float, int, int]] = []
    c = _consumer(bootstrap, _filled_topic(bootstrap, total), "q-fetch-none", stats)
    got, first, deadline = 0, 0.0, time.monotonic() + 120
    try:
        while got < total and time.monotonic() < deadline:
            for m in c.consume(500, 0.2):
                if m.error() is None:
                    first = first or time.monotonic()
                    got += len(m.value() or b"")
    finally:
        c.close()
    rate = got / max(time.monotonic() - first, 1e-3)
    return {"client": "consumer", "target": "none (ceiling)", "target_bytes_per_s": None, "ratio": None,
            "rate": rate, **throttle_summary(stats, 0, time.monotonic())}  # fmt: skip


def consumer_accuracy(bootstrap: str, label: str, target: int, span: float) -> dict[str, Any]:
    client = f"q-fetch-{target}"
    # Enough for the warm-up and the span at the target, with room to spare.
    total = int(target * (WARMUP + span + 8))
    topic = _filled_topic(bootstrap, total)
    set_quota(bootstrap, client, "consumer_byte_rate", target)
    stats: list[tuple[float, int, int]] = []
    c = _consumer(bootstrap, topic, client, stats)
    start_at = time.monotonic()
    t0, t1 = start_at + WARMUP, start_at + WARMUP + span
    got = 0
    try:
        while time.monotonic() < t1:
            for m in c.consume(500, 0.2):
                if m.error() is None and time.monotonic() >= t0:
                    got += len(m.value() or b"")
        c.poll(0.6)  # one more statistics interval
    finally:
        c.close()
    rate = got / span
    return {"client": "consumer", "target": label, "target_bytes_per_s": target, "rate": rate,
            "ratio": rate / target, **throttle_summary(stats, t0, t1 + 0.6)}  # fmt: skip


def neighbour(bootstrap: str, rounds: int, span: float) -> list[dict[str, Any]]:
    """An unthrottled producer's rate alone, then beside one held to 1 MiB/s, ``rounds`` times."""
    throttled_client, quota = "q-neighbour-held", TARGETS["1 MiB/s"]
    set_quota(bootstrap, throttled_client, "producer_byte_rate", quota)
    free = ProducerLoad(bootstrap, _topic(bootstrap, "quota-free"), "q-neighbour-free")
    free.start()
    out = []
    try:
        time.sleep(2)  # load: connection and metadata
        for _ in range(rounds):
            alone = _span(free, bootstrap, span)
            held = ProducerLoad(bootstrap, _topic(bootstrap, "quota-held"), throttled_client)
            held.start()
            try:
                time.sleep(WARMUP)  # load: the held producer reaches its quota
                t0, h0 = time.monotonic(), held.acked_bytes
                beside = _span(free, bootstrap, span)
                held_rate = (held.acked_bytes - h0) / (time.monotonic() - t0)
            finally:
                held.finish()
            out.append({"alone": alone["rate"], "beside": beside["rate"], "ratio": beside["rate"] / alone["rate"],
                        "free_throttle_max_ms": max(alone["throttle_max_ms"], beside["throttle_max_ms"]),
                        "held_rate": held_rate, "held_ratio": held_rate / quota})  # fmt: skip
    finally:
        free.finish()
    if free.errors:
        print(f"  unthrottled producer errors: {free.errors}", file=sys.stderr)
    return out


def accuracy(span: float, rounds: int, producer_conf: dict[str, Any], producers_only: bool) -> dict[str, Any]:
    b = start("epochlog", WINDOWS)
    try:
        rows = [producer_accuracy(b.bootstrap, label, t, span, producer_conf) for label, t in TARGETS.items()]
        for r in rows:
            print(f"  producer {r['target']}: {r['rate'] / KIB:.0f} KiB/s ({r['ratio']:.2f}x)", file=sys.stderr)
        if producers_only:
            return {"windows": WINDOWS, "warmup_s": WARMUP, "span_s": span, "rows": rows, "neighbour": []}
        rows.append(consumer_ceiling(b.bootstrap))
        for label, t in TARGETS.items():
            rows.append(consumer_accuracy(b.bootstrap, label, t, span))
            print(f"  consumer {label}: {rows[-1]['rate'] / KIB:.0f} KiB/s", file=sys.stderr)
        return {"windows": WINDOWS, "warmup_s": WARMUP, "span_s": span, "rows": rows,
                "neighbour": neighbour(b.bootstrap, rounds, span / 2)}  # fmt: skip
    finally:
        b.stop()


def _cost_run(b: RunningBroker, size: int, count: int, conf: dict[str, str]) -> dict[str, Any]:
    cpu0 = cpu_seconds(b.pid())
    r = produce_consume.produce_throughput(b.bootstrap, size, count, "1", client_conf=conf)
    r["broker_cpu_ms_per_mb"] = (cpu_seconds(b.pid()) - cpu0) * 1000 / (r["msgs"] * size / 1e6)
    # A gigabyte a run: the next run must not find a fuller disk or page cache than this one did.
    admin = AdminClient({"bootstrap.servers": b.bootstrap})  # held: a collected client fails its futures
    admin.delete_topics([r["topic"]])[r["topic"]].result(30)
    return r


def cost_ratios(pairs: list[dict[str, Any]]) -> dict[str, float]:
    """Medians over the pairs of quota/none: throughput (below 1 is a cost) and broker CPU per MB (above 1)."""
    return {
        "throughput_ratio_median": statistics.median(p["quota"]["msgs_per_s"] / p["none"]["msgs_per_s"] for p in pairs),
        "cpu_per_mb_ratio_median": statistics.median(
            p["quota"]["broker_cpu_ms_per_mb"] / p["none"]["broker_cpu_ms_per_mb"] for p in pairs
        ),
    }


def stack_share(raw: str, needle: str, within: str) -> dict[str, Any]:
    """py-spy's raw (collapsed) stacks, one `frame;frame;... count` a line: the samples whose stack holds a
    frame naming ``needle``, as a share of all samples and of those holding ``within``."""
    total = inside = hit = 0
    for line in raw.splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        total += int(n)
        if within in stack:
            inside += int(n)
            if needle in stack:
                hit += int(n)
    return {
        "samples": total,
        "within": inside,
        "hit": hit,
        "share_of_samples": hit / total if total else 0.0,
        "share_within": hit / inside if inside else 0.0,
    }


def profile(b: RunningBroker, py_spy: str, seconds: float, count: int) -> dict[str, Any]:
    """py-spy on the broker while a producer of small requests runs under the never-binding quota: how much
    of the broker's request handling is quota accounting."""
    size, _times, conf = COST_CASES["1 KiB, linger 0, 16 KiB batches"]
    set_quota(b.bootstrap, None, "producer_byte_rate", NEVER_BINDS)
    with tempfile.TemporaryDirectory(prefix="quota-spy-") as tmp:
        raw = Path(tmp) / "stacks.txt"
        cmd = [py_spy, "record", "-p", str(b.pid()), "-d", str(int(seconds)), "-r", "200", "-f", "raw", "-o", str(raw)]
        spy = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while spy.poll() is None:
                _cost_run(b, size, count, conf)
        finally:
            spy.wait(60)
        text = raw.read_text() if raw.exists() else ""
    set_quota(b.bootstrap, None, "producer_byte_rate", None)
    return {"seconds": seconds, "case": "1 KiB, linger 0, 16 KiB batches",
            **stack_share(text, "ClientQuotas.record", "KafkaConnection._handle_frame")}  # fmt: skip


def cost(rounds: int, count: int, py_spy: str | None, spy_seconds: float) -> dict[str, Any]:
    b = start("epochlog")
    out: dict[str, Any] = {"never_binding_quota": NEVER_BINDS, "count": count, "cases": {}}
    try:
        produce_consume.produce_throughput(b.bootstrap, 1024, count // 4, "1")  # warm the broker up
        for case, (size, times, conf) in COST_CASES.items():
            pairs = []
            quota_set = False
            for i in range(rounds):
                pair: dict[str, Any] = {}
                # Alternating which goes first, so a drift of the machine within a pair falls on both sides.
                for mode in ("none", "quota") if i % 2 == 0 else ("quota", "none"):
                    if quota_set != (mode == "quota"):  # deleting a quota that is not set is an error
                        quota_set = mode == "quota"
                        set_quota(b.bootstrap, None, "producer_byte_rate", NEVER_BINDS if quota_set else None)
                    pair[mode] = _cost_run(b, size, count * times, conf)
                pair["ratio"] = pair["quota"]["msgs_per_s"] / pair["none"]["msgs_per_s"]
                print(f"  {case} round {i + 1}: quota/none {pair['ratio']:.3f}", file=sys.stderr)
                pairs.append(pair)
            out["cases"][case] = {"pairs": pairs, **cost_ratios(pairs)}
            if quota_set:
                set_quota(b.bootstrap, None, "producer_byte_rate", None)
        if py_spy:
            out["profile"] = profile(b, py_spy, spy_seconds, count)
    finally:
        b.stop()
    return out


def show(results: dict[str, Any]) -> None:
    c = Console(width=200)
    acc = results.get("accuracy")
    if acc:
        t = Table(title=f"quota accuracy: {acc['span_s']:g} s after a {acc['warmup_s']:g} s warm-up, 1 KiB records")
        for col in ("client", "target", "measured KiB/s", "measured / target", "broker appended KiB/s",
                    "throttle avg ms (median)", "throttle max ms"):  # fmt: skip
            t.add_column(col, justify="right")
        for r in acc["rows"]:
            t.add_row(
                r["client"],
                r["target"],
                f"{r['rate'] / KIB:,.0f}",
                f"{r['ratio']:.2f}" if r["ratio"] else "-",
                f"{r['appended_rate'] / KIB:,.0f}" if "appended_rate" in r else "-",
                str(r["throttle_avg_ms_median"]),
                str(r["throttle_max_ms"]),
            )
        c.print(t)
    if acc and acc["neighbour"]:
        n = Table(title="an unthrottled producer beside one held to 1 MiB/s")
        for col in ("round", "alone KiB/s", "beside KiB/s", "beside / alone", "its throttle ms", "held / quota"):
            n.add_column(col, justify="right")
        for i, r in enumerate(acc["neighbour"], 1):
            n.add_row(str(i), f"{r['alone'] / KIB:,.0f}", f"{r['beside'] / KIB:,.0f}", f"{r['ratio']:.2f}",
                      str(r["free_throttle_max_ms"]), f"{r['held_ratio']:.2f}")  # fmt: skip
        c.print(n)
    cost_ = results.get("cost")
    if cost_:
        t = Table(title=f"quota accounting cost: no quota vs a default producer_byte_rate of {NEVER_BINDS:.0e} B/s")
        for col in ("case", "none MB/s (median)", "quota MB/s (median)", "quota/none throughput: median",
                    "every pair", "broker CPU/MB quota/none: median"):  # fmt: skip
            t.add_column(col, justify="right")
        for case, r in cost_["cases"].items():
            t.add_row(
                case,
                f"{statistics.median(p['none']['mb_per_s'] for p in r['pairs']):.1f}",
                f"{statistics.median(p['quota']['mb_per_s'] for p in r['pairs']):.1f}",
                f"{r['throughput_ratio_median']:.3f}",
                " ".join(f"{p['ratio']:.2f}" for p in r["pairs"]),
                f"{r['cpu_per_mb_ratio_median']:.3f}",
            )
        c.print(t)
        prof = cost_.get("profile")
        if prof:
            within, overall = prof["share_within"], prof["share_of_samples"]
            c.print(f"py-spy, {prof['seconds']:g} s on the broker ({prof['case']}, quota set): ClientQuotas.record in "
                    f"{within:.1%} of the samples handling a request, {overall:.1%} of all")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--span", type=float, default=20.0, help="seconds measured per accuracy row")
    ap.add_argument("--rounds", type=int, default=7, help="cost pairs per case (and neighbour rounds, at most 3)")
    ap.add_argument("--count", type=int, default=200_000, help="messages per cost run, times the case's multiple")
    ap.add_argument("--only", choices=("accuracy", "producers", "cost", "all"), default="all")
    ap.add_argument(
        "--producer-batch-bytes", type=int, default=32768, help="the quota producers' batch.size (the tests' 32 KiB)"
    )
    ap.add_argument(
        "--producer-queue-messages", type=int, default=2000, help="their queue.buffering.max.messages (the tests')"
    )
    ap.add_argument("--py-spy", default=shutil.which("py-spy"), help="py-spy to profile the broker with (none: skip)")
    ap.add_argument("--py-spy-seconds", type=float, default=20.0)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = ap.parse_args()
    results: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%S"), "args": vars(args)}
    if args.only in ("accuracy", "producers", "all"):
        conf = {"batch.size": args.producer_batch_bytes, "queue.buffering.max.messages": args.producer_queue_messages}
        results["accuracy"] = accuracy(args.span, min(args.rounds, 3), conf, args.only == "producers")
    if args.only in ("cost", "all"):
        results["cost"] = cost(args.rounds, args.count, args.py_spy, args.py_spy_seconds)
    show(results)
    write_results("quota", results, Path(args.out))


if __name__ == "__main__":
    main()
