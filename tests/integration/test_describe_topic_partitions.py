"""DescribeTopicPartitions (API 75) against a real broker: listed in ApiVersions, cursor paging under
ResponsePartitionLimit, and Kafka's answers for unknown, invalid and badly cursored requests."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.describe_topic_partitions.v0.request import Cursor, DescribeTopicPartitionsRequest, TopicRequest
from kio.schema.types import TopicName
from kio.static.primitive import i32

from epochlog.client import topic_partitions as tp
from epochlog.client.wire import Connection
from epochlog.codes import Err
from tests.broker_process import BrokerProcess


def request(conn: Connection, names: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None) -> object:
    cur = Cursor(topic_name=TopicName(cursor[0]), partition_index=i32(cursor[1])) if cursor else None
    topics = tuple(TopicRequest(name=TopicName(n)) for n in names)
    return conn.request(DescribeTopicPartitionsRequest(topics=topics, response_partition_limit=i32(limit), cursor=cur))


def test_paging_and_errors(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for name, n in (("dtp-a", 5), ("dtp-b", 2)):
        admin.create_topics([NewTopic(name, n, 1)])[name].result(15)
    host, port = broker.bootstrap.split(":")
    with Connection(host, int(port), 10) as conn:
        assert tp.offers(conn)
        r = request(conn, ["dtp-b", "dtp-a"], limit=3)  # name order, three partitions, then a cursor
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in r.topics] == [("dtp-a", [0, 1, 2])]
        assert (r.next_cursor.topic_name, r.next_cursor.partition_index) == ("dtp-a", 3)
        r = request(conn, ["dtp-a", "dtp-b"], limit=2, cursor=("dtp-a", 3))
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in r.topics] == [("dtp-a", [3, 4])]
        assert (r.next_cursor.topic_name, r.next_cursor.partition_index) == ("dtp-b", 0)
        r = request(conn, ["dtp-a", "dtp-b"], limit=5, cursor=("dtp-b", 0))
        assert [t.name for t in r.topics] == ["dtp-b"] and r.next_cursor is None
        p = r.topics[0].partitions[0]
        assert p.leader_id == 1 and list(p.isr_nodes) == [1] and list(p.eligible_leader_replicas or ()) == []
        r = request(conn, ["nope", "bad/name"])
        assert {t.name: t.error_code for t in r.topics} == {
            "bad/name": Err.INVALID_TOPIC_EXCEPTION,
            "nope": Err.UNKNOWN_TOPIC_OR_PARTITION,
        }
        r = request(conn, ["dtp-a"], cursor=("dtp-b", 0))  # the cursor's topic was not asked for
        assert [t.error_code for t in r.topics] == [Err.INVALID_REQUEST]
        r = request(conn, ["dtp-a"], cursor=("dtp-a", -1))
        assert [t.error_code for t in r.topics] == [Err.INVALID_REQUEST]
        r = request(conn, [], limit=0)  # every topic; a limit below one still returns one partition
        assert len(r.topics) == 1 and len(r.topics[0].partitions) == 1 and r.next_cursor is not None
    rows = tp.describe(host, int(port), None, limit=1)  # the client follows the cursor to the end
    assert rows is not None
    assert {r.name: len(r.partitions) for r in rows if r.name.startswith("dtp-")} == {"dtp-a": 5, "dtp-b": 2}
