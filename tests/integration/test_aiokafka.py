"""aiokafka against a real epochlog process."""

from __future__ import annotations

import asyncio
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from tests.broker_process import BrokerProcess
from tests.integration.helpers import create_topic, topic_name


def test_produce_consume_and_group(broker: BrokerProcess) -> None:
    topic = topic_name("aio")
    create_topic(broker.bootstrap, topic, partitions=2)

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="gzip", enable_idempotence=True)
        await p.start()
        try:
            metas = [await p.send_and_wait(topic, value=b"a%d" % i, key=b"k", headers=[("x", b"y")]) for i in range(30)]
        finally:
            await p.stop()
        assert [m.offset for m in metas] == list(range(30))
        part = metas[0].partition
        c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
        await c.start()
        try:
            tp = TopicPartition(topic, part)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            got = []
            while len(got) < 30:
                batch = await asyncio.wait_for(c.getmany(timeout_ms=1000), 20)
                for msgs in batch.values():
                    got.extend(msgs)
            assert [m.value for m in got] == [b"a%d" % i for i in range(30)]
            assert got[0].headers == (("x", b"y"),)
        finally:
            await c.stop()
        group = f"aio-{uuid.uuid4().hex[:6]}"
        c = AIOKafkaConsumer(
            topic,
            group_id=group,
            bootstrap_servers=broker.bootstrap,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await c.start()
        try:
            got = []
            while len(got) < 30:
                batch = await asyncio.wait_for(c.getmany(timeout_ms=1000), 30)
                for msgs in batch.values():
                    got.extend(msgs)
            await c.commit()
            committed = await c.committed(TopicPartition(topic, part))
            assert committed == 30
        finally:
            await c.stop()

    asyncio.run(asyncio.wait_for(run(), 90))
