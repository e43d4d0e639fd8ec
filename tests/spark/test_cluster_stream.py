"""The Spark source against a real three-broker cluster: an unclean election that truncates the log while a
query is stopped, and a kill -9 of the partition leader while a query runs."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from epochlog.server.cluster.local import LocalCluster
from tests.integration.cluster_helpers import (
    AckingProducer,
    create_topic,
    leader_epoch,
    partition_info,
    wait_until,
)
from tests.spark.conftest import produce, stream

pytestmark = pytest.mark.timeout(240)


def _available_now(df: Any, out: Path, ckpt: Path) -> Any:
    return (
        df.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )


@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_unclean_election_truncation_detected_on_restart(
    spark: Any, cluster: LocalCluster, tmp_path: Path, fail_on_data_loss: str
) -> None:
    bs = cluster.bootstrap
    topic = "clicks"
    create_topic(bs, topic, 1, 2, {"min.insync.replicas": "1", "unclean.leader.election.enable": "true"})
    leader0, replicas, _ = wait_until(lambda: partition_info(bs, topic), 10, "metadata")
    follower = next(r for r in replicas if r != leader0)
    produce(bs, topic, [b"old%d" % i for i in range(10)])  # on both replicas
    cluster.signal(f"broker-{follower}", signal.SIGSTOP)
    try:
        wait_until(lambda: partition_info(bs, topic)[2] == [leader0], 20, "the paused follower to leave the ISR")
        produce(bs, topic, [b"old%d" % i for i in range(10, 20)])  # only on the leader
        out, ckpt = tmp_path / "out", tmp_path / "ckpt"
        q = _available_now(stream(spark, bs, topic), out, ckpt)
        assert q.awaitTermination(90) and q.exception() is None
        cluster.kill9(f"broker-{leader0}")
    finally:
        cluster.signal(f"broker-{follower}", signal.SIGCONT)
    wait_until(lambda: leader_epoch(bs, topic)[0] == follower, 30, "the unclean election")
    produce(bs, topic, [b"new%d" % i for i in range(15)])  # offsets 10..24 in the new epoch: past 20 again

    q = _available_now(stream(spark, bs, topic, failOnDataLoss=fail_on_data_loss), out, ckpt)
    if fail_on_data_loss == "true":
        with pytest.raises(Exception, match=rf"{topic}-0: position 20 \(epoch 0\) diverges at offset 10"):
            q.awaitTermination(90)
        return
    assert q.awaitTermination(90) and q.exception() is None
    values = sorted(bytes(r.value) for r in spark.read.parquet(str(out)).collect())
    # The first run's 20 records, then everything after the divergence offset in the new lineage.
    assert values == sorted([b"old%d" % i for i in range(20)] + [b"new%d" % i for i in range(15)])


def test_leader_kill_during_stream_loses_and_duplicates_nothing(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    bs = cluster.bootstrap
    topic = "events"
    create_topic(bs, topic, 2, 3, {"min.insync.replicas": "2"})
    wait_until(lambda: partition_info(bs, topic), 10, "metadata")
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    q = (
        stream(spark, bs, topic)
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .trigger(processingTime="1 second")
        .start()
    )
    prod = AckingProducer(bs, topic, rate_sleep=0.01).start()
    try:
        wait_until(lambda: len(prod.acked) > 2000, 30, "writes before the kill")
        leader, _epoch = leader_epoch(bs, topic)
        cluster.kill9(f"broker-{leader}")
        wait_until(lambda: leader_epoch(bs, topic)[0] not in (-1, leader), 15, "a new leader")
        n = len(prod.acked)
        wait_until(lambda: len(prod.acked) > n + 2000, 30, "writes after the kill")
    finally:
        prod.stop()
    assert prod.errors == []
    expected = {v: o for v, o in prod.acked.items()}
    ends: dict[int, int] = {}
    for p, o in expected.values():
        ends[p] = max(ends.get(p, -1), o + 1)

    def caught_up() -> bool:
        progress = q.lastProgress
        if not progress:
            return False
        offsets = progress["sources"][0]["endOffset"]
        if isinstance(offsets, str):
            import json

            offsets = json.loads(offsets)
        got = offsets.get(topic, {})
        return all(
            (got.get(str(p), {}).get("offset") if isinstance(got.get(str(p)), dict) else got.get(str(p), -1)) >= end
            for p, end in ends.items()
        )

    wait_until(caught_up, 90, "the query to read every acknowledged record", interval=1.0)
    time.sleep(2)
    q.stop()
    rows = spark.read.parquet(str(out)).select("value", "partition", "offset").collect()
    seen = [(bytes(r.value), (r.partition, r.offset)) for r in rows]
    assert len(seen) == len(set(seen)), "duplicated records in the output"
    got = dict(seen)
    missing = [v for v, po in expected.items() if got.get(v) != po]
    assert not missing, f"{len(missing)} acknowledged records missing from the output"
