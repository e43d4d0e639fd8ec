"""Reusable pieces of an epochlog Spark pipeline: a small local session and a topic-to-Parquet stream.

`epochlog demo` (and the tests and the benchmark) build on these, so the session settings that were
measured to work on a 2-core machine live in one place.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

# Measured on this machine: serial GC and C1-only JIT start the JVM ~12% faster for short runs (tests), but
# without C2 the Parquet writer is 2-3x slower once warm, so long jobs and the benchmark use THROUGHPUT.
JVM_FAST_START = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
JVM_THROUGHPUT = "-XX:+UseParallelGC"


def local_session(
    app: str = "epochlog",
    master: str = "local[2]",
    driver_memory: str = "1g",
    shuffle_partitions: int = 2,
    extra: Mapping[str, str] | None = None,
    jvm_options: str = JVM_FAST_START,
) -> Any:
    """A local SparkSession with the UI off and the epochlog format registered."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Workers must import epochlog: run them with this interpreter, not whatever python3 is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("JAVA_HOME", "/usr/lib/jvm/java-17-openjdk-amd64")
    from pyspark.sql import SparkSession

    b = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.driver.memory", driver_memory)
        .config("spark.driver.extraJavaOptions", jvm_options)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.python.worker.reuse", "true")
    )
    for k, v in (extra or {}).items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    from epochlog.spark import register

    register(spark)
    return spark


def read_stream(spark: Any, bootstrap: str, topic: str, **options: str) -> Any:
    """A streaming DataFrame over one or more comma-separated topics (Spark's Kafka options apply)."""
    r = spark.readStream.format("epochlog").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def stream_to_parquet(
    df: Any,
    path: str,
    checkpoint: str,
    *,
    available_now: bool = False,
    processing_time: str | None = None,
    query_name: str | None = None,
) -> Any:
    """Start writing a streaming DataFrame into Parquet files; returns the StreamingQuery."""
    w = df.writeStream.format("parquet").option("path", path).option("checkpointLocation", checkpoint)
    if query_name:
        w = w.queryName(query_name)
    if available_now:
        w = w.trigger(availableNow=True)
    elif processing_time:
        w = w.trigger(processingTime=processing_time)
    return w.start()


def stream_to_topic(
    df: Any,
    bootstrap: str,
    topic: str | None,
    checkpoint: str,
    *,
    available_now: bool = False,
    processing_time: str | None = None,
    **options: str,
) -> Any:
    """Start an exactly-once streaming write into a topic through the epochlog sink."""
    w = (
        df.writeStream.format("epochlog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("checkpointLocation", checkpoint)
    )
    if topic:
        w = w.option("topic", topic)
    for k, v in options.items():
        w = w.option(k, v)
    if available_now:
        w = w.trigger(availableNow=True)
    elif processing_time:
        w = w.trigger(processingTime=processing_time)
    return w.start()
