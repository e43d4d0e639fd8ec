"""Share group administration against a real broker: a group config ``share.auto.offset.reset=earliest`` set
with `epochlog configs` makes a fresh ShareConsumer read records produced before it joined (and bad group
configs are refused with INVALID_CONFIG), `epochlog share-groups --describe --offsets` shows the start
offset, offsets cannot be reset or deleted nor the group deleted while it has a member (NON_EMPTY_GROUP,
also from AlterShareGroupOffsets itself), and once it is empty a reset to the earliest offset redelivers,
DeleteShareGroupOffsets forgets the start offset and the group can be deleted.

One broker serves the module; the tests run in order, each building on the last.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, Message, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.alter_share_group_offsets.v0.request import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from kio.schema.describe_share_group_offsets.v1.request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsRequestTopic,
)
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i64
from typer.testing import CliRunner

from epochlog.cli.main import app
from epochlog.cli.share_groups_cmd import run
from epochlog.client.configs import ConfigsError, alter
from epochlog.client.wire import Connection
from epochlog.codes import Err
from tests.broker_process import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TOPIC = "adm"
GROUP = "sg-admin"
BEFORE = [b"before-%d" % i for i in range(5)]
SETTINGS = {"group.share.heartbeat.interval.ms": "300"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(Path(tmp_path_factory.mktemp("share-admin")) / "data", settings=SETTINGS).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})  # kept: a dropped handle fails its futures
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(15)
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
        for v in BEFORE:
            p.produce(TOPIC, v)
        assert p.flush(10) == 0
        yield b
    finally:
        b.stop()


@pytest.fixture(scope="module")
def member(broker: BrokerProcess) -> Iterator[list[ShareConsumer]]:
    """The group's one member while the tests need it (closed by the test that empties the group)."""
    held: list[ShareConsumer] = []
    yield held
    for c in held:
        c.close()


def consumer(b: BrokerProcess) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": b.bootstrap, "group.id": GROUP, "share.acknowledgement.mode": "explicit"})
    c.subscribe([TOPIC])
    return c


def take(c: ShareConsumer, n: int, timeout: float = 15) -> list[Message]:
    got: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(got) < n:
        assert time.monotonic() < deadline, [m.value() for m in got]
        for m in c.poll(0.2) or []:
            if m.error() is None:
                got.append(m)
                c.acknowledge(m, AcknowledgeType.ACCEPT)
        c.commit_sync(10)
    return got


def share_groups(b: BrokerProcess, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[list[str]], str]:
    capsys.readouterr()
    code = run(["--bootstrap-server", b.bootstrap, *args])
    out, err = capsys.readouterr()
    return code, [line.split() for line in out.splitlines() if line.strip()], err


