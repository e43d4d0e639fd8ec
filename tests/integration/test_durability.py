"""Acknowledged writes survive kill -9; torn tails are cut at the last valid batch."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.broker_process import BrokerProcess
from tests.integration.helpers import consume_assign, create_topic, produce, topic_name, watermarks


def _produce_across_kill(broker: BrokerProcess, topic: str, total: int, kill_after: int) -> dict[bytes, int]:
    """Idempotent acks=all producer writing while the broker is killed -9 and restarted."""
    acked: dict[bytes, int] = {}
    errors: list[object] = []
    p = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 2,
            "message.timeout.ms": 60000,
            "retry.backoff.ms": 100,
            "reconnect.backoff.max.ms": 500,
        }
    )

    def cb(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked[msg.value()] = msg.offset()  # type: ignore[attr-defined]

    killed = threading.Event()
    for i in range(total):
        p.produce(topic, value=b"msg-%06d" % i, on_delivery=cb)
        p.poll(0)
        if i == kill_after:
            p.flush(30)
            p.produce(topic, value=b"in-flight-marker", on_delivery=cb)
            p.poll(0)
            broker.kill9()
            killed.set()
            broker.start()
        if i % 200 == 0:
            time.sleep(0.01)
    assert p.flush(60) == 0
    assert not errors, f"producer errors across the kill: {errors[:5]}"
    return acked


# The durable mode's run is in the long tier: test_durable_mode.py and test_chaos_powerloss.py cover that
# mode in the default run (kill -9 and power loss of every broker).
@pytest.mark.parametrize("flush_every_message", [False, pytest.param(True, marks=pytest.mark.long)])
def test_acknowledged_writes_survive_kill9(broker_factory, flush_every_message: bool) -> None:
    settings = {"log.flush.interval.messages": "1"} if flush_every_message else {}
    b = broker_factory(settings)
    topic = topic_name("dur")
    create_topic(b.bootstrap, topic)
    acked = _produce_across_kill(b, topic, total=3000, kill_after=1500)
    assert len(acked) == 3001
    b.kill9()
    b.start()
    # Everything up to the high watermark: a duplicate would show as more than was acknowledged.
    high = watermarks(b.bootstrap, topic)[1]
    msgs = consume_assign(b.bootstrap, topic, 0, high, timeout=20)
    assert len(msgs) == high
    values = [m.value() for m in msgs]
    assert len(values) == len(set(values)), "duplicates after the kill"
    at = {m.value(): m.offset() for m in msgs}
    lost = [v for v in acked if v not in at]
    assert not lost, f"{len(lost)} acknowledged messages lost, e.g. {lost[:3]}"
    moved = [v for v, o in acked.items() if at[v] != o]
    assert not moved, f"{len(moved)} messages read back at another offset"
    assert [m.offset() for m in msgs] == list(range(len(msgs)))


def _segment(data_dir: Path, topic: str) -> Path:
    logs = sorted((data_dir / f"{topic}-0").glob("*.log"))
    return logs[-1]


def test_torn_tail_is_cut_at_last_valid_batch(broker: BrokerProcess) -> None:
    topic = topic_name("torn")
    create_topic(broker.bootstrap, topic)
    for i in range(10):  # ten separate batches
        produce(broker.bootstrap, topic, [b"batch-%d" % i], {"linger.ms": 0})
    broker.kill9()
    seg = _segment(broker.data_dir, topic)
    size = seg.stat().st_size
    with open(seg, "r+b") as f:
        f.truncate(size - 7)  # tear the last batch
    broker.start()
    msgs = consume_assign(broker.bootstrap, topic, 0, 9, timeout=15)
    assert [m.value() for m in msgs] == [b"batch-%d" % i for i in range(9)]
    acked = produce(broker.bootstrap, topic, [b"after"])
    assert acked[0][1] == 9


def test_corrupt_crc_tail_is_dropped(broker: BrokerProcess) -> None:
    topic = topic_name("crc")
    create_topic(broker.bootstrap, topic)
    for i in range(5):
        produce(broker.bootstrap, topic, [b"batch-%d" % i], {"linger.ms": 0})
    broker.kill9()
    seg = _segment(broker.data_dir, topic)
    data = bytearray(seg.read_bytes())
    data[-3] ^= 0xFF  # flip a byte inside the last batch's records
    seg.write_bytes(bytes(data))
    broker.start()
    msgs = consume_assign(broker.bootstrap, topic, 0, 4, timeout=15)
    assert [m.value() for m in msgs] == [b"batch-%d" % i for i in range(4)]
    assert produce(broker.bootstrap, topic, [b"after"])[0][1] == 4


def test_committed_offsets_survive_restart(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, TopicPartition

    topic = topic_name("commit")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [b"x"] * 10)
    conf = {"bootstrap.servers": broker.bootstrap, "group.id": "committers", "enable.auto.commit": False}
    c = Consumer(conf)
    c.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)
    c.close()
    broker.kill9()
    broker.start()
    c = Consumer(conf)
    got = c.committed([TopicPartition(topic, 0)], timeout=20)
    c.close()
    assert got[0].offset == 7
    broker.restart()
    c = Consumer(conf)
    got = c.committed([TopicPartition(topic, 0)], timeout=20)
    c.close()
    assert got[0].offset == 7
