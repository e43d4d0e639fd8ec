"""Spark source and sink throughput: read N records (100-byte values) into Parquet, and write N through the sink.

    .venv/bin/python bench/spark_bench.py                  # starts its own `epochlog up`, 5M records
    .venv/bin/python bench/spark_bench.py --records 1000000 --bootstrap 127.0.0.1:9092
    .venv/bin/python bench/spark_bench.py --reader confluent    # the source's confluent-kafka-only reader

Prints a table and writes JSON to bench/results/spark-<time>.json. Run on demand, not as a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from results_file import write_results

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_broker(data_dir: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    log = open(data_dir.parent / "broker.log", "ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "epochlog.cli.main", "up", "--port", str(port), "--data-dir", str(data_dir)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"epochlog up exited with {proc.returncode}; see {data_dir.parent / 'broker.log'}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise TimeoutError("epochlog up did not listen within 30 s")


def produce(bootstrap: str, topic: str, partitions: int, n: int, size: int) -> float:
    from confluent_kafka import Producer

    from epochlog.client.admin import admin_client, create_topic, wait_for_partitions

    admin = admin_client({"bootstrap.servers": bootstrap})
    create_topic(admin, topic, partitions, 1)
    wait_for_partitions(admin, topic, partitions)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000, "acks": "all"})
    value = b"v" * size
    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(120)
    return n / (time.perf_counter() - t0)


def _proc_table() -> dict[int, tuple[int, str, float]]:
    """pid -> (parent pid, command name, CPU seconds incl. reaped children) from Linux /proc; {} elsewhere."""
    out: dict[int, tuple[int, str, float]] = {}
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return out
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                raw = f.read()
        except OSError:
            continue
        name = raw[raw.index("(") + 1 : raw.rindex(")")]
        fields = raw[raw.rindex(")") + 2 :].split()
        cpu = sum(int(x) for x in fields[11:15]) / tick  # utime, stime, cutime, cstime
        out[pid] = (int(fields[1]), name, cpu)
    return out


def cpu_by_role(broker_pid: int | None) -> dict[str, float]:
    """CPU seconds so far of this benchmark's own processes: the broker, the JVM, Spark's Python workers
    (children of the JVM), and this driver. Other users of the machine are not counted, so CPU per record
    stays comparable when the wall-clock rate does not."""
    table = _proc_table()
    roles = {"broker": 0.0, "jvm": 0.0, "python_workers": 0.0, "driver": 0.0}
    me = os.getpid()
    for pid, (_ppid, name, cpu) in table.items():
        chain = []
        p = pid
        while p in table and p not in chain and p > 1:
            chain.append(p)
            if p == me:
                break
            p = table[p][0]
        if me not in chain:
            continue
        if pid == me:
            roles["driver"] += cpu
        elif broker_pid is not None and pid == broker_pid:
            roles["broker"] += cpu
        elif name == "java":
            roles["jvm"] += cpu
        elif any(table[a][1] == "java" for a in chain[1:]):
            roles["python_workers"] += cpu
    return roles


def timed(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def cpu_timed(fn: Any, broker_pid: int | None) -> tuple[float, dict[str, float]]:
    """Wall seconds and CPU seconds per role spent while fn ran."""
    before = cpu_by_role(broker_pid)
    t = timed(fn)
    after = cpu_by_role(broker_pid)
    return t, {k: after[k] - before[k] for k in after}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # Every Spark query pays a fixed ~0.3-0.5 s (planning through Python workers, task launch, the Parquet
    # commit) whatever it reads; it is measured separately (query_overhead_s). At 1M records that is a
    # fifth of the run, so the default reads enough for the rate to be the source's, not the job setup's.
    ap.add_argument("--records", type=int, default=5_000_000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--bootstrap", help="use this cluster instead of starting `epochlog up`")
    ap.add_argument("--skip-stream", action="store_true")
    ap.add_argument("--driver-memory", default="1g", help="spark.driver.memory (local mode: the whole JVM heap)")
    ap.add_argument("--warm-runs", type=int, default=4, help="Parquet reads after the cold one; the best is reported")
    ap.add_argument(
        "--reader",
        choices=["auto", "confluent"],
        default="auto",
        help="the source's reader option: auto (plain Fetch, confluent-kafka for the rest) or confluent",
    )
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="epochlog-spark-bench-"))
    proc = None
    spark = None
    try:
        if args.bootstrap:
            bootstrap = args.bootstrap
        else:
            (work / "data").mkdir()
            proc, bootstrap = start_broker(work / "data")
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        n = args.records
        print(f"producing {n:,} records of {args.value_size} B into {topic} ({args.partitions} partitions)...")
        produce_rate = produce(bootstrap, topic, args.partitions, n, args.value_size)

        from epochlog.spark.pipeline import JVM_THROUGHPUT, local_session, read_stream, stream_to_parquet

        spark = local_session("epochlog-spark-bench", driver_memory=args.driver_memory, jvm_options=JVM_THROUGHPUT)
        results: dict[str, Any] = {
            "records": n,
            "value_size": args.value_size,
            "partitions": args.partitions,
            "produce_rows_per_s": round(produce_rate),
            "master": "local[2]",
            "reader": args.reader,
            "driver_memory": args.driver_memory,
            "cpus": os.cpu_count(),
        }

        def source(ending: str = "latest") -> Any:
            return (
                spark.read.format("epochlog")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic)
                .option("reader", args.reader)
                .option("endingOffsets", ending)
                .load()
            )

        # Warm-up: JVM start, the JIT compiling the Arrow and Parquet paths and the Python workers cost
        # seconds that are not throughput; the first (cold) run is reported too.
        out = work / "batch.parquet"
        broker_pid = proc.pid if proc is not None else None
        runs = []
        for _ in range(1 + args.warm_runs):
            runs.append(cpu_timed(lambda: source().write.mode("overwrite").parquet(str(out)), broker_pid))
        count = spark.read.parquet(str(out)).count()
        assert count == n, f"batch read {count} rows, expected {n}"
        t, cpu = min(runs[1:], key=lambda r: r[0])
        results["batch_read_to_parquet_cold_s"] = round(runs[0][0], 2)
        results["batch_read_to_parquet_s"] = round(t, 2)
        results["batch_read_rows_per_s"] = round(n / t)
        results["batch_read_rows_per_s_warm_runs"] = [round(n / r[0]) for r in runs[1:]]
        # The fixed cost of one query: the same read and write for 1,000 records.
        tiny = json.dumps({topic: {str(p): 1000 // args.partitions for p in range(args.partitions)}})
        tiny_out = str(work / "tiny.parquet")
        overheads = sorted(timed(lambda: source(tiny).write.mode("overwrite").parquet(tiny_out)) for _ in range(5))
        results["query_overhead_s"] = round(overheads[2], 3)
        # CPU per record of the best warm run, by process (local broker only): robust to other load.
        for role, secs in cpu.items():
            results[f"batch_read_to_parquet_cpu_us_per_record_{role}"] = round(secs / n * 1e6, 2)
        t, cpu = min(
            (cpu_timed(lambda: source().write.format("noop").mode("overwrite").save(), broker_pid) for _ in range(2)),
            key=lambda r: r[0],
        )
        results["batch_read_noop_rows_per_s"] = round(n / t)
        results["batch_read_noop_cpu_us_per_record_python_workers"] = round(cpu["python_workers"] / n * 1e6, 2)
        results["batch_read_noop_cpu_us_per_record_jvm"] = round(cpu["jvm"] / n * 1e6, 2)

        if not args.skip_stream:
            sout, ckpt = work / "stream.parquet", work / "ckpt"

            def stream() -> None:
                df = read_stream(spark, bootstrap, topic, reader=args.reader, startingOffsets="earliest")
                stream_to_parquet(df, str(sout), str(ckpt), available_now=True).awaitTermination(600)

            t = timed(stream)
            count = spark.read.parquet(str(sout)).count()
            assert count == n, f"streaming read {count} rows, expected {n}"
            results["stream_available_now_s"] = round(t, 2)
            results["stream_available_now_rows_per_s"] = round(n / t)

        # Sink: write the rows just read back into a new topic (batch write, idempotent producer).
        sink_topic = topic + "-out"
        from epochlog.client.admin import admin_client, create_topic

        create_topic(admin_client({"bootstrap.servers": bootstrap}), sink_topic, args.partitions, 1)
        df = spark.read.parquet(str(out)).select("key", "value").cache()
        df.count()
        t = timed(
            lambda: (
                df.write.format("epochlog")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("topic", sink_topic)
                .mode("append")
                .save()
            )
        )
        results["sink_write_s"] = round(t, 2)
        results["sink_write_rows_per_s"] = round(n / t)
        df.unpersist()

        width = max(len(k) for k in results)
        print()
        for k, v in results.items():
            print(f"{k:<{width}}  {v:>14,}" if isinstance(v, int) else f"{k:<{width}}  {v!s:>14}")
        print()
        write_results("spark", results)
    finally:
        if spark is not None:
            spark.stop()
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
