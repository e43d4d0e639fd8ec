"""A Spark driver for the sink's crash tests, run as its own process so a test can kill -9 it.

    python tests/spark/sink_query.py BOOTSTRAP SRC DST CHECKPOINT [--max-per-trigger N] [--master local[2,4]]

Streams SRC into DST through the `epochlog` sink with availableNow (micro-batches of at most N records) from
CHECKPOINT, prints one JSON line with the query's id and batches, and exits 0. The sink's test hook
(EPOCHLOG_SINK_FAULT, EPOCHLOG_SINK_FAULT_FILE) comes in through the environment, which Spark's JVM and its
Python workers inherit.
"""

from __future__ import annotations

import argparse
import json
import sys


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("bootstrap")
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("checkpoint")
    ap.add_argument("--max-per-trigger", type=int, default=0)
    ap.add_argument("--master", default="local[2]")
    a = ap.parse_args()

    import epochlog
    from epochlog.spark.pipeline import local_session

    spark = local_session("epochlog-sink-crash", master=a.master)
    spark.sparkContext.setLogLevel("ERROR")
    r = (
        spark.readStream.format("epochlog")
        .option("kafka.bootstrap.servers", a.bootstrap)
        .option("subscribe", a.src)
        .option("startingOffsets", "earliest")
    )
    if a.max_per_trigger:
        r = r.option("maxOffsetsPerTrigger", str(a.max_per_trigger))
    q = (
        r.load()
        .selectExpr("key", "value")
        .writeStream.format("epochlog")
        .option("kafka.bootstrap.servers", a.bootstrap)
        .option("topic", a.dst)
        .option("checkpointLocation", a.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    ok = q.awaitTermination(240)
    exc = q.exception()
    batches = [p["batchId"] for p in q.recentProgress]
    print(
        json.dumps(
            {
                "query": str(q.id),
                "ok": bool(ok),
                "error": str(exc) if exc else None,
                "batches": batches,
                "epochlog": epochlog.__file__,
            }
        )
    )
    sys.stdout.flush()
    spark.stop()
    return 0 if ok and exc is None else 1


if __name__ == "__main__":
    sys.exit(main())
