"""Compaction is per replica (as in Kafka): on a three-broker cluster every replica of a compacted topic
cleans its own log, and a follower that lost its copy re-fetches the leader's compacted log (gaps in
the offsets, batches left with no record but their header) and ends with the same records."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from epochlog.protocol.records import iter_records
from epochlog.server.cluster.local import LocalCluster
from tests.integration.cluster_helpers import create_topic, partition_info, wait_until
from tests.integration.test_compaction import CLOCK_KEY, History, check, produce_many, read_all, trickle

pytestmark = pytest.mark.timeout(240)


def replica_records(part_dir: Path) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    for seg in sorted(part_dir.glob("*.log")):
        out += [(r.offset, r.key, r.value) for r in iter_records(seg.read_bytes(), verify_crc=True)]
    return out


def latest(recs: list[tuple[int, bytes | None, bytes | None]], below: int) -> dict[bytes | None, bytes | None]:
    m: dict[bytes | None, bytes | None] = {}
    for o, k, v in recs:
        if o < below and k != CLOCK_KEY:
            m[k] = v
    return m


def test_every_replica_compacts_and_a_new_follower_copies_the_compacted_log(cluster: LocalCluster) -> None:
    bs = cluster.bootstrap
    topic = "table"
    create_topic(
        bs,
        topic,
        1,
        3,
        {
            "cleanup.policy": "compact",
            "segment.bytes": "65536",
            "segment.ms": "300",
            "min.cleanable.dirty.ratio": "0.2",
            "min.insync.replicas": "2",
        },
    )
    wait_until(lambda: partition_info(bs, topic)[2] == [1, 2, 3], 30, "the ISR to be whole")
    history = History()
    keys = [b"row-%03d" % i for i in range(200)]
    produce_many(bs, topic, history, keys, 12000, 1)
    assert not history.errors
    stop = threading.Event()
    clock = threading.Thread(target=trickle, args=(bs, topic, history, stop))
    clock.start()
    logs = {i: cluster.data_dir / "logs" / f"broker-{i}.log" for i in (1, 2, 3)}
    dirs = {i: cluster.data_dir / f"broker-{i}" / f"{topic}-0" for i in (1, 2, 3)}
    try:
        # Each broker cleans its own replica (the cleaner logs on each).
        for i in (1, 2, 3):
            wait_until(lambda i=i: f"{topic}-0: cleaned [" in logs[i].read_text(errors="replace"), 60, f"broker {i}")
        leader = partition_info(bs, topic)[0]
        follower = next(i for i in (1, 2, 3) if i != leader)
        cluster.kill9(f"broker-{follower}")
        shutil.rmtree(dirs[follower])
        cluster.start_node(f"broker-{follower}")
        wait_until(lambda: partition_info(bs, topic)[2] == [1, 2, 3], 60, "the emptied follower back in the ISR")
        seen, _high = read_all(bs, topic)
        check(history, seen, set())
    finally:
        stop.set()
        clock.join(30)
    p = Producer({"bootstrap.servers": bs, "acks": "all"})
    p.produce(topic, key=b"last", value=b"write", on_delivery=history.ack)
    assert p.flush(30) == 0
    end = max(history.at) + 1
    want = {k: v for k, v in history.latest().items() if k != CLOCK_KEY}
    # Every replica, read from its own files, ends with each key's latest acknowledged value.
    deadline = time.monotonic() + 60
    while True:
        views = {i: replica_records(dirs[i]) for i in (1, 2, 3)}
        if all(latest(v, end) == want for v in views.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    for i, recs in views.items():
        offs = [o for o, _k, _v in recs]
        assert offs == sorted(set(offs)), f"broker {i}: offsets repeat or go backwards"
        assert latest(recs, end) == want, f"broker {i} differs from what was acknowledged"
        assert len(recs) < 12000 / 4, f"broker {i} did not compact"
