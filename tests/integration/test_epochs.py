"""Leader epochs on the wire (KIP-101, KIP-320): bumped on restart, answered from the epoch cache."""

from __future__ import annotations

import datetime as dt

from tests.broker_process import BrokerProcess
from tests.integration.helpers import create_topic, produce, topic_name
from tests.integration.kafka_wire import WireClient, schema_module

NONE, FENCED, UNKNOWN = 0, 74, 75


def offset_for_epoch(c: WireClient, topic: str, epoch: int, current: int) -> tuple[int, int, int]:
    m = schema_module(23, 4)
    req = m.OffsetForLeaderTopic(
        topic=topic,
        partitions=(m.OffsetForLeaderPartition(partition=0, current_leader_epoch=current, leader_epoch=epoch),),
    )
    p = c.request(23, 4, replica_id=-1, topics=(req,)).topics[0].partitions[0]
    return int(p.error_code.value), p.leader_epoch, p.end_offset


def metadata_epoch(c: WireClient, topic: str) -> int:
    m = schema_module(3, 12)
    resp = c.request(
        3,
        12,
        topics=(m.MetadataRequestTopic(topic_id=None, name=topic),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    return resp.topics[0].partitions[0].leader_epoch


def fetch_error(c: WireClient, topic: str, current: int, last_fetched: int = -1, offset: int = 0) -> tuple[int, object]:
    m = schema_module(1, 12)
    part = m.FetchPartition(
        partition=0,
        current_leader_epoch=current,
        fetch_offset=offset,
        last_fetched_epoch=last_fetched,
        log_start_offset=-1,
        partition_max_bytes=1 << 20,
    )
    resp = c.request(
        1,
        12,
        replica_id=-1,
        max_wait=dt.timedelta(0),
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(m.FetchTopic(topic=topic, partitions=(part,)),),
        forgotten_topics_data=(),
        rack_id="",
    )
    p = resp.responses[0].partitions[0]
    return int(p.error_code.value), p.diverging_epoch


def test_epochs_bump_on_restart_and_are_served_from_the_cache(broker: BrokerProcess) -> None:
    topic = topic_name("ep")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [b"a", b"b", b"c"], {"linger.ms": 0})
    c = WireClient(broker.port)
    assert metadata_epoch(c, topic) == 0
    c.close()
    broker.restart(hard=True)  # a returning leader gets a new epoch (KIP-101)
    produce(broker.bootstrap, topic, [b"d", b"e"], {"linger.ms": 0})
    c = WireClient(broker.port)
    try:
        # KIP-966, as Kafka 4.1: the unclean restart takes the replica out of the ISR (epoch 1, no leader),
        # then it comes back as the partition's last known leader (epoch 2). Epoch 1 led nothing.
        assert metadata_epoch(c, topic) == 2
        assert offset_for_epoch(c, topic, 0, 2) == (NONE, 0, 3)  # epoch 0 ends where epoch 2 starts
        assert offset_for_epoch(c, topic, 1, 2) == (NONE, 0, 3)  # no epoch 1: the largest below it answers
        assert offset_for_epoch(c, topic, 2, 2) == (NONE, 2, 5)  # the current epoch ends at the log end
        assert offset_for_epoch(c, topic, 0, 0)[0] == FENCED
        assert offset_for_epoch(c, topic, 0, 9)[0] == UNKNOWN
        assert offset_for_epoch(c, topic, 0, -1) == (NONE, 0, 3)  # no current epoch: no fencing
        assert fetch_error(c, topic, current=0)[0] == FENCED
        assert fetch_error(c, topic, current=3)[0] == UNKNOWN
        code, div = fetch_error(c, topic, current=2, last_fetched=0, offset=4)  # claims epoch 0 ran to 4
        assert code == NONE and div is not None and (div.epoch, div.end_offset) == (0, 3)
    finally:
        c.close()
    checkpoint = (broker.data_dir / f"{topic}-0" / "leader-epoch-checkpoint").read_text()
    assert checkpoint == "0\n2\n0 0\n2 3\n"


def test_clean_shutdown_writes_the_marker(broker: BrokerProcess) -> None:
    produce(broker.bootstrap, topic_name("m"), [b"x"])
    assert broker.stop() == 0
    assert (broker.data_dir / ".kafka_cleanshutdown").exists()
    assert "stopped cleanly" in broker.log_text()