def until(check: Callable[[], bool], what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_group_config_earliest_reads_what_was_produced_before(
    broker: BrokerProcess, member: list[ShareConsumer]
) -> None:
    runner = CliRunner()
    base = ["configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "groups", "--entity-name", GROUP]
    r = runner.invoke(app, [*base, "--alter", "--add-config", "share.auto.offset.reset=earliest"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, [*base, "--describe"])
    assert r.exit_code == 0 and "share.auto.offset.reset=earliest" in r.output, r.output
    # Refused by the controller as Kafka's GroupConfig refuses them, nothing written.
    for name, value, message in (
        ("share.auto.offset.reset", "none", "'earliest', 'latest' or of the format"),
        ("share.session.timeout.ms", "1000", "must be greater than or equal to group.share.min.session.timeout.ms"),
        ("share.unknown", "1", "Unknown group config name"),
    ):
        with pytest.raises(ConfigsError, match=message) as e:
            alter(broker.bootstrap, 32, GROUP, {name: value}, [])
        assert e.value.code == Err.INVALID_CONFIG
    c = consumer(broker)
    member.append(c)
    got = take(c, len(BEFORE))
    assert [m.value() for m in got] == BEFORE
    assert [m.delivery_count() for m in got] == [1] * len(BEFORE)


def test_describe_offsets_shows_the_start_offset(
    broker: BrokerProcess, member: list[ShareConsumer], capsys: pytest.CaptureFixture[str]
) -> None:
    rows: list[list[str]] = []

    def shown() -> bool:
        nonlocal rows
        code, rows, err = share_groups(broker, capsys, "--describe", "--group", GROUP, "--offsets")
        assert code == 0, err
        # The leader epoch that wrote the state: the partition's, whatever it is on this broker.
        return [r[:3] + r[4:] for r in rows[1:]] == [[GROUP, TOPIC, "0", str(len(BEFORE)), "0"]] and rows[1][
            3
        ].isdigit()

    until(shown, f"the start offset past the accepted records: {rows}")
    assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG"]
    rows = share_groups(broker, capsys, "--describe", "--group", GROUP, "--state")[1]
    assert rows[1][0] == GROUP and rows[1][-2:] == ["Stable", "1"]
    assert share_groups(broker, capsys, "--list")[1] == [[GROUP]]
    # Named partitions: each read where its state lives; one the topic lacks and a topic that does not exist.
    topics = (
        DescribeShareGroupOffsetsRequestTopic(topic_name=TopicName(TOPIC), partitions=(i32(0), i32(7))),
        DescribeShareGroupOffsetsRequestTopic(topic_name=TopicName("nope"), partitions=(i32(0),)),
    )
    req = DescribeShareGroupOffsetsRequest(
        groups=(DescribeShareGroupOffsetsRequestGroup(group_id=GroupId(GROUP), topics=topics),)
    )
    host, port = broker.bootstrap.split(":")
    with Connection(host, int(port), 10) as conn:
        (g,) = conn.request(req).groups
    assert g.error_code == Err.NONE
    got = {
        (t.topic_name, p.partition_index): (p.error_code, p.start_offset, p.lag) for t in g.topics for p in t.partitions
    }
    assert got == {
        (TOPIC, 0): (Err.NONE, len(BEFORE), 0),
        (TOPIC, 7): (Err.UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
        ("nope", 0): (Err.UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
    }


def test_offsets_and_the_group_stay_while_it_has_a_member(
    broker: BrokerProcess, member: list[ShareConsumer], capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = share_groups(broker, capsys, "--reset-offsets", "--group", GROUP, "--topic", TOPIC,
                                "--to-earliest", "--execute")  # fmt: skip
    assert code == 1 and f"Share group '{GROUP}' is not empty." in err
    code, _, err = share_groups(broker, capsys, "--delete-offsets", "--group", GROUP, "--topic", TOPIC)
    assert code == 1 and "forbidden if the group is not empty" in err
    code, _, err = share_groups(broker, capsys, "--delete", "--group", GROUP)
    assert code == 1 and "NON_EMPTY_GROUP" in err
    # The broker refuses too, not only the command.
    host, port = broker.bootstrap.split(":")
    part = AlterShareGroupOffsetsRequestPartition(partition_index=i32(0), start_offset=i64(0))
    req = AlterShareGroupOffsetsRequest(
        group_id=GroupId(GROUP),
        topics=(AlterShareGroupOffsetsRequestTopic(topic_name=TopicName(TOPIC), partitions=(part,)),),
    )
    with Connection(host, int(port), 10) as conn:
        assert conn.request(req).error_code == Err.NON_EMPTY_GROUP
    assert share_groups(broker, capsys, "--describe", "--group", GROUP)[1][1][4] == str(len(BEFORE))


def test_once_empty_reset_redelivers_and_the_group_can_be_deleted(
    broker: BrokerProcess, member: list[ShareConsumer], capsys: pytest.CaptureFixture[str]
) -> None:
    member.pop().close()
    until(lambda: share_groups(broker, capsys, "--describe", "--group", GROUP, "--state")[1][1][-2:] == ["Empty", "0"],
          "the group to be empty")  # fmt: skip
    code, rows, err = share_groups(broker, capsys, "--reset-offsets", "--group", GROUP, "--topic", TOPIC,
                                   "--to-earliest", "--execute")  # fmt: skip
    assert code == 0, err
    assert rows == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], [GROUP, TOPIC, "0", "0"]]
    assert share_groups(broker, capsys, "--describe", "--group", GROUP)[1][1][4] == "0"
    c = consumer(broker)
    try:
        assert [m.value() for m in take(c, len(BEFORE))] == BEFORE
    finally:
        c.close()
    until(lambda: share_groups(broker, capsys, "--describe", "--group", GROUP, "--state")[1][1][-2] == "Empty",
          "the group to be empty again")  # fmt: skip
    code, rows, err = share_groups(broker, capsys, "--delete-offsets", "--group", GROUP, "--topic", TOPIC)
    assert code == 0, err
    assert rows[-1] == [TOPIC, "Successful"]
    assert share_groups(broker, capsys, "--describe", "--group", GROUP)[1] == []  # no start offset: no rows
    code, rows, err = share_groups(broker, capsys, "--delete", "--group", GROUP)
    assert code == 0 and rows == [
        ["Deletion", "of", "requested", "share", "groups", f"('{GROUP}')", "was", "successful."]
    ]
    assert share_groups(broker, capsys, "--list")[1] == []
    code, _, err = share_groups(broker, capsys, "--describe", "--group", GROUP)
    assert code == 1 and f"Share group '{GROUP}' does not exist." in err
