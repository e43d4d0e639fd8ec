"""The demo's Spark side: the streaming query into Parquet, its shutdown and what it wrote."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from epochlog.demo.events import EVENT_DDL
from epochlog.demo.model import BatchInfo

log = logging.getLogger("epochlog.demo")


class SparkJob:
    """Two streaming queries over the topic, both reading with isolation.level=read_committed:

    - epochlog source -> parse JSON -> raw events and per-window counts in Parquet. foreachBatch writes each
      micro-batch into directories named by its batch id with mode overwrite, so a micro-batch that Spark
      replays (after a failure between the write and the commit) replaces its own output instead of adding
      to it;
    - epochlog source -> the `epochlog` sink into a second topic (same partition for each record): the
      sink's exactly-once path, one Kafka transaction per write task and micro-batch.
    """

    def __init__(self, spark: Any, bootstrap: str, topic: str, out_dir: Path, clock: Callable[[], float]):
        self.spark, self.bootstrap, self.topic, self.clock = spark, bootstrap, topic, clock
        self.raw = out_dir / "raw"
        self.aggregates = out_dir / "country_counts_10s"
        self.checkpoint = out_dir / "checkpoint"
        self.eos_checkpoint = out_dir / "checkpoint-eos"
        self.eos_query: Any = None
        self.batches: dict[int, BatchInfo] = {}
        self.query: Any = None
        self._lock = threading.Lock()
        self._logged = False

    def _write_batch(self, df: Any, batch_id: int) -> None:
        from pyspark.sql import functions as F

        started = time.monotonic()
        df = df.persist()
        try:
            rows = df.count()
            if rows:
                name = f"batch={batch_id:06d}"
                df.write.mode("overwrite").parquet(str(self.raw / name))
                (
                    df.groupBy(F.window(F.timestamp_millis("ts"), "10 seconds").alias("w"), "country")
                    .agg(F.count("*").alias("views"), F.countDistinct("user").alias("users"))
                    .select(
                        F.col("w.start").alias("window_start"),
                        F.col("w.end").alias("window_end"),
                        "country",
                        "views",
                        "users",
                    )
                    .coalesce(1)
                    .write.mode("overwrite")
                    .parquet(str(self.aggregates / name))
                )
        finally:
            df.unpersist()
        with self._lock:
            self.batches[batch_id] = BatchInfo(batch_id, self.clock(), rows, time.monotonic() - started)

    def start(self, trigger_seconds: float) -> Any:
        from pyspark.sql import functions as F

        src = self._source()
        events = src.select(
            "partition",
            "offset",
            F.col("timestamp").alias("log_time"),
            F.from_json(F.col("value").cast("string"), EVENT_DDL).alias("e"),
        ).select("partition", "offset", "log_time", "e.*")
        self.query = (
            events.writeStream.queryName("epochlog_demo")
            .option("checkpointLocation", str(self.checkpoint))
            .foreachBatch(self._write_batch)
            .trigger(processingTime=f"{trigger_seconds:g} seconds")
            .start()
        )
        return self.query

    def _source(self) -> Any:
        from epochlog.spark.pipeline import read_stream

        return read_stream(
            self.spark,
            self.bootstrap,
            self.topic,
            startingOffsets="earliest",
            failOnDataLoss="true",
            # librdkafka in the Spark workers prints every refused connection to the killed broker on stderr;
            # those are expected here, and a real failure fails the query, which the demo reports.
            **{"kafka.log_level": "2", "kafka.isolation.level": "read_committed"},
        )

    def start_copy(self, trigger_seconds: float, out_topic: str) -> Any:
        """The second query: every record into `out_topic`, same key, value and partition, exactly once."""
        from epochlog.spark.pipeline import stream_to_topic

        self.eos_query = stream_to_topic(
            self._source().selectExpr("key", "value", "partition"),
            self.bootstrap,
            out_topic,
            str(self.eos_checkpoint),
            available_now=False,
            processing_time=f"{trigger_seconds:g} seconds",
            **{"kafka.log_level": "2"},
        )
        return self.eos_query

    def rows_written(self) -> int:
        with self._lock:
            return sum(b.rows for b in self.batches.values())

    def batch_list(self) -> list[BatchInfo]:
        with self._lock:
            return sorted(self.batches.values(), key=lambda b: b.batch_id)

    def committed_offsets(self, query: Any = None) -> dict[int, int]:
        """Next offset per partition of the last completed micro-batch, from the query's progress."""
        query = query if query is not None else self.query
        prog = query.lastProgress if query is not None else None
        if not prog:
            return {}
        out: dict[int, int] = {}
        for s in prog.get("sources", []):
            end = s.get("endOffset")
            if isinstance(end, str):
                try:
                    end = json.loads(end)
                except ValueError:
                    continue
            for p, pos in (end or {}).get(self.topic, {}).items():
                out[int(p)] = int(pos["offset"] if isinstance(pos, dict) else pos)
        return out

    def stop(self, timeout: float = 60.0) -> None:
        if self.eos_query is not None:
            try:
                deadline = time.monotonic() + min(timeout, 30.0)
                while self.eos_query.isActive and self.eos_query.status.get("isTriggerActive"):
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.1)
                if self.eos_query.isActive:
                    self.eos_query.stop()
                self.eos_query.awaitTermination(timeout)
            except Exception as e:
                log.debug("copy query stop: %s", e)
        if self.query is None:
            return
        try:
            # Stopping while foreachBatch runs interrupts the Python callback, and Spark 4 then dies with a
            # StackOverflowError matching the long Py4J error text; stopping between triggers is clean.
            deadline = time.monotonic() + min(timeout, 30.0)
            while self.query.isActive and self.query.status.get("isTriggerActive") and time.monotonic() < deadline:
                time.sleep(0.1)
            for prog in [] if self._logged else self.query.recentProgress or []:  # where each batch's time went
                log.info(
                    "micro-batch %s: %s rows, durations %s",
                    prog.get("batchId"),
                    prog.get("numInputRows"),
                    prog.get("durationMs"),
                )
            self._logged = True
            if self.query.isActive:
                self.query.stop()
            self.query.awaitTermination(timeout)
        except Exception as e:  # a failed query raises here again; its exception was recorded already
            log.debug("query stop: %s", e)


