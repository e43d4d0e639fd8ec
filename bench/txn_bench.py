"""Transactions' cost: transactional produce (a commit every 100 ms) against idempotent produce, and
read_committed consume against read_uncommitted, on the same broker in the same run.

  .venv/bin/python bench/txn_bench.py [--rounds 3] [--count 500000] [--peers]

Each round starts a fresh single node and runs the cases in turn, the order alternating by round. Only
acknowledged messages count: for the transactional producer, messages of transactions whose commit
returned. The consumers read the transactional producer's topic (a marker every 100 ms) from the start,
timed from their first message.
With --peers, the peers of bench/brokers.py that answer InitProducerId with a transactional id are run
the same way. Prints medians and the ratios; writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from brokers import available, start
from confluent_kafka import KafkaException, Producer
from produce_consume import consume_throughput, create_topic
from results_file import write_results
from rich.console import Console
from rich.table import Table

SIZE = 1024
COMMIT_EVERY_S = 0.1
PRODUCER_CONF = {
    "acks": "all",
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
}


def idempotent(bootstrap: str, count: int) -> dict[str, Any]:
    topic = f"idem-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic)
    acked = [0]

    def done(err: Any, _msg: Any) -> None:
        acked[0] += err is None

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "on_delivery": done, **PRODUCER_CONF})
    payload = os.urandom(SIZE)
    p.produce(topic, payload)
    p.flush(30)
    acked[0] = 0
    t0 = time.perf_counter()
    for i in range(count):
        try:
            p.produce(topic, payload)
        except BufferError:
            p.poll(0.005)
            p.produce(topic, payload)
        if i & 0x3FFF == 0:
            p.poll(0)
    p.flush(120)
    dt = time.perf_counter() - t0
    return {"topic": topic, "msgs": acked[0], "seconds": dt, "msgs_per_s": acked[0] / dt}


def transactional(bootstrap: str, count: int) -> dict[str, Any]:
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{uuid.uuid4().hex[:8]}", **PRODUCER_CONF})
    p.init_transactions(30)
    payload = os.urandom(SIZE)
    committed = transactions = 0
    t0 = time.perf_counter()
    sent = 0
    while sent < count:
        p.begin_transaction()
        started, in_txn = time.perf_counter(), 0
        while sent < count and time.perf_counter() - started < COMMIT_EVERY_S:
            try:
                p.produce(topic, payload)
            except BufferError:
                p.poll(0.005)
                continue
            sent += 1
            in_txn += 1
            if in_txn & 0x3FF == 0:
                p.poll(0)
        try:
            p.commit_transaction(60)  # flushes first: every message of it is acknowledged when this returns
            committed += in_txn
            transactions += 1
        except KafkaException as e:
            print(f"  commit failed: {e}", file=sys.stderr)
            p.abort_transaction(60)
    dt = time.perf_counter() - t0
    return {
        "topic": topic,
        "msgs": committed,
        "transactions": transactions,
        "seconds": dt,
        "msgs_per_s": committed / dt,
    }


def supports_transactions(bootstrap: str) -> bool:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "probe"})
    try:
        p.init_transactions(15)
        return True
    except KafkaException as e:
        print(f"  {bootstrap}: no transactions ({e})", file=sys.stderr)
        return False


def one_round(name: str, count: int, flip: bool) -> dict[str, Any] | None:
    b = start(name)
    try:
        if name != "epochlog" and not supports_transactions(b.bootstrap):
            return None
        out: dict[str, Any] = {}
        order = [("transactional", transactional), ("idempotent", idempotent)]
        for label, fn in reversed(order) if flip else order:
            out[label] = fn(b.bootstrap, count)
        topic, n = out["transactional"]["topic"], out["transactional"]["msgs"]
        reads = [("read_committed", "read_committed"), ("read_uncommitted", "read_uncommitted")]
        for label, iso in reversed(reads) if flip else reads:
            out[label] = consume_throughput(b.bootstrap, topic, n, SIZE, iso, from_first_message=True)
            if out[label]["msgs"] != n:
                raise RuntimeError(f"{label} read {out[label]['msgs']} of {n} committed messages")
        return out
    finally:
        b.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--count", type=int, default=500_000, help="1 KiB messages per case (about 15 commits)")
    ap.add_argument("--peers", action="store_true", help="also run the peers that serve transactions")
    args = ap.parse_args()
    names = ["epochlog"] + ([n for n in ("tansu", "noida") if available(n)] if args.peers else [])
    rounds: dict[str, list[dict[str, Any]]] = {}
    failures: dict[str, str] = {}
    for name in names:
        for r in range(args.rounds):
            try:
                got = one_round(name, args.count, flip=r % 2 == 1)
            except Exception as e:
                if name == "epochlog":
                    raise
                failures[name] = f"round {r + 1}: {e}"  # a peer that fails a case is reported, not measured
                rounds.pop(name, None)
                break
            if got is None:
                failures[name] = "InitProducerId with a transactional id failed"
                break
            rounds.setdefault(name, []).append(got)
    summary: dict[str, dict[str, float]] = {}
    table = Table(title=f"transactions: {args.count} x 1 KiB, commit every {COMMIT_EVERY_S * 1000:.0f} ms, medians")
    for col in (
        "broker",
        "idempotent msg/s",
        "transactional msg/s",
        "ratio",
        "read_uncommitted",
        "read_committed",
        "ratio",
    ):
        table.add_column(col, justify="right")
    for name, rs in rounds.items():
        med = {k: statistics.median(r[k]["msgs_per_s"] for r in rs) for k in rs[0]}
        med["produce_ratio"] = med["transactional"] / med["idempotent"]
        med["consume_ratio"] = med["read_committed"] / med["read_uncommitted"]
        summary[name] = med
        table.add_row(
            name,
            f"{med['idempotent']:,.0f}",
            f"{med['transactional']:,.0f}",
            f"{med['produce_ratio']:.2f}",
            f"{med['read_uncommitted']:,.0f}",
            f"{med['read_committed']:,.0f}",
            f"{med['consume_ratio']:.2f}",
        )
    console = Console(width=140)
    console.print(table)
    for name, why in failures.items():
        console.print(f"{name}: not measured ({why})")
    command = " ".join(["bench/txn_bench.py", *sys.argv[1:]])
    result = {"command": command, "count": args.count, "size": SIZE, "commit_every_s": COMMIT_EVERY_S}
    write_results("txn", {**result, "medians": summary, "not_measured": failures, "rounds": rounds})


if __name__ == "__main__":
    main()
