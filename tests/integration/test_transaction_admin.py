"""The transaction tools (KIP-664) on a real broker: DescribeTransactions, ListTransactions and
DescribeProducers as kafka-python's admin client and `epochlog transactions` see them, and a hanging
transaction made on purpose that find-hanging reports and abort closes, unblocking read_committed readers."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient
from kafka.structs import TopicPartition as KTopicPartition
from typer.testing import CliRunner

from epochlog.cli.main import app
from tests.integration.helpers import create_topic, produce, topic_name
from tests.integration.kafka_wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(150)]


def cli(bootstrap: str, *args: str, ok: bool = True) -> list[list[str]]:
    """Run `epochlog transactions ...` in-process; its table as rows of cells (the header row first)."""
    result = CliRunner().invoke(app, ["transactions", args[0], "--bootstrap-server", bootstrap, *args[1:]])
    if ok:
        assert result.exit_code == 0, (result.output, result.exception)
    else:
        assert result.exit_code == 1, result.output
        return [[result.output]]
    return [line.split() for line in result.stdout.splitlines()]


def txn_producer(bootstrap: str, tid: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5})
    p.init_transactions(30)
    return p


def produce_in_txn(p: Producer, topic: str, partition: int, n: int) -> list[int]:
    """Offsets of ``n`` records written (and acknowledged) in ``p``'s open transaction."""
    offsets: list[int] = []
    for i in range(n):
        p.produce(topic, value=b"v%d" % i, partition=partition, on_delivery=lambda e, m: offsets.append(m.offset()))
    assert p.flush(30) == 0
    return sorted(offsets)


def kadmin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)


