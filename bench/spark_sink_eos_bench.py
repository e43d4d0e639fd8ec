"""The streaming sink's cost: N records (100-byte values) streamed from a topic into another through the
`epochlog` sink, availableNow in 4 micro-batches, after one warm-up run in the same Spark session.

    .venv/bin/python bench/spark_sink_eos_bench.py                  # starts its own `epochlog up`, 300k records
    .venv/bin/python bench/spark_sink_eos_bench.py --records 1000000

The sink measured is the one `epochlog` imports: to compare with another version, run the script with
PYTHONPATH pointing at that version's src/ (docs/spark.md compares the transactional sink with the
idempotent-only one of commit f101990 that way). Prints one JSON line and writes bench/results/spark-sink-*.json.
Run on demand, not as a test.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from results_file import write_results


def _topic(bootstrap: str, partitions: int) -> str:
    from epochlog.client.admin import admin_client, create_topic, wait_for_partitions

    name = f"sinkbench-{uuid.uuid4().hex[:8]}"
    admin = admin_client({"bootstrap.servers": bootstrap})
    create_topic(admin, name, partitions, 1)
    wait_for_partitions(admin, name, partitions)
    return name


def _produce(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 2_000_000,
        }
    )
    v = b"x" * 100
    for i in range(n):
        while True:
            try:
                p.produce(topic, v, partition=i % 2)
                break
            except BufferError:
                p.poll(0.05)
    if p.flush(120):
        raise RuntimeError("records not acknowledged")


def _run(spark: Any, bootstrap: str, src: str, n: int, ckpt: Path) -> dict[str, Any]:
    dst = _topic(bootstrap, 2)
    t = time.monotonic()
    q = (
        spark.readStream.format("epochlog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(n // 4))
        .load()
        .selectExpr("key", "value", "partition")
        .writeStream.format("epochlog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", dst)
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    if not q.awaitTermination(900) or q.exception() is not None:
        raise RuntimeError(f"query failed: {q.exception()}")
    dt = time.monotonic() - t
    return {
        "seconds": round(dt, 2),
        "rows_per_s": round(n / dt),
        "add_batch_ms": [p["durationMs"].get("addBatch") for p in q.recentProgress],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=300_000)
    a = ap.parse_args()

    from tests.broker_process import BrokerProcess

    import epochlog
    from epochlog.spark.pipeline import JVM_THROUGHPUT, local_session

    tmp = Path(tempfile.mkdtemp(prefix="sinkbench-"))
    broker = BrokerProcess(tmp / "data").start()
    try:
        src = _topic(broker.bootstrap, 2)
        _produce(broker.bootstrap, src, a.records)
        spark = local_session("sinkbench", jvm_options=JVM_THROUGHPUT)
        spark.sparkContext.setLogLevel("ERROR")
        res: dict[str, Any] = {"epochlog": epochlog.__file__, "records": a.records}
        res["warm_up"] = _run(spark, broker.bootstrap, src, a.records, tmp / "ckpt-warm")
        res["measured"] = _run(spark, broker.bootstrap, src, a.records, tmp / "ckpt")
        spark.stop()
    finally:
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(res))
    write_results("spark-sink", res)


if __name__ == "__main__":
    main()
