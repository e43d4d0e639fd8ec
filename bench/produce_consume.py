"""Produce/consume benchmark with the confluent-kafka client, epochlog side by side with peers.

  .venv/bin/python bench/produce_consume.py [--brokers epochlog,tansu,noida] [--scale 1.0]

Prints a table and writes JSON to bench/results/. Throughput counts acknowledged messages only (a delivery
report without an error); the errors are printed and saved. Ratios are epochlog / peer from the same run,
because this 2-core machine is shared and absolute numbers drift.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from brokers import available, start
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from results_file import write_results
from rich.console import Console
from rich.table import Table


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 1,
    rf: int = 1,
    client_conf: dict[str, str] | None = None,
    topic_config: dict[str, str] | None = None,
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **(client_conf or {})})
    config = {"min.insync.replicas": "2"} if rf > 1 else {}
    config.update(topic_config or {})
    try:
        admin.create_topics([NewTopic(name, partitions, rf, config=config)])[name].result(20)
    except Exception as e:  # a peer may only auto-create
        print(f"  create_topics on {bootstrap}: {e}; relying on auto creation", file=sys.stderr)


def produce_throughput(
    bootstrap: str,
    size: int,
    count: int,
    acks: str,
    partitions: int = 1,
    rf: int = 1,
    idempotence: bool = False,
    client_conf: dict[str, str] | None = None,
    topic_config: dict[str, str] | None = None,
) -> dict[str, Any]:
    """``client_conf``: more client properties (a secured listener's security.protocol, SASL, TLS);
    ``topic_config``: the test topic's configs (flush.messages=1 for the durable mode)."""
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions, rf, client_conf, topic_config)
    # Only messages the broker acknowledged count: a delivery report without an error.
    acked = [0]
    errors: Counter[str] = Counter()

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acked[0] += 1
        else:
            errors[str(err)] += 1

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "on_delivery": on_delivery,
            "enable.idempotence": idempotence,
            **(client_conf or {}),
        }
    )
    payload = os.urandom(size)
    # warm-up: metadata and connection
    p.produce(topic, payload)
    p.flush(30)
    acked[0] = 0
    errors.clear()
    t0 = time.perf_counter()
    produce = p.produce
    for i in range(count):
        try:
            produce(topic, payload)
        except BufferError:
            p.poll(0.005)
            produce(topic, payload)
        if i & 0x3FFF == 0:
            p.poll(0)
    left = p.flush(120)
    dt = time.perf_counter() - t0
    if errors or left:
        print(f"  {topic}: {count - acked[0]} of {count} messages not acknowledged "
              f"({left} still queued); errors: {dict(errors.most_common(5))}", file=sys.stderr)  # fmt: skip
    return {
        "topic": topic,
        "sent": count,
        "msgs": acked[0],
        "seconds": dt,
        "msgs_per_s": acked[0] / dt,
        "mb_per_s": acked[0] * size / dt / 1e6,
        "errors": sum(errors.values()) + left,
        "error_kinds": dict(errors.most_common(5)),
    }