def lso(bootstrap: str, topic: str, partition: int) -> int:
    """The partition's last stable offset: ListOffsets latest at read_committed."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as TP

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "lso", "isolation.level": "read_committed"})
    try:
        _low, high = c.get_watermark_offsets(TP(topic, partition), timeout=10)
        return int(high)
    finally:
        c.close()


def broker_id(bootstrap: str) -> int:
    [node] = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).brokers
    return int(node)


def test_open_and_committed_transactions_as_the_tools_see_them(broker_factory: Any) -> None:
    b = broker_factory()
    topic = topic_name("adm")
    create_topic(b.bootstrap, topic, partitions=2)
    done_id, open_id = f"done-{uuid.uuid4().hex[:6]}", f"open-{uuid.uuid4().hex[:6]}"
    done = txn_producer(b.bootstrap, done_id)
    done.begin_transaction()
    produce_in_txn(done, topic, 0, 3)  # offsets 0-2, COMMIT marker at 3
    done.commit_transaction(30)
    opened = txn_producer(b.bootstrap, open_id)
    opened.begin_transaction()
    started = int(time.time() * 1000)
    first = produce_in_txn(opened, topic, 0, 2)[0]
    produce_in_txn(opened, topic, 1, 1)
    assert first == 4

    admin = kadmin(b.bootstrap)
    try:
        d = admin.describe_transactions([open_id, done_id])
        o, c = d[open_id], d[done_id]
        assert o.state.value == "Ongoing"
        assert o.topic_partitions == {KTopicPartition(topic, 0), KTopicPartition(topic, 1)}
        assert o.transaction_timeout_ms == 60000  # librdkafka's transaction.timeout.ms
        assert started - 5000 <= o.transaction_start_time_ms <= int(time.time() * 1000)
        assert o.producer_epoch == 0 and o.coordinator_id == broker_id(b.bootstrap)
        assert c.state.value == "CompleteCommit" and c.topic_partitions == set()
        assert 0 < c.transaction_start_time_ms <= o.transaction_start_time_ms  # its last transaction's start
        assert c.producer_id != o.producer_id

        def listed(**kw: Any) -> dict[str, tuple[int, str]]:
            rows = [r for rs in admin.list_transactions(**kw).values() for r in rs]
            return {r.transactional_id: (r.producer_id, r.state.value) for r in rows}

        assert listed() == {open_id: (o.producer_id, "Ongoing"), done_id: (c.producer_id, "CompleteCommit")}
        assert listed(state_filters=["Ongoing"]) == {open_id: (o.producer_id, "Ongoing")}
        assert listed(state_filters=["CompleteCommit", "Empty"]) == {done_id: (c.producer_id, "CompleteCommit")}
        assert listed(producer_id_filters=[c.producer_id]) == {done_id: (c.producer_id, "CompleteCommit")}
        assert listed(producer_id_filters=[c.producer_id + o.producer_id + 1]) == {}
        # Measured from each id's last transaction start, the committed one's included (as Kafka).
        assert listed(duration_filter_ms=0) == {
            open_id: (o.producer_id, "Ongoing"),
            done_id: (c.producer_id, "CompleteCommit"),
        }
        assert listed(duration_filter_ms=0, state_filters=["Ongoing"]) == {open_id: (o.producer_id, "Ongoing")}
        assert listed(duration_filter_ms=3_600_000) == {}

        producers = admin.describe_producers([KTopicPartition(topic, 0)])[KTopicPartition(topic, 0)]
        by_pid = {p.producer_id: p for p in producers.active_producers}
        assert by_pid[o.producer_id].current_transaction_start_offset == first
        assert by_pid[o.producer_id].last_sequence == 1 and by_pid[o.producer_id].producer_epoch == 0
        assert by_pid[c.producer_id].current_transaction_start_offset == -1
        assert by_pid[c.producer_id].coordinator_epoch >= 0  # it has seen its COMMIT marker
    finally:
        admin.close()

    # Unknown state names are echoed back; the request answers what the known ones match.
    w = WireClient(b.port)
    try:
        r = w.request(66, 1, state_filters=("Ongoing", "Hanging"), producer_id_filters=(), duration_filter=-1)
        assert r.error_code == 0 and list(r.unknown_state_filters) == ["Hanging"]
        assert [t.transactional_id for t in r.transaction_states] == [open_id]
        r = w.request(61, 0, topics=(schema(61).TopicRequest(name=topic + "-none", partition_indexes=(0,)),))
        assert r.topics[0].partitions[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
    finally:
        w.close()
    # kio cannot read DescribeTransactions' -1 start time, hence a reader of our own (and its own check).
    from epochlog.client.transactions import TxnAdminError, cluster, describe_transaction

    with cluster(b.bootstrap) as cl:
        assert 0 < describe_transaction(cl, done_id).start_ms <= started
        with pytest.raises(TxnAdminError) as err:
            describe_transaction(cl, "nobody-" + open_id)
        assert err.value.code == 105  # TRANSACTIONAL_ID_NOT_FOUND

    # The same through `epochlog transactions`.
    rows = cli(b.bootstrap, "list")
    assert rows[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert sorted(rows[1:]) == sorted(
        [
            [done_id, str(c.coordinator_id), str(c.producer_id), "CompleteCommit"],
            [open_id, str(o.coordinator_id), str(o.producer_id), "Ongoing"],
        ]
    )
    assert [r[0] for r in cli(b.bootstrap, "list", "--state", "Ongoing")[1:]] == [open_id]
    assert [r[0] for r in cli(b.bootstrap, "list", "--producer-id", str(c.producer_id))[1:]] == [done_id]
    assert cli(b.bootstrap, "list", "--duration-filter", "3600000")[1:] == []
    [head, row] = cli(b.bootstrap, "describe", "--transactional-id", open_id)
    assert dict(zip(head, row, strict=True)) | {"CurrentTransactionStartTimeMs": "", "TransactionDurationMs": ""} == {
        "CoordinatorId": str(o.coordinator_id),
        "TransactionalId": open_id,
        "ProducerId": str(o.producer_id),
        "ProducerEpoch": "0",
        "TransactionState": "Ongoing",
        "TransactionTimeoutMs": "60000",
        "CurrentTransactionStartTimeMs": "",
        "TransactionDurationMs": "",
        "TopicPartitions": f"{topic}-0,{topic}-1",
    }
    rows = cli(b.bootstrap, "describe-producers", "--topic", topic, "--partition", "0")
    starts = {r[0]: r[5] for r in rows[1:]}
    assert starts == {str(o.producer_id): str(first), str(c.producer_id): "None"}
    assert "TRANSACTIONAL_ID_NOT_FOUND" in cli(b.bootstrap, "describe", "--transactional-id", "nobody", ok=False)[0][0]

    # Once committed, nothing is open: the partition forgets the start offset, the coordinator the partitions.
    opened.commit_transaction(30)
    rows = cli(b.bootstrap, "describe-producers", "--topic", topic, "--partition", "0")
    assert {r[0]: r[5] for r in rows[1:]} == {str(o.producer_id): "None", str(c.producer_id): "None"}
    [head, row] = cli(b.bootstrap, "describe", "--transactional-id", open_id)
    assert row[head.index("TransactionState")] == "CompleteCommit" and "TopicPartitions" == head[-1]
    assert len(row) == len(head) - 1  # no partitions listed


def schema(api_key: int) -> Any:
    from tests.integration.kafka_wire import schema_module

    return schema_module(api_key, 0)


def write_txn_batch(w: WireClient, topic: str, partition: int, tid: str, pid: int, epoch: int, seq: int) -> int:
    """A transactional batch written straight to the partition, as a producer that skipped
    AddPartitionsToTxn would (only possible with the broker's verification off); returns its offset."""
    from kio.schema.produce.v9.request import PartitionProduceData, TopicProduceData

    from epochlog.protocol.records import build_batch

    batch = build_batch(
        [(None, b"stray")], producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True
    )
    r = w.request(
        0,
        9,
        transactional_id=tid,
        acks=-1,
        timeout=__import__("datetime").timedelta(seconds=10),
        topic_data=(
            TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=partition, records=batch),)),
        ),
    )
    row = r.responses[0].partition_responses[0]
    assert row.error_code == 0, row
    return int(row.base_offset)


