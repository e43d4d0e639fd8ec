"""How fast the log cleaner compacts (MB/s of dirty log cleaned), and what it does to produce latency.

  PYTHONPATH=src .venv/bin/python bench/cleaner_bench.py [--mb 200] [--quick] [--latency]

For each shape (record size, distinct keys, records per batch, codec) a compacted log is filled on a
real file system with ``--mb`` of dirty data, then cleaned once (offset map + every group rewritten +
swaps) by ``clean_log`` on this thread, as the broker's cleaner thread does. "Dirty MB/s" is the dirty
part's size over the cleaning's wall time (Kafka's own cleaner reports the same ratio); "read MB/s"
counts both passes; "impl" says whether the C record scans (storage/cleaner/_native) or the Python
ones ran. The segment files are in the page cache (just written), as a broker's recent segments are.

``--latency``: a real `epochlog up`, a background producer writing ``--load-mb-s`` of 1 KiB records
over 10,000 keys into a compacted topic, and the acks=all produce latency of another topic at 1,000
msg/s (bench/produce_consume.py's probe), once with log.cleaner.enable=false and once with the cleaner
running (backoff 100 ms, min.cleanable.dirty.ratio 0.01, so it cleans nearly all the time); with
``--process-too`` also with epochlog.log.cleaner.process=true (the cleaning in a child process).

``--offsets N``: a ``__consumer_offsets`` partition (8 MiB segments) holding N offset commits (100 groups
x 10 partitions, 10 commits a batch, as consumers commit), and the time the group coordinator takes to load it (what a
broker's start, or a new coordinator, pays per partition) before and after the cleaner compacts it.

``--loop-lag``: in one process, an asyncio loop that wakes every millisecond (as the broker's does) and
records how late each wake-up is, first idle, then while the broker's LogCleaner (its own thread, swaps
on the loop) cleans ``--mb`` of dirty log: the GIL and the swaps are what a produce would wait for.

Prints tables and writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from results_file import write_results
from rich.console import Console
from rich.table import Table

from epochlog.protocol.records import CODEC_NAMES, LZ4, NONE, Record, build_batch
from epochlog.storage.cleaner import record_filter
from epochlog.storage.cleaner.cleaner import clean_log
from epochlog.storage.config import LogConfig
from epochlog.storage.partition_log import PartitionLog

T0 = 1_700_000_000_000

SHAPES = [
    # (value bytes, distinct keys, records per batch, codec)
    (1000, 10_000, 16, NONE),
    (100, 10_000, 100, NONE),
    (1000, 10_000, 16, LZ4),
    (1000, 1_000_000, 16, NONE),
]


def fill(plog: PartitionLog, mb: int, value_size: int, keys: int, per_batch: int, codec: int, seed: int) -> int:
    rnd = random.Random(seed)
    value = os.urandom(value_size // 2).hex().encode()[:value_size]  # half-compressible, like text
    target = mb << 20
    written = 0
    i = 0
    while written < target:
        recs = [Record(0, T0 + i, b"key-%012d" % rnd.randrange(keys), value) for _ in range(per_batch)]
        batch = build_batch(recs, compression=codec)
        plog.append_as_leader(batch, 0, T0)
        written += len(batch)
        i += 1
    plog.append_as_leader(build_batch([(b"active", b"x")]), 0, T0)
    plog.high_watermark = plog.log_end_offset
    plog.flush()
    return written


def run(mb: int, shape: tuple[int, int, int, int], tmp: Path, native: bool) -> dict:
    value_size, keys, per_batch, codec = shape
    compiled = record_filter.native
    record_filter.native = compiled if native else None
    cfg = LogConfig(segment_bytes=16 << 20, cleanup_policy="compact")
    d = tmp / "bench-0"
    shutil.rmtree(d, ignore_errors=True)
    plog = PartitionLog.open(d, "bench", 0, cfg, recover=False)
    fill(plog, mb, value_size, keys, per_batch, codec, seed=1)
    os.sync()
    before = plog.size_bytes
    t = time.perf_counter()
    try:
        stats = clean_log(plog, T0)
    finally:
        record_filter.native = compiled
    wall = time.perf_counter() - t
    assert stats is not None
    after = plog.size_bytes
    plog.close()
    shutil.rmtree(d, ignore_errors=True)
    return {
        "impl": "C" if native and compiled is not None else "Python",
        "value_bytes": value_size,
        "keys": keys,
        "records_per_batch": per_batch,
        "codec": CODEC_NAMES[codec],
        "dirty_mb": stats.dirty_bytes / 1e6,
        "seconds": wall,
        "dirty_mb_per_s": stats.dirty_bytes / 1e6 / wall,
        "read_mb_per_s": stats.bytes_read / 1e6 / wall,
        "records_read": stats.records_read,
        "records_kept": stats.records_kept,
        "bytes_before": before,
        "bytes_after": after,
    }


def load(bootstrap: str, topic: str, mb_per_s: float, stop: threading.Event) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5})
    rnd = random.Random(2)
    value = os.urandom(500).hex().encode()
    per_tick = max(1, int(mb_per_s * 1e6 / len(value) / 100))  # 100 ticks a second
    nxt = time.perf_counter()
    while not stop.is_set():
        for _ in range(per_tick):
            try:
                p.produce(topic, key=b"key-%06d" % rnd.randrange(10_000), value=value)
            except BufferError:
                p.poll(0.01)
        p.poll(0)
        nxt += 0.01
        time.sleep(max(0.0, nxt - time.perf_counter()))
    p.flush(30)


def latency_run(cleaner: bool, load_mb_s: float, seconds: float, in_process: bool = False) -> dict:
    from brokers import start
    from confluent_kafka.admin import AdminClient, NewTopic
    from produce_consume import latency

    from epochlog.storage.checkpoints import read_offsets

    b = start(
        "epochlog",
        {
            "log.cleaner.enable": str(cleaner).lower(),
            "log.cleaner.backoff.ms": "100",
            "epochlog.log.cleaner.process": str(in_process).lower(),
        },
    )
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        topic_cfg = {"cleanup.policy": "compact", "segment.bytes": str(4 << 20), "min.cleanable.dirty.ratio": "0.01"}
        for f in admin.create_topics([NewTopic("compacted", 1, 1, config=topic_cfg)]).values():
            f.result(30)
        stop = threading.Event()
        bg = threading.Thread(target=load, args=(b.bootstrap, "compacted", load_mb_s, stop))
        bg.start()
        time.sleep(5)  # let dirty segments pile up, so the cleaner has work throughout
        try:
            res = latency(b.bootstrap, 1000, seconds, "all")
        finally:
            stop.set()
            bg.join(60)
        data = b.workdir / "data"
        # The broker logs at WARNING here: what the cleaner did shows in its checkpoint and on disk.
        res["cleaned_to_offset"] = read_offsets(data / "cleaner-offset-checkpoint").get(("compacted", 0), 0)
        res["compacted_disk_mb"] = sum(f.stat().st_size for f in (data / "compacted-0").glob("*.log")) / 1e6
        res["cleaner"] = ("process" if in_process else "thread") if cleaner else "off"
        res["load_mb_s"] = load_mb_s
        return res
    finally:
        b.stop()


class _PartitionStore:
    """The coordinator's OffsetsStore over one PartitionLog (the server's LogOffsetsStore needs a broker)."""

    num_partitions = 1

    def __init__(self, plog: PartitionLog) -> None:
        self.plog = plog

    async def append(self, partition: int, batch: bytes) -> None:
        raise NotImplementedError

    def read_batches(self, partition: int):  # type: ignore[no-untyped-def]
        from epochlog.protocol.record_batch import iter_batches

        offset = self.plog.log_start_offset
        while offset < self.plog.log_end_offset:
            res = self.plog.read(offset, 4 << 20)
            data = b"".join(bytes(c) for c in res.chunks)
            if not data:
                return
            nxt = offset
            for pos, h in iter_batches(data, validate_crc=False):
                if h.next_offset > offset:
                    yield data[pos : pos + h.size]
                    nxt = h.next_offset
            if nxt == offset:
                return
            offset = nxt


def offsets_run(commits: int, tmp: Path) -> dict:
    from epochlog.server.groups import GroupConfig, GroupCoordinator
    from epochlog.server.groups.records import OffsetValue, offset_key, offset_value

    # 8 MiB segments (offsets.topic.segment.bytes=8388608): with Kafka's 100 MiB a million commits would
    # still sit in the active segment, which is never cleaned.
    cfg = LogConfig(segment_bytes=8 << 20, cleanup_policy="compact")
    d = tmp / "__consumer_offsets-0"
    shutil.rmtree(d, ignore_errors=True)
    plog = PartitionLog.open(d, "__consumer_offsets", 0, cfg, recover=False)
    groups, parts = 100, 10
    keys = [[offset_key(f"group-{g}", "orders", p) for p in range(parts)] for g in range(groups)]
    n = 0
    while n < commits:
        g = (n // parts) % groups
        recs = [
            Record(0, T0, keys[g][p], offset_value(OffsetValue(n + p, 3, "", T0)))
            for p in range(min(parts, commits - n))
        ]
        plog.append_as_leader(build_batch(recs), 0, T0)
        n += len(recs)
    plog.append_as_leader(build_batch([(b"active", b"x")]), 0, T0)
    plog.high_watermark = plog.log_end_offset

    def load_seconds() -> tuple[float, int]:
        coord = GroupCoordinator(_PartitionStore(plog), GroupConfig())
        t = time.perf_counter()
        coord._read_partition(0)
        elapsed = time.perf_counter() - t
        return elapsed, sum(len(gr.offsets) for gr in coord.groups.values())

    size_before = plog.size_bytes
    before_s, live = load_seconds()
    t = time.perf_counter()
    stats = clean_log(plog, T0)
    clean_s = time.perf_counter() - t
    assert stats is not None
    after_s, live_after = load_seconds()
    assert live_after == live
    size_after = plog.size_bytes
    plog.close()
    shutil.rmtree(d, ignore_errors=True)
    return {
        "commits": commits,
        "live_offsets": live,
        "bytes_before": size_before,
        "bytes_after": size_after,
        "load_s_before": before_s,
        "load_s_after": after_s,
        "clean_s": clean_s,
    }


def loop_lag_run(mb: int, tmp: Path) -> dict:
    import asyncio

    from epochlog.storage.cleaner.config import CleanerConfig
    from epochlog.storage.cleaner.manager import LogCleaner
    from epochlog.storage.log_dirs import LogDirs

    dirs = LogDirs([tmp / "lag"], LogConfig())
    dirs.open(node_id=1)
    dirs.load_all()
    plog = dirs.create("lag", 0, None, LogConfig(segment_bytes=16 << 20, cleanup_policy="compact"))
    fill(plog, mb, 1000, 10_000, 16, NONE, seed=3)

    def pct(xs: list[float], q: float) -> float:
        xs = sorted(xs)
        return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")

    async def lags(until: asyncio.Future[None] | None, seconds: float) -> list[float]:
        out: list[float] = []
        end = time.perf_counter() + seconds
        while (until is not None and not until.done()) or (until is None and time.perf_counter() < end):
            t = time.perf_counter()
            await asyncio.sleep(0.001)
            out.append((time.perf_counter() - t - 0.001) * 1000)
        return out

    async def main() -> dict:
        idle = await lags(None, 2.0)
        cleaner = LogCleaner(dirs, CleanerConfig(backoff_ms=50))
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        t0 = time.perf_counter()
        cleaner.start(loop)

        async def watch() -> None:
            while not cleaner.rounds:
                await asyncio.sleep(0.01)
            done.set_result(None)

        w = asyncio.create_task(watch())
        busy = await lags(done, 0)
        took = time.perf_counter() - t0
        await w
        cleaner.request_stop()
        while cleaner.running:
            await asyncio.sleep(0.01)
        return {
            "mb": mb,
            "clean_s": took,
            "idle_p50_ms": pct(idle, 0.5),
            "idle_p99_ms": pct(idle, 0.99),
            "idle_max_ms": max(idle),
            "cleaning_p50_ms": pct(busy, 0.5),
            "cleaning_p99_ms": pct(busy, 0.99),
            "cleaning_max_ms": max(busy),
        }

    try:
        return asyncio.run(main())
    finally:
        dirs.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=200, help="dirty data per shape, in MiB")
    ap.add_argument("--quick", action="store_true", help="the first shape only, 50 MiB")
    ap.add_argument("--dir", type=Path, default=None, help="where to write the logs (default: a temp dir)")
    ap.add_argument("--latency", action="store_true", help="also produce p99 with the cleaner off and on")
    ap.add_argument("--load-mb-s", type=float, default=2.0)
    ap.add_argument("--process-too", action="store_true", help="--latency also with the cleaning in a process")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--loop-lag", action="store_true", help="also: event-loop lag while the cleaner runs")
    ap.add_argument("--offsets", type=int, default=0, help="also: coordinator load time of N offset commits")
    args = ap.parse_args()
    shapes = SHAPES[:1] if args.quick else SHAPES
    mb = 50 if args.quick else args.mb
    rows = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for shape in shapes:
            rows.append(run(mb, shape, Path(tmp), native=True))
        if record_filter.native is not None:
            rows.append(run(min(mb, 50), shapes[0], Path(tmp), native=False))
    table = Table(title=f"log cleaner, {mb} MiB dirty per shape")
    for col in ("impl", "value B", "keys", "rec/batch", "codec", "dirty MB", "s", "dirty MB/s", "read MB/s", "kept"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(
            r["impl"],
            str(r["value_bytes"]),
            f"{r['keys']:,}",
            str(r["records_per_batch"]),
            r["codec"],
            f"{r['dirty_mb']:.0f}",
            f"{r['seconds']:.2f}",
            f"{r['dirty_mb_per_s']:.0f}",
            f"{r['read_mb_per_s']:.0f}",
            f"{r['records_kept']:,}/{r['records_read']:,}",
        )
    Console(width=140).print(table)
    result: dict = {"mb": mb, "cpus": os.cpu_count(), "rows": rows}
    if args.loop_lag:
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            lag = loop_lag_run(mb, Path(tmp))
        t4 = Table(
            title=f"event-loop wake-up lateness (1 ms timer), idle vs cleaning {mb} MiB ({lag['clean_s']:.1f} s)"
        )
        for col in ("", "p50 ms", "p99 ms", "max ms"):
            t4.add_column(col, justify="right")
        for k in ("idle", "cleaning"):
            t4.add_row(k, f"{lag[k + '_p50_ms']:.2f}", f"{lag[k + '_p99_ms']:.2f}", f"{lag[k + '_max_ms']:.2f}")
        Console(width=140).print(t4)
        result["loop_lag"] = lag
    if args.offsets:
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            off = offsets_run(args.offsets, Path(tmp))
        t3 = Table(title=f"__consumer_offsets: {off['commits']:,} commits, {off['live_offsets']:,} live offsets")
        for col in ("", "log MB", "coordinator load s"):
            t3.add_column(col, justify="right")
        t3.add_row("history", f"{off['bytes_before'] / 1e6:.1f}", f"{off['load_s_before']:.2f}")
        t3.add_row(
            f"compacted ({off['clean_s']:.1f} s)", f"{off['bytes_after'] / 1e6:.2f}", f"{off['load_s_after']:.3f}"
        )
        Console(width=140).print(t3)
        result["offsets"] = off
    if args.latency:
        lat = [latency_run(False, args.load_mb_s, args.seconds), latency_run(True, args.load_mb_s, args.seconds)]
        if args.process_too:
            lat.append(latency_run(True, args.load_mb_s, args.seconds, in_process=True))
        t2 = Table(title=f"acks=all produce latency at 1,000 msg/s, {args.load_mb_s} MB/s into a compacted topic")
        for col in ("cleaner", "cleaned to", "disk MB", "ack p50 ms", "ack p99 ms", "ack max ms", "e2e p99 ms"):
            t2.add_column(col, justify="right")
        for r in lat:
            t2.add_row(
                r["cleaner"],
                f"{r['cleaned_to_offset']:,}",
                f"{r['compacted_disk_mb']:.0f}",
                f"{r['ack_p50_ms']:.1f}",
                f"{r['ack_p99_ms']:.1f}",
                f"{r['ack_max_ms']:.1f}",
                f"{r['e2e_p99_ms']:.1f}",
            )
        Console(width=140).print(t2)
        result["latency"] = lat
    write_results("cleaner", result)


if __name__ == "__main__":
    main()
