"""Share group (KIP-932) throughput: 1, 2 and 4 confluent-kafka ShareConsumers on ONE partition of one
`epochlog up` node.

  PYTHONPATH=src .venv/bin/python bench/share_bench.py [--records 200000] [--rounds 3] [--counts 1,2,4]

The partition is filled first (``--records`` records of ``--size`` bytes, ``--batch-records`` to a log batch).
Then, per round and consumer count, a new share group (group config ``share.auto.offset.reset=earliest``) of
that many consumers, one thread each, reads it to the end in implicit acknowledgement mode (a poll accepts
what the poll before it returned); once every record has been delivered, each consumer commits its last
acceptances with ``commit_sync``. Measured from the first record delivered to the last commit's answer:
records consumed and accepted per second; and, since the first consumer reads alone until the others have
joined, the rate from the moment every consumer has had records (only when they all did before the end).
The consumer counts alternate within each round (rotated between rounds), as the shared machine drifts; the
table shows the median of rounds with the min-max.
Records delivered twice are counted (they should be none).
Prints a table and writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from brokers import start
from confluent_kafka import Producer, ShareConsumer
from produce_consume import create_topic
from results_file import write_results
from rich.console import Console
from rich.table import Table

from epochlog.client.configs import alter

TOPIC = "share-bench"
GROUP_CONFIG = 32  # ConfigResource type GROUP
SETTINGS = {"group.share.heartbeat.interval.ms": "500", "group.initial.rebalance.delay.ms": "0"}


class Reader(threading.Thread):
    """One ShareConsumer: the offsets it was delivered, when the first came, when its last commit was answered."""

    def __init__(self, bootstrap: str, group: str, name: str, done: threading.Event) -> None:
        super().__init__(name=name, daemon=True)
        self.conf = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name}
        self.done = done
        self.offsets: list[int] = []  # appended by this thread only; read by the main thread (atomic appends)
        self.polls: list[tuple[float, int]] = []  # (time, records) of each poll that returned some
        self.first = 0.0
        self.committed = 0.0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            c = ShareConsumer(self.conf)
            try:
                c.subscribe([TOPIC])
                while not self.done.is_set():
                    got = [m.offset() or 0 for m in (c.poll(0.1) or []) if m.error() is None]
                    if got:
                        now = time.monotonic()
                        self.first = self.first or now
                        self.polls.append((now, len(got)))
                    self.offsets.extend(got)
                c.commit_sync(30)  # the acceptances of the last poll
                self.committed = time.monotonic()
            finally:
                c.close()
        except BaseException as e:  # reported by the main thread
            self.error = e


def fill(bootstrap: str, records: int, size: int, per_batch: int) -> float:
    # The log's batches are what a share fetch acquires whole: librdkafka's defaults would make batches of
    # thousands of records, more than group.share.partition.max.record.locks (2,000), so one consumer would
    # hold every lock and the others read nothing.
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": per_batch, "acks": "1"})
    value = b"x" * size
    t0 = time.monotonic()
    for _ in range(records):
        while True:
            try:
                p.produce(TOPIC, value, partition=0)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0, "the fill did not finish"
    return time.monotonic() - t0


def one_run(bootstrap: str, count: int, records: int, timeout: float) -> dict[str, Any]:
    group = f"share-bench-{uuid.uuid4().hex[:8]}"
    alter(bootstrap, GROUP_CONFIG, group, {"share.auto.offset.reset": "earliest"}, [])
    done = threading.Event()
    readers = [Reader(bootstrap, group, f"c{i}", done) for i in range(count)]
    t0 = time.monotonic()
    for r in readers:
        r.start()
    deadline = t0 + timeout
    try:
        while sum(len(r.offsets) for r in readers) < records:
            for r in readers:
                if r.error is not None:
                    raise RuntimeError(f"{r.name}: {r.error}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{sum(len(r.offsets) for r in readers)} of {records} in {timeout} s")
            time.sleep(0.02)  # polling the readers' progress, not synchronizing with them
    finally:
        done.set()
        for r in readers:
            r.join(60)
    first = min(r.first for r in readers if r.first)
    end = max(r.committed for r in readers)
    delivered = [o for r in readers for o in r.offsets]
    # The first consumer reads alone until the others have joined (a heartbeat or so): the steady rate is
    # taken from the moment every consumer has had records, when all of them did.
    all_in = max(r.first for r in readers) if all(r.first for r in readers) else None
    after = sum(n for r in readers for t, n in r.polls if all_in is not None and t > all_in)
    return {
        "consumers": count,
        "records_per_s": records / (end - first),
        "all_reading_records_per_s": after / (end - all_in) if all_in is not None and after else None,
        "all_reading_records": after,
        "seconds": end - first,
        "join_s": first - t0,  # from the consumers' start to the first record
        "per_consumer": sorted((len(r.offsets) for r in readers), reverse=True),
        "duplicates": len(delivered) - len(set(delivered)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100, help="bytes a record")
    ap.add_argument("--batch-records", type=int, default=100, help="records a log batch (as the fill writes them)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--counts", default="1,2,4", help="consumer counts, comma-separated")
    ap.add_argument("--timeout", type=float, default=600, help="seconds one run may take")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = ap.parse_args()
    counts = [int(c) for c in args.counts.split(",") if c]
    results: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "records": args.records,
        "size": args.size,
        "batch_records": args.batch_records,
        "rounds": args.rounds,
        "broker_settings": SETTINGS,
        "runs": {str(c): [] for c in counts},
    }
    b = start("epochlog", SETTINGS)
    try:
        create_topic(b.bootstrap, TOPIC, 1)
        results["fill_s"] = fill(b.bootstrap, args.records, args.size, args.batch_records)
        for rnd in range(args.rounds):
            for c in counts[rnd % len(counts) :] + counts[: rnd % len(counts)]:
                row = one_run(b.bootstrap, c, args.records, args.timeout)
                results["runs"][str(c)].append(row)
                print(
                    f"round {rnd + 1}, {c} consumer(s): {row['records_per_s']:.0f} records/s "
                    f"({row['seconds']:.2f} s, split {row['per_consumer']}, {row['duplicates']} duplicates)",
                    file=sys.stderr,
                )
    finally:
        b.stop()
    show(results)
    write_results("share", results, Path(args.out))


def show(results: dict[str, Any]) -> None:
    table = Table(
        title=f"share group on one partition: {results['records']} records of {results['size']} B "
        "consumed and accepted (median of rounds, \\[min-max])"
    )
    cols = ("consumers", "records/s", "records/s once all read", "seconds", "first record after", "split", "duplicates")
    for col in cols:
        table.add_column(col, justify="right")
    for count, rows in results["runs"].items():
        if not rows:
            continue
        rates = [r["records_per_s"] for r in rows]
        steady = [r["all_reading_records_per_s"] for r in rows if r["all_reading_records_per_s"]]
        table.add_row(
            count,
            f"{statistics.median(rates):,.0f} [{min(rates):,.0f}-{max(rates):,.0f}]",
            f"{statistics.median(steady):,.0f} ({len(steady)} of {len(rows)} rounds)" if steady else "-",
            f"{statistics.median(r['seconds'] for r in rows):.2f}",
            f"{statistics.median(r['join_s'] for r in rows):.2f} s",
            "/".join(str(n) for n in rows[len(rows) // 2]["per_consumer"]),
            str(sum(r["duplicates"] for r in rows)),
        )
    Console(width=150).print(table)


if __name__ == "__main__":
    main()
