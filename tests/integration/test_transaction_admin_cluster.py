"""The transaction tools on a three-broker cluster: each coordinator lists its own share of the
transactional ids, DescribeTransactions is answered only at an id's coordinator, DescribeProducers at every
replica of the partition (and NOT_LEADER_OR_FOLLOWER elsewhere), and find-hanging, which asks all of them,
finds nothing hanging among transactions their coordinators track."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from epochlog.client import describe_transactions_wire
from epochlog.client.transactions import cluster, find_coordinator
from epochlog.client.wire import Connection
from tests.integration.cluster_helpers import create_topic, new_cluster, partition_info, wait_until
from tests.integration.kafka_wire import WireClient
from tests.integration.test_transaction_admin import cli, schema

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def test_tools_across_three_brokers(tmp_path: Path) -> None:
    lc = new_cluster(tmp_path, brokers=3)
    lc.start()
    producers: list[Producer] = []
    try:
        bs = lc.bootstrap
        topic = "adm-cluster"
        create_topic(bs, topic, 1, 2, {})  # two replicas of three brokers: one broker does not host it
        tids = [f"c{i}-{uuid.uuid4().hex[:6]}" for i in range(6)]
        _spread_coordinators(bs, tids)
        for tid in tids:
            p = Producer({"bootstrap.servers": bs, "transactional.id": tid, "linger.ms": 2})
            p.init_transactions(60)
            p.begin_transaction()
            p.produce(topic, value=tid.encode(), partition=0)
            assert p.flush(30) == 0
            producers.append(p)

        with cluster(bs) as c:
            coordinator = {tid: find_coordinator(c, tid) for tid in tids}
        assert len(set(coordinator.values())) > 1, "six ids all on one coordinator: the test proves nothing"
        rows = cli(bs, "list", "--state", "Ongoing")[1:]
        assert sorted((r[0], int(r[1])) for r in rows) == sorted(coordinator.items())

        # DescribeTransactions at a broker that does not coordinate the id: NOT_COORDINATOR.
        tid = tids[0]
        other = next(b for b in lc.broker_ids() if b != coordinator[tid])
        req = schema(65).DescribeTransactionsRequest(transactional_ids=(tid,))
        with Connection("127.0.0.1", lc.broker(other).port) as conn:
            [row] = describe_transactions_wire.decode(*conn.request_frame(req))
        assert row.error_code == 16 and row.state == ""
        with Connection("127.0.0.1", lc.broker(coordinator[tid]).port) as conn:
            [row] = describe_transactions_wire.decode(*conn.request_frame(req))
        assert row.error_code == 0 and row.state == "Ongoing" and row.partitions == ((topic, 0),)

        # DescribeProducers: the leader and the follower both answer, with the same open transactions.
        leader, replicas, _isr = partition_info(bs, topic)
        [follower] = [r for r in replicas if r != leader]
        [outsider] = [b for b in lc.broker_ids() if b not in replicas]
        from_leader = cli(bs, "describe-producers", "--topic", topic, "--partition", "0")[1:]
        assert len(from_leader) == len(tids) and all(r[5] != "None" for r in from_leader)
        args = ("describe-producers", "--topic", topic, "--partition", "0", "--broker-id", str(follower))

        def follower_caught_up() -> bool:
            return sorted(r[:3] + r[5:] for r in cli(bs, *args)[1:]) == sorted(r[:3] + r[5:] for r in from_leader)

        from tests.integration.cluster_helpers import wait_until

        wait_until(follower_caught_up, 20, "the follower's producer state matches the leader's")
        w = WireClient(lc.broker(outsider).port)
        try:
            r = w.request(61, 0, topics=(schema(61).TopicRequest(name=topic, partition_indexes=(0,)),))
            assert r.topics[0].partitions[0].error_code == 6  # NOT_LEADER_OR_FOLLOWER
        finally:
            w.close()
        out = cli(
            bs, "describe-producers", "--topic", topic, "--partition", "0", "--broker-id", str(outsider), ok=False
        )
        assert "NOT_LEADER_OR_FOLLOWER" in out[0][0]

        # Every open transaction is one its coordinator will close: nothing hangs, whichever broker is searched.
        for b in lc.broker_ids():
            assert cli(bs, "find-hanging", "--broker-id", str(b), "--max-transaction-timeout", "0")[1:] == []
        for p in producers:
            p.commit_transaction(30)
        assert [r[3] for r in cli(bs, "list")[1:]] == ["CompleteCommit"] * len(tids)
    finally:
        lc.stop()


def _spread_coordinators(bs: str, tids: list[str]) -> None:
    """Have __transaction_state made and its leaders back on their preferred replicas before the test needs
    them spread: a broker that missed heartbeats while the cluster started (a loaded machine) leaves its
    partitions led by another broker, and automatic rebalancing waits five minutes."""
    from confluent_kafka import ElectionType, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient

    with cluster(bs) as c:
        find_coordinator(c, tids[0], wait_s=60)
    admin = AdminClient({"bootstrap.servers": bs})

    def in_sync() -> dict[int, object] | None:
        parts = admin.list_topics("__transaction_state", timeout=10).topics["__transaction_state"].partitions
        return parts if parts and all(set(m.isrs) == set(m.replicas) for m in parts.values()) else None

    parts = wait_until(in_sync, 60, "every __transaction_state replica in sync")
    try:
        admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("__transaction_state", p) for p in parts]).result(
            30
        )
    except KafkaException:  # ELECTION_NOT_NEEDED for partitions already led by their preferred replica
        pass