def stop_spark(spark: Any, launched_jvm: bool) -> None:
    """Stop the session; when the demo launched the JVM, end that process too (by its pid, via Popen)."""
    try:
        spark.stop()
    except Exception as e:
        log.warning("spark.stop failed: %s", e)
    if not launched_jvm:
        return
    from pyspark import SparkContext

    gw = SparkContext._gateway
    proc = getattr(gw, "proc", None)
    try:
        if gw is not None:
            gw.shutdown()
    except Exception as e:
        log.debug("gateway shutdown: %s", e)
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except Exception:
            proc.kill()
            proc.wait(10)
    SparkContext._gateway = None
    SparkContext._jvm = None


def quiet_log4j(path: Path, log_file: Path) -> Path:
    path.write_text(
        "rootLogger.level = warn\n"
        "rootLogger.appenderRef.file.ref = file\n"
        "appender.file.type = File\n"
        "appender.file.name = file\n"
        f"appender.file.fileName = {log_file}\n"
        "appender.file.layout.type = PatternLayout\n"
        "appender.file.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n\n"
    )
    return path


# -- checking the output --------------------------------------------------------------------------------


def read_output(raw: Path) -> list[tuple[int, int, str]]:
    """(partition, offset, id) of every row in the raw Parquet output."""
    import pyarrow.dataset as ds

    if not raw.exists() or not any(raw.iterdir()):
        return []
    table = ds.dataset(str(raw), format="parquet", partitioning="hive").to_table(columns=["partition", "offset", "id"])
    return list(
        zip(
            table.column("partition").to_pylist(),
            table.column("offset").to_pylist(),
            table.column("id").to_pylist(),
            strict=True,
        )
    )


def read_aggregates(path: Path) -> tuple[int, int, list[tuple[str, int]]]:
    """(rows, total views, views per country, most first) of the per-window aggregates."""
    import pyarrow.dataset as ds

    if not path.exists() or not any(path.iterdir()):
        return 0, 0, []
    t = ds.dataset(str(path), format="parquet", partitioning="hive").to_table(columns=["country", "views"])
    per: Counter[str] = Counter()
    for c, v in zip(t.column("country").to_pylist(), t.column("views").to_pylist(), strict=True):
        per[c] += v
    return t.num_rows, sum(per.values()), per.most_common()
