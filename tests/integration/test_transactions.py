"""Transactions end to end on a real broker: real clients' transactional producers, read_committed
consumers, zombie fencing, offsets committed in a transaction, timeouts, restarts and bad input."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.integration.helpers import create_topic, topic_name
from tests.integration.kafka_wire import WireClient

pytestmark = pytest.mark.integration


def read_partitions(
    bootstrap: str, topic: str, partitions: int, isolation: str, timeout: float = 20
) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of everything a consumer of ``isolation`` sees up to the end."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"r-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[tuple[int, int, bytes]] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(at_end) < partitions and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    at_end.add(m.partition())
                    continue
                raise KafkaException(m.error())
            at_end.discard(m.partition())
            out.append((m.partition(), m.offset(), m.value()))
    finally:
        c.close()
    assert len(at_end) == partitions, f"only partitions {sorted(at_end)} reached their end"
    return out


def txn_producer(bootstrap: str, tid: str, **conf: Any) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5, **conf})
    p.init_transactions(30)
    return p


def values(rows: list[tuple[int, int, bytes]]) -> list[bytes]:
    return sorted(v for _p, _o, v in rows)


def test_commit_and_abort_with_confluent(broker_factory) -> None:
    b = broker_factory()
    topic = topic_name("txn")
    create_topic(b.bootstrap, topic, partitions=3)
    p = txn_producer(b.bootstrap, f"tx-{uuid.uuid4().hex[:6]}")
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, value=b"c%d" % i, partition=i % 3)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(12):
        p.produce(topic, value=b"a%d" % i, partition=i % 3)
    assert p.flush(30) == 0  # the aborted records are in the log, not only in the client's queue
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, value=b"last", partition=1)
    p.commit_transaction(30)

    committed = values(read_partitions(b.bootstrap, topic, 3, "read_committed"))
    assert committed == sorted([b"c%d" % i for i in range(30)] + [b"last"])
    everything = values(read_partitions(b.bootstrap, topic, 3, "read_uncommitted"))
    assert everything == sorted([b"c%d" % i for i in range(30)] + [b"a%d" % i for i in range(12)] + [b"last"])


def test_read_committed_stops_at_an_open_transaction(broker_factory) -> None:
    """The last stable offset holds read_committed readers (and their ListOffsets) at an undecided
    transaction while read_uncommitted readers see its records."""
    b = broker_factory()
    topic = topic_name("lso")
    create_topic(b.bootstrap, topic)
    plain = Producer({"bootstrap.servers": b.bootstrap})
    plain.produce(topic, value=b"before")
    plain.flush(10)
    p = txn_producer(b.bootstrap, f"tx-{uuid.uuid4().hex[:6]}")
    p.begin_transaction()
    p.produce(topic, value=b"open")
    assert p.flush(30) == 0
    plain.produce(topic, value=b"after")  # not transactional, but after the open transaction's first offset
    plain.flush(10)

    assert values(read_partitions(b.bootstrap, topic, 1, "read_uncommitted")) == [b"after", b"before", b"open"]
    assert values(read_partitions(b.bootstrap, topic, 1, "read_committed")) == [b"before"]
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "w", "isolation.level": "read_committed"})
    _low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
    c.close()
    assert high == 1  # ListOffsets(latest) for read_committed is the LSO

    p.commit_transaction(30)
    assert values(read_partitions(b.bootstrap, topic, 1, "read_committed")) == [b"after", b"before", b"open"]


def test_a_new_incarnation_fences_the_zombie_and_aborts_its_transaction(broker_factory) -> None:
    b = broker_factory()
    topic = topic_name("fence")
    create_topic(b.bootstrap, topic)
    tid = f"tx-{uuid.uuid4().hex[:6]}"
    zombie = txn_producer(b.bootstrap, tid)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie")
    assert zombie.flush(30) == 0

    fresh = txn_producer(b.bootstrap, tid)  # bumps the epoch; the zombie's open transaction is aborted first
    fresh.begin_transaction()
    fresh.produce(topic, value=b"fresh")
    fresh.commit_transaction(30)

    with pytest.raises(KafkaException) as e:
        zombie.commit_transaction(15)
    err = e.value.args[0]
    assert err.fatal() or err.txn_requires_abort(), err
    assert values(read_partitions(b.bootstrap, topic, 1, "read_committed")) == [b"fresh"]
    assert values(read_partitions(b.bootstrap, topic, 1, "read_uncommitted")) == [b"fresh", b"zombie"]


def test_consume_transform_produce_commits_offsets_with_the_transaction(broker_factory) -> None:
    b = broker_factory()
    src, dst = topic_name("src"), topic_name("dst")
    create_topic(b.bootstrap, src)
    create_topic(b.bootstrap, dst)
    feed = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(20):
        feed.produce(src, value=b"%d" % i)
    feed.flush(10)
    group = f"copier-{uuid.uuid4().hex[:6]}"

    def copier() -> Consumer:
        c = Consumer(
            {
                "bootstrap.servers": b.bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            }
        )
        c.assign([TopicPartition(src, 0)])
        return c

    def copy(c: Consumer, p: Producer, n: int, commit: bool) -> None:
        p.begin_transaction()
        got = 0
        deadline = time.monotonic() + 20
        while got < n and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None or m.error():
                continue
            p.produce(dst, value=b"copy-" + m.value())
            got += 1
        assert got == n
        p.send_offsets_to_transaction(c.position([TopicPartition(src, 0)]), c.consumer_group_metadata(), 30)
        if commit:
            p.commit_transaction(30)
        else:
            assert p.flush(30) == 0
            p.abort_transaction(30)

    p = txn_producer(b.bootstrap, f"copier-{uuid.uuid4().hex[:6]}")
    c = copier()
    copy(c, p, 10, commit=True)
    c.close()
    c = copier()  # resumes from the committed offset 10
    copy(c, p, 5, commit=False)  # aborted: neither its output nor its offsets count
    c.close()
    probe = copier()
    committed = probe.committed([TopicPartition(src, 0)], timeout=10)[0].offset
    probe.close()
    assert committed == 10
    c = copier()
    copy(c, p, 10, commit=True)
    c.close()
    out = values(read_partitions(b.bootstrap, dst, 1, "read_committed"))
    assert out == sorted(b"copy-%d" % i for i in range(20))  # each input copied once, in committed output


def test_the_coordinator_aborts_a_transaction_that_times_out(broker_factory) -> None:
    b = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "300"})
    topic = topic_name("timeout")
    create_topic(b.bootstrap, topic)
    p = txn_producer(b.bootstrap, f"tx-{uuid.uuid4().hex[:6]}", **{"transaction.timeout.ms": 1500})
    p.begin_transaction()
    p.produce(topic, value=b"forgotten")
    assert p.flush(30) == 0
    plain = Producer({"bootstrap.servers": b.bootstrap})
    plain.produce(topic, value=b"later")
    plain.flush(10)
    deadline = time.monotonic() + 20
    seen: list[bytes] = []
    while time.monotonic() < deadline:
        seen = values(read_partitions(b.bootstrap, topic, 1, "read_committed"))
        if seen:
            break
        time.sleep(0.3)
    assert seen == [b"later"]  # the abort marker moved the LSO past the forgotten transaction
    with pytest.raises(KafkaException):
        p.commit_transaction(10)  # its epoch was bumped by the abort: the producer is fenced


def test_transactions_survive_a_kill_9_of_the_broker(broker_factory) -> None:
    """A prepared commit is finished by the coordinator that loads the log after a restart; a transaction
    left open is aborted when its producer comes back, so nothing hangs."""
    b = broker_factory()
    topic = topic_name("restart")
    create_topic(b.bootstrap, topic, partitions=2)
    done = txn_producer(b.bootstrap, "tx-done")
    done.begin_transaction()
    for i in range(10):
        done.produce(topic, value=b"d%d" % i, partition=i % 2)
    done.commit_transaction(30)
    left = txn_producer(b.bootstrap, "tx-left")
    left.begin_transaction()
    left.produce(topic, value=b"open", partition=0)
    assert left.flush(30) == 0
    b.kill9()
    b.start()
    again = txn_producer(b.bootstrap, "tx-left")  # aborts the open transaction of the earlier incarnation
    again.begin_transaction()
    again.produce(topic, value=b"again", partition=1)
    again.commit_transaction(30)
    got = values(read_partitions(b.bootstrap, topic, 2, "read_committed"))
    assert got == sorted([b"d%d" % i for i in range(10)] + [b"again"])


def test_kafka_python_and_aiokafka_transactional_producers(broker_factory) -> None:
    import aiokafka
    import kafka

    b = broker_factory()
    topic = topic_name("pyclients")
    create_topic(b.bootstrap, topic)
    kp = kafka.KafkaProducer(bootstrap_servers=b.bootstrap, transactional_id=f"kp-{uuid.uuid4().hex[:6]}")
    kp.init_transactions()
    kp.begin_transaction()
    kp.send(topic, b"kp-commit")
    kp.commit_transaction()
    kp.begin_transaction()
    kp.send(topic, b"kp-abort")
    kp.flush()
    kp.abort_transaction()
    kp.close()

    async def aio() -> None:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=b.bootstrap, transactional_id=f"aio-{uuid.uuid4().hex[:6]}")
        await p.start()
        try:
            async with p.transaction():
                await p.send_and_wait(topic, b"aio-commit")
            await p.begin_transaction()
            await p.send_and_wait(topic, b"aio-abort")
            await p.abort_transaction()
        finally:
            await p.stop()

    asyncio.run(aio())
    assert values(read_partitions(b.bootstrap, topic, 1, "read_committed")) == [b"aio-commit", b"kp-commit"]
    assert len(read_partitions(b.bootstrap, topic, 1, "read_uncommitted")) == 4


def test_stale_and_out_of_order_transaction_requests_change_nothing(broker_factory) -> None:
    """EndTxn and AddPartitionsToTxn from a stale epoch or an unknown producer, a transactional Produce for
    a partition never added, markers for an unknown producer: Kafka's error codes, and no state moves."""
    from epochlog.protocol.records import build_batch

    b = broker_factory()
    topic = topic_name("bad")
    create_topic(b.bootstrap, topic)
    tid = f"tx-{uuid.uuid4().hex[:6]}"
    p = txn_producer(b.bootstrap, tid)  # creates __transaction_state and the id
    p.begin_transaction()
    p.produce(topic, value=b"real")
    p.commit_transaction(30)

    w = WireClient(b.port)
    try:
        # The id's coordinator is this broker; InitProducerId over the wire bumps the epoch again. Right after a
        # commit the coordinator may still be writing its markers: CONCURRENT_TRANSACTIONS, which clients retry.
        deadline = time.monotonic() + 10
        while True:
            r = w.request(
                22,
                4,
                transactional_id=tid,
                transaction_timeout=timedelta(seconds=60),
                producer_id=-1,
                producer_epoch=-1,
            )
            if r.error_code != 51 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert r.error_code == 0
        pid, epoch = int(r.producer_id), int(r.producer_epoch)

        r = w.request(26, 3, transactional_id=tid, producer_id=pid, producer_epoch=epoch - 1, committed=True)
        assert r.error_code == 90  # PRODUCER_FENCED
        r = w.request(26, 1, transactional_id=tid, producer_id=pid, producer_epoch=epoch - 1, committed=True)
        assert r.error_code == 47  # INVALID_PRODUCER_EPOCH for clients older than KIP-588
        r = w.request(26, 3, transactional_id=tid, producer_id=pid + 1000, producer_epoch=epoch, committed=True)
        assert r.error_code == 49  # INVALID_PRODUCER_ID_MAPPING
        r = w.request(26, 3, transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=True)
        assert r.error_code == 48  # INVALID_TXN_STATE: nothing is ongoing

        from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnTopic

        r = w.request(
            24,
            3,
            v3_and_below_transactional_id=tid,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch - 1,
            v3_and_below_topics=(AddPartitionsToTxnTopic(name=topic, partitions=(0,)),),
        )
        assert r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 90

        # A transactional batch for a partition the transaction never added: KIP-890's verification.
        from kio.schema.produce.v9.request import PartitionProduceData, TopicProduceData

        batch = build_batch(
            [(None, b"sneaky")], producer_id=pid, producer_epoch=epoch, base_sequence=0, is_transactional=True
        )
        r = w.request(
            0,
            9,
            transactional_id=tid,
            acks=-1,
            timeout=timedelta(seconds=10),
            topic_data=(TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=0, records=batch),)),),
        )
        assert r.responses[0].partition_responses[0].error_code == 48  # INVALID_TXN_STATE

        # Markers for a producer the partition never saw decide an empty transaction and hide nothing.
        from kio.schema.write_txn_markers.v1.request import WritableTxnMarker, WritableTxnMarkerTopic

        r = w.request(
            27,
            1,
            markers=(
                WritableTxnMarker(
                    producer_id=987654,
                    producer_epoch=0,
                    transaction_result=False,
                    topics=(WritableTxnMarkerTopic(name=topic, partition_indexes=(0,)),),
                    coordinator_epoch=0,
                ),
            ),
        )
        assert r.markers[0].topics[0].partitions[0].error_code == 0
    finally:
        w.close()
    assert values(read_partitions(b.bootstrap, topic, 1, "read_committed")) == [b"real"]
    assert values(read_partitions(b.bootstrap, topic, 1, "read_uncommitted")) == [b"real"]


