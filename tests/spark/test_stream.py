"""Micro-batch reads, restarts from the checkpoint, the exactly-once sink and leader-epoch validation."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.spark.conftest import consume_all, make_topic, produce, stream

pytestmark = pytest.mark.timeout(150)


def _run_available_now(df: Any, out: Path, ckpt: Path) -> Any:
    q = (
        df.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(90), "availableNow query did not finish"
    assert q.exception() is None, q.exception()
    return q


def _offsets(spark: Any, out: Path) -> list[tuple[int, int]]:
    return sorted((r.partition, r.offset) for r in spark.read.parquet(str(out)).select("partition", "offset").collect())


def test_available_now_restart_no_gap_no_duplicate(spark: Any, bootstrap: str, tmp_path: Path) -> None:
    topic = make_topic(bootstrap, partitions=2)
    produce(bootstrap, topic, [b"a%d" % i for i in range(30)], partition=0)
    produce(bootstrap, topic, [b"b%d" % i for i in range(10)], partition=1)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    q = _run_available_now(stream(spark, bootstrap, topic, maxOffsetsPerTrigger="15"), out, ckpt)
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 40 and max(sizes) <= 15 and len(sizes) >= 3, sizes

    # The checkpoint carries each partition's leader epoch next to its offset.
    last = max((p for p in (ckpt / "offsets").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    saved = json.loads(last.read_text().splitlines()[-1])
    assert saved[topic]["0"] == {"offset": 30, "epoch": 0}

    produce(bootstrap, topic, [b"c%d" % i for i in range(5)], partition=1)
    _run_available_now(stream(spark, bootstrap, topic), out, ckpt)
    assert _offsets(spark, out) == [(0, o) for o in range(30)] + [(1, o) for o in range(15)]


def test_processing_time_trigger(spark: Any, bootstrap: str, tmp_path: Path) -> None:
    topic = make_topic(bootstrap)
    produce(bootstrap, topic, [b"x%d" % i for i in range(5)])
    q = (
        stream(spark, bootstrap, topic, minOffsetsPerTrigger="1", maxTriggerDelay="1s")
        .writeStream.format("memory")
        .queryName("pt_" + topic.replace("-", "_"))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="300 milliseconds")
        .start()
    )
    try:
        table = "pt_" + topic.replace("-", "_")
        deadline = time.monotonic() + 60
        produced = False
        while time.monotonic() < deadline:
            n = spark.sql(f"select count(*) c from {table}").collect()[0].c
            if n >= 5 and not produced:
                produce(bootstrap, topic, [b"y%d" % i for i in range(7)])
                produced = True
            if n >= 12:
                break
            time.sleep(0.3)
        assert q.exception() is None, q.exception()
        offsets = sorted(r.offset for r in spark.sql(f"select offset from {table}").collect())
        assert offsets == list(range(12))
    finally:
        q.stop()


def test_sink_replayed_batch_writes_nothing_twice(spark: Any, bootstrap: str, tmp_path: Path) -> None:
    src, dst = make_topic(bootstrap, prefix="src"), make_topic(bootstrap, prefix="dst")
    produce(bootstrap, src, [b"r%d" % i for i in range(20)], keys=[b"k%d" % i for i in range(20)])
    ckpt = tmp_path / "ckpt"

    def run() -> None:
        q = (
            stream(spark, bootstrap, src)
            .selectExpr(
                "key",
                "value",
                "array(named_struct('key', 'src-offset', 'value', cast(cast(offset as string) as binary))) as headers",
            )
            .writeStream.format("epochlog")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", dst)
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        assert q.awaitTermination(90)
        assert q.exception() is None, q.exception()

    run()
    assert len(consume_all(bootstrap, dst)) == 20
    # A crash after the sink wrote but before Spark recorded the batch: drop Spark's commit of the last
    # batch, so the restart replays it with the same offsets.
    commits = sorted((ckpt / "commits").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    last = [p for p in commits if p.name.isdigit()][-1]
    last.unlink()
    (ckpt / "commits" / f".{last.name}.crc").unlink(missing_ok=True)
    run()
    msgs = consume_all(bootstrap, dst)
    assert sorted(bytes(m.value()) for m in msgs) == sorted(b"r%d" % i for i in range(20))
    assert all(dict(m.headers())["src-offset"] for m in msgs)

    # Batch write of a DataFrame with a topic column and a partition column.
    out = make_topic(bootstrap, prefix="batch")
    spark.createDataFrame([(out, "v1", 0), (out, "v2", 0)], "topic string, value string, partition int").write.format(
        "epochlog"
    ).option("kafka.bootstrap.servers", bootstrap).mode("append").save()
    assert sorted(bytes(m.value()) for m in consume_all(bootstrap, out)) == [b"v1", b"v2"]
    with pytest.raises(Exception, match="Required attribute 'value' not found"):
        spark.createDataFrame([("x",)], "key string").write.format("epochlog").option(
            "kafka.bootstrap.servers", bootstrap
        ).option("topic", out).mode("append").save()


def _craft_truncated_checkpoint(ckpt: Path, out: Path, topic: str, offset: int, epoch: int) -> None:
    """Add a committed batch whose end claims `offset` in `epoch`: what a query would have saved had it
    read records that a later unclean election then truncated away."""
    offsets = ckpt / "offsets"
    last = max((p for p in offsets.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    lines = last.read_text().splitlines()
    nxt = str(int(last.name) + 1)
    lines[-1] = json.dumps({topic: {"0": {"offset": offset, "epoch": epoch}}})
    (offsets / nxt).write_text("\n".join(lines))
    (ckpt / "commits" / nxt).write_text((ckpt / "commits" / last.name).read_text())
    (out / "_spark_metadata" / nxt).write_text("v1")  # the file sink's log: that batch wrote no files


@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_truncation_detected_by_leader_epoch(
    spark: Any, broker_factory: Any, tmp_path: Path, fail_on_data_loss: str
) -> None:
    """A crafted truncation on one broker: the query saved (20, epoch 0), the leader's epoch 0 ends at 10
    and the log has grown back past 20 in a later epoch. Offsets alone look fine; the epoch does not."""
    broker = broker_factory()
    bs = broker.bootstrap
    topic = make_topic(bs)
    produce(bs, topic, [b"old%d" % i for i in range(10)])
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    _run_available_now(stream(spark, bs, topic), out, ckpt)
    broker.restart()  # the returning leader gets a new epoch (KIP-101)
    produce(bs, topic, [b"new%d" % i for i in range(15)])  # offsets 10..24 in epoch 1
    _craft_truncated_checkpoint(ckpt, out, topic, 20, 0)

    df = stream(spark, bs, topic, failOnDataLoss=fail_on_data_loss)
    q = (
        df.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    if fail_on_data_loss == "true":
        with pytest.raises(Exception, match=rf"{topic}-0: position 20 \(epoch 0\) diverges at offset 10"):
            q.awaitTermination(90)
        return
    assert q.awaitTermination(90) and q.exception() is None
    values = sorted(bytes(r.value) for r in spark.read.parquet(str(out)).collect())
    # Resumed at the divergence offset: the 10 old records, then all 15 records written after it.
    assert values == sorted([b"old%d" % i for i in range(10)] + [b"new%d" % i for i in range(15)])
