"""The Spark source and sink against other Kafka-protocol brokers (a compatibility check, not a benchmark).

    EPOCHLOG_PEERS_VENV=/tmp/peers .venv/bin/python bench/spark_against_peers.py [noida] [tansu] [epochlog]

For each broker: 20,000 records into 2 partitions with confluent-kafka, then through the `epochlog`
format: a batch read with each reader, a read from startingTimestamp, an availableNow stream run twice
from one checkpoint (the second run validates the saved leader epochs with OffsetsForLeaderEpoch), and
a batch write through the sink read back. Prints one line per check and writes JSON to bench/results/.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from brokers import available, start
from confluent_kafka import Producer
from results_file import write_results

from epochlog.client.admin import admin_client, create_topic, wait_for_partitions
from epochlog.spark.pipeline import local_session, read_stream, stream_to_parquet

N = 20_000
T0 = 1_800_000_000_000


def _read(spark: Any, bootstrap: str, topic: str, **options: str) -> Any:
    r = spark.read.format("epochlog").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _stream_once(spark: Any, bootstrap: str, topic: str, out: Path, ckpt: Path) -> int:
    df = read_stream(spark, bootstrap, topic, startingOffsets="earliest")
    stream_to_parquet(df, str(out), str(ckpt), available_now=True).awaitTermination(120)
    return spark.read.parquet(str(out)).count()


def check(spark: Any, name: str, work: Path) -> dict[str, str]:
    results: dict[str, str] = {}
    b = start(name)
    try:
        topic = f"peer-{uuid.uuid4().hex[:6]}"
        admin = admin_client({"bootstrap.servers": b.bootstrap})
        create_topic(admin, topic, 2, 1)
        wait_for_partitions(admin, topic, 2)
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
        for i in range(N):
            p.produce(topic, b"v%d" % i, key=b"k%d" % (i % 7), partition=i % 2, timestamp=T0 + i)
        p.flush(60)
        expected = {b"v%d" % i for i in range(N)}

        def run(label: str, fn: Any) -> None:
            try:
                results[label] = fn()
            except Exception as e:  # a peer may not implement an API: report it, go on
                results[label] = f"FAILED {type(e).__name__}: {str(e).splitlines()[0][:200]}"
            print(f"{name:8} {label:34} {results[label]}", flush=True)

        for reader in ("auto", "confluent"):

            def batch(reader: str = reader) -> str:
                rows = _read(spark, b.bootstrap, topic, reader=reader).select("value").collect()
                same = {r.value for r in rows} == expected and len(rows) == N
                return f"{len(rows)} rows, {'all values' if same else 'VALUES DIFFER'}"

            run(f"batch read, reader={reader}", batch)
        run(
            "startingTimestamp (expect 5000)",
            lambda: f"{_read(spark, b.bootstrap, topic, startingTimestamp=str(T0 + N - 5000)).count()} rows",
        )

        def stream() -> str:
            out, ckpt = work / f"{name}-out", work / f"{name}-ckpt"
            first = _stream_once(spark, b.bootstrap, topic, out, ckpt)
            p.produce(topic, b"late", partition=0)
            p.flush(10)
            second = _stream_once(spark, b.bootstrap, topic, out, ckpt)
            return f"{first} rows, {second} after a restart (expect {N}, {N + 1})"

        run("availableNow twice from a checkpoint", stream)

        def sink() -> str:
            out_topic = topic + "-out"
            create_topic(admin, out_topic, 2, 1)
            wait_for_partitions(admin, out_topic, 2)
            df = spark.createDataFrame([(b"k", b"x%d" % i) for i in range(1000)], "key binary, value binary")
            df.write.format("epochlog").option("kafka.bootstrap.servers", b.bootstrap).option("topic", out_topic).mode(
                "append"
            ).save()
            return f"read back {_read(spark, b.bootstrap, out_topic).count()} of 1000"

        run("sink batch write", sink)
    finally:
        b.stop()
    return results


def main() -> None:
    names = sys.argv[1:] or ["noida", "tansu"]
    work = Path(tempfile.mkdtemp(prefix="spark-peers-"))
    spark = local_session("epochlog-spark-peers")
    report: dict[str, Any] = {}
    try:
        for name in names:
            if not available(name):
                print(f"{name}: not installed (see bench/brokers.py)")
                continue
            report[name] = check(spark, name, work)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    write_results("spark-peers", report)


if __name__ == "__main__":
    main()