def consume_throughput(
    bootstrap: str,
    topic: str,
    count: int,
    size: int,
    isolation: str = "read_uncommitted",
    from_first_message: bool = False,
    client_conf: dict[str, str] | None = None,
) -> dict[str, Any]:
    """``from_first_message``: start the clock at the first message, leaving connecting and the first
    metadata round out (for comparisons of how fast reading is, not how fast a consumer starts)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
            "isolation.level": isolation,
            **(client_conf or {}),
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    got = untimed = 0
    t0 = time.perf_counter()
    deadline = t0 + 120
    while from_first_message and got == 0 and time.perf_counter() < deadline:
        got = untimed = sum(1 for m in c.consume(10000, 1.0) if not m.error())
        t0 = time.perf_counter()
    while got < count and time.perf_counter() < deadline:
        msgs = c.consume(10000, 1.0)
        got += sum(1 for m in msgs if not m.error())
    dt = time.perf_counter() - t0
    c.close()
    timed = got - untimed
    return {"msgs": got, "seconds": dt, "msgs_per_s": timed / dt, "mb_per_s": timed * size / dt / 1e6}


def latency(bootstrap: str, rate: int, seconds: float, acks: str, rf: int = 1) -> dict[str, Any]:
    topic = f"lat-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, rf=rf)
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5})
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"lat-{uuid.uuid4().hex[:6]}",
            "fetch.wait.max.ms": 100,
            "fetch.min.bytes": 1,
            "enable.auto.commit": False,
        }
    )
    p.produce(topic, b"warm")
    p.flush(30)
    # Start timing only once the consumer is fetching: librdkafka sometimes learns an assigned topic's
    # leader only at its next 1 s metadata scan, which would put a start-up stall into the p99.
    c.assign([TopicPartition(topic, 0, 0)])
    ready_by = time.perf_counter() + 10
    while time.perf_counter() < ready_by and not any(not m.error() for m in c.consume(10, 0.1)):
        pass
    acks_ms: list[float] = []
    e2e_ms: list[float] = []
    sent_at: dict[bytes, float] = {}

    def done(err: Any, msg: Any) -> None:
        if err is None:
            acks_ms.append((time.perf_counter() - sent_at[msg.value()]) * 1000)

    n = int(rate * seconds)
    t0 = time.perf_counter()
    for i in range(n):
        target = t0 + i / rate
        while True:
            now = time.perf_counter()
            if now >= target:
                break
            p.poll(min(target - now, 0.001))
            for m in c.consume(100, 0):
                if not m.error() and m.value() in sent_at:
                    e2e_ms.append((time.perf_counter() - sent_at[m.value()]) * 1000)
        key = b"%08d" % i
        sent_at[key] = time.perf_counter()
        p.produce(topic, key, on_delivery=done)
    p.flush(30)
    deadline = time.perf_counter() + 5
    while len(e2e_ms) < n and time.perf_counter() < deadline:
        for m in c.consume(1000, 0.1):
            if not m.error() and m.value() in sent_at:
                e2e_ms.append((time.perf_counter() - sent_at[m.value()]) * 1000)
    c.close()

    def pct(xs: list[float], q: float) -> float:
        if not xs:
            return float("nan")
        xs = sorted(xs)
        return xs[min(len(xs) - 1, int(q * len(xs)))]

    return {
        "rate": rate,
        "msgs": n,
        "acked": len(acks_ms),
        "ack_p50_ms": pct(acks_ms, 0.5),
        "ack_p99_ms": pct(acks_ms, 0.99),
        "ack_max_ms": max(acks_ms, default=float("nan")),
        "e2e_p50_ms": pct(e2e_ms, 0.5),
        "e2e_p99_ms": pct(e2e_ms, 0.99),
        "e2e_mean_ms": statistics.fmean(e2e_ms) if e2e_ms else float("nan"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brokers", default="epochlog,tansu,noida")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply message counts")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = ap.parse_args()
    names = [b for b in args.brokers.split(",") if b]
    results: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%S"), "brokers": {}}
    for name in names:
        if not available(name):
            print(f"skipping {name}: not installed (see bench/brokers.py)", file=sys.stderr)
            continue
        print(f"== {name}", file=sys.stderr)
        b = start(name)
        r: dict[str, Any] = {}
        try:
            for size, count in ((1024, int(200_000 * args.scale)), (100, int(1_000_000 * args.scale))):
                for acks in ("1", "all"):
                    key = f"produce_{size}B_acks{acks}"
                    r[key] = produce_throughput(b.bootstrap, size, count, acks)
                    print(f"  {key}: {r[key]['mb_per_s']:.1f} MB/s {r[key]['msgs_per_s']:.0f} msg/s", file=sys.stderr)
                    if acks == "1":
                        ckey = f"consume_{size}B"
                        r[ckey] = consume_throughput(b.bootstrap, r[key]["topic"], count, size)
                        print(f"  {ckey}: {r[ckey]['mb_per_s']:.1f} MB/s", file=sys.stderr)
            r["latency_1000_per_s_acks_all"] = latency(b.bootstrap, 1000, 5 * max(args.scale, 0.4), "all")
            print(f"  latency: {r['latency_1000_per_s_acks_all']}", file=sys.stderr)
        finally:
            b.stop()
        results["brokers"][name] = r
    show(results)
    write_results("produce_consume", results, Path(args.out))


def show(results: dict[str, Any]) -> None:
    brokers = results["brokers"]
    table = Table(title="produce/consume (confluent-kafka, 1 partition, linger 5 ms)")
    table.add_column("test")
    for name in brokers:
        table.add_column(name, justify="right")
    peers = [n for n in brokers if n != "epochlog"]
    if "epochlog" in brokers:
        for peer in peers:
            table.add_column(f"epochlog/{peer}", justify="right")
    rows = []
    first = next(iter(brokers.values()), {})
    for key, _val in first.items():
        if key.startswith("latency"):
            for metric in ("ack_p50_ms", "ack_p99_ms", "e2e_p50_ms", "e2e_p99_ms"):
                rows.append((f"{key} {metric}", lambda r, k=key, m=metric: r[k][m], "{:.1f} ms"))
        else:
            rows.append((f"{key} MB/s", lambda r, k=key: r[k]["mb_per_s"], "{:.1f}"))
            rows.append((f"{key} msg/s", lambda r, k=key: r[k]["msgs_per_s"], "{:,.0f}"))
    for label, get, fmt in rows:
        cells = []
        vals = {}
        for name, r in brokers.items():
            try:
                vals[name] = get(r)
                cells.append(fmt.format(vals[name]))
            except (KeyError, TypeError):
                cells.append("-")
        if "epochlog" in brokers:
            for peer in peers:
                if peer in vals and vals.get(peer):
                    cells.append(f"{vals['epochlog'] / vals[peer]:.2f}x")
                else:
                    cells.append("-")
        table.add_row(label, *cells)
    Console().print(table)


if __name__ == "__main__":
    main()