def test_a_hanging_transaction_is_found_and_aborted(broker_factory: Any) -> None:
    # Without KIP-890's verification a producer can open a transaction on a partition its coordinator never
    # added: the coordinator's markers never reach it, and read_committed readers stop there for good.
    b = broker_factory({"transaction.partition.verification.enable": "false"})
    topic = topic_name("hang")
    create_topic(b.bootstrap, topic, partitions=2)
    tid = f"hang-{uuid.uuid4().hex[:6]}"
    p = txn_producer(b.bootstrap, tid)
    p.begin_transaction()
    produce_in_txn(p, topic, 0, 1)  # t-0 is in the coordinator's transaction
    admin = kadmin(b.bootstrap)
    try:
        pid = admin.describe_transactions([tid])[tid].producer_id
    finally:
        admin.close()

    w = WireClient(b.port)
    try:
        stray = write_txn_batch(w, topic, 1, tid, pid, 0, 0)  # t-1 never added to the transaction
        ghost_pid = pid + 5000  # a producer id no coordinator ever handed out
        ghost = write_txn_batch(w, topic, 0, f"ghost-{tid}", ghost_pid, 0, 0)
    finally:
        w.close()
    produce(b.bootstrap, topic, [b"after-1"], partition=1)  # committed data behind the stray transaction
    node = str(broker_id(b.bootstrap))

    def hanging() -> list[list[str]]:
        rows = cli(b.bootstrap, "find-hanging", "--broker-id", node, "--max-transaction-timeout", "0")
        assert rows[0][:6] == ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset"]
        return sorted(r[:6] for r in rows[1:])

    time.sleep(0.05)  # find-hanging looks at producers idle for longer than the timeout (0 minutes here)
    # The producer's open transaction on t-0 is not hanging: its coordinator lists t-0 and will mark it.
    assert hanging() == sorted(
        [[topic, "1", str(pid), "0", "-1", str(stray)], [topic, "0", str(ghost_pid), "0", "-1", str(ghost)]]
    )
    # With the default 15 minutes nothing is old enough to be judged.
    assert cli(b.bootstrap, "find-hanging", "--topic", topic)[1:] == []
    p.commit_transaction(30)  # marks t-0 only: t-1 stays open
    assert [r[1] for r in hanging()] == ["0", "1"]
    assert lso(b.bootstrap, topic, 1) == stray

    out = CliRunner().invoke(
        app,
        [
            "transactions",
            "abort",
            "-b",
            b.bootstrap,
            "--topic",
            topic,
            "--partition",
            "1",
            "--start-offset",
            str(stray),
        ],
    )
    assert out.exit_code == 0 and f"producer {pid}" in out.stdout, out.output
    assert cli(b.bootstrap, "abort", "--topic", topic, "--partition", "0", "--start-offset", str(ghost + 100), ok=False)
    cli(b.bootstrap, "abort", "--topic", topic, "--partition", "0", "--start-offset", str(ghost))
    assert hanging() == []
    # The marker unblocked read_committed: the LSO is the high watermark again and the data behind is visible.
    deadline = time.monotonic() + 10
    while lso(b.bootstrap, topic, 1) != stray + 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert lso(b.bootstrap, topic, 1) == stray + 3  # stray batch, the record after it, the ABORT marker
    from tests.integration.test_transactions import read_partitions

    seen = read_partitions(b.bootstrap, topic, 2, "read_committed")
    assert sorted(v for _p, _o, v in seen) == [b"after-1", b"v0"]