def test_an_idle_transactional_id_expires(broker_factory) -> None:
    """transactional.id.expiration.ms: an id idle that long is removed (a tombstone in __transaction_state),
    and is gone after a restart too; a producer using it again starts afresh."""
    b = broker_factory(
        {"transactional.id.expiration.ms": "1500", "transaction.remove.expired.transaction.cleanup.interval.ms": "300"}
    )
    topic = topic_name("expire")
    create_topic(b.bootstrap, topic)
    idle, busy = f"idle-{uuid.uuid4().hex[:6]}", f"busy-{uuid.uuid4().hex[:6]}"
    p = txn_producer(b.bootstrap, idle)
    p.begin_transaction()
    p.produce(topic, value=b"once")
    p.commit_transaction(30)

    def listed() -> set[str]:
        w = WireClient(b.port)
        try:
            return {
                str(t.transactional_id)
                for t in w.request(66, 0, state_filters=(), producer_id_filters=()).transaction_states
            }
        finally:
            w.close()

    assert idle in listed()
    q = txn_producer(b.bootstrap, busy)
    deadline = time.monotonic() + 20
    while idle in listed() and time.monotonic() < deadline:
        q.begin_transaction()  # the other id stays in use, so it does not expire
        q.produce(topic, value=b"tick")
        q.commit_transaction(30)
        time.sleep(0.2)
    assert idle not in listed() and busy in listed()
    b.restart()
    assert idle not in listed()
    again = txn_producer(b.bootstrap, idle)
    again.begin_transaction()
    again.produce(topic, value=b"again")
    again.commit_transaction(30)
    assert values(read_partitions(b.bootstrap, topic, 1, "read_committed")).count(b"again") == 1
