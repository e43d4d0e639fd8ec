"""`epochlog groups` against a real broker, with a classic group (confluent-kafka's default protocol) and a
KIP-848 group (group.protocol=consumer) side by side: both listed with their types, offsets and lag as
kafka-consumer-groups.sh prints them, members (with member epochs for the consumer group), an offset reset
refused while a group is active and done once it is empty, and deletion.

One broker and both groups serve the module; the tests run in order (the reset and deletion come last).
The command runs in-process (``run``), except once as a user runs it, to keep the module cheap.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from epochlog.cli.groups_cmd import run
from tests.broker_process import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TOPIC = "gcli"
PER_PARTITION = 10
CLASSIC = "gcli-classic"
KIP848 = "gcli-848"
COMMITTED = {CLASSIC: {0: 4, 1: 10}, KIP848: {0: 3, 1: 7}}
FAST = {"group.consumer.heartbeat.interval.ms": "300", "group.consumer.session.timeout.ms": "6000"}


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@dataclass
class Setup:
    bootstrap: str
    consumers: dict[str, Consumer]


def _member(bootstrap: str, group: str, protocol: str) -> Consumer:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "client.id": f"{group}-client",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe([TOPIC])
    return c


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    b = BrokerProcess(Path(tmp_path_factory.mktemp("groups")) / "data", settings=FAST).start()
    consumers: dict[str, Consumer] = {}
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(15)
        p = Producer({"bootstrap.servers": b.bootstrap})
        for i in range(2 * PER_PARTITION):
            p.produce(TOPIC, value=b"v%d" % i, partition=i % 2)
        assert p.flush(10) == 0
        for group, protocol in ((CLASSIC, "classic"), (KIP848, "consumer")):
            c = consumers[group] = _member(b.bootstrap, group, protocol)
            wait_until(lambda c=c: (c.poll(0.1), len(c.assignment()) == 2)[1], 20, f"{group}'s assignment")
            c.commit(offsets=[TopicPartition(TOPIC, n, o) for n, o in COMMITTED[group].items()], asynchronous=False)
        yield Setup(b.bootstrap, consumers)
    finally:
        for c in consumers.values():
            c.close()
        b.stop()


def groups(s: Setup, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[list[str]], str]:
    """Run `epochlog groups`: (exit status, stdout's non-empty lines split into columns, stderr)."""
    capsys.readouterr()
    code = run(["--bootstrap-server", s.bootstrap, *args])
    out, err = capsys.readouterr()
    return code, [line.split() for line in out.splitlines() if line.strip()], err


def committed(s: Setup, group: str) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": s.bootstrap})
    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
    return {tp.partition: tp.offset for tp in res.topic_partitions if tp.offset >= 0}


def test_both_groups_are_listed_with_their_types(setup: Setup, capsys: pytest.CaptureFixture[str]) -> None:
    # As a user runs it: the command is registered under `epochlog groups`.
    r = subprocess.run(
        [sys.executable, "-m", "epochlog.cli.main", "groups", "--bootstrap-server", setup.bootstrap, "--list"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split()) == [KIP848, CLASSIC]
    code, rows, _ = groups(setup, capsys, "--list", "--type", "--state")
    assert code == 0
    assert rows == [["GROUP", "TYPE", "STATE"], [KIP848, "Consumer", "Stable"], [CLASSIC, "Classic", "Stable"]]
    assert groups(setup, capsys, "--list", "--type", "consumer")[1] == [["GROUP", "TYPE"], [KIP848, "Consumer"]]
    assert groups(setup, capsys, "--list", "--type", "classic")[1] == [["GROUP", "TYPE"], [CLASSIC, "Classic"]]
    assert groups(setup, capsys, "--list", "--state", "Empty")[1] == [["GROUP", "STATE"]]


def test_describe_offsets_shows_lag_per_partition(setup: Setup, capsys: pytest.CaptureFixture[str]) -> None:
    for group, offsets in COMMITTED.items():
        code, rows, err = groups(setup, capsys, "--describe", "--group", group)
        assert code == 0, err
        head = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST"]
        assert rows[0] == [*head, "CLIENT-ID"]
        got = {int(r[2]): (int(r[3]), int(r[4]), int(r[5])) for r in rows[1:]}
        assert got == {n: (o, PER_PARTITION, PER_PARTITION - o) for n, o in offsets.items()}
        # The one member owns both partitions: its id, host and client id are on each row.
        assert {(r[0], r[1], r[8]) for r in rows[1:]} == {(group, TOPIC, f"{group}-client")}
        assert all(r[6] != "-" and r[7].startswith("/") for r in rows[1:])


def test_describe_members_and_state(setup: Setup, capsys: pytest.CaptureFixture[str]) -> None:
    code, rows, _ = groups(setup, capsys, "--describe", "--group", KIP848, "--members", "--verbose")
    assert code == 0
    head = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "CURRENT-EPOCH", "CURRENT-ASSIGNMENT"]
    assert rows[0] == [*head, "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
    [m] = rows[1:]
    assert (m[0], m[3], m[4], m[6], m[8]) == (KIP848, f"{KIP848}-client", "2", f"{TOPIC}(0,1)", f"{TOPIC}(0,1)")
    assert int(m[5]) >= 1 and int(m[7]) == int(m[5])  # reconciled: at the group's assignment epoch
    code, rows, _ = groups(setup, capsys, "--describe", "--group", CLASSIC, "--members", "--verbose")
    assert rows[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
    assert [(r[0], r[3], r[4], r[5]) for r in rows[1:]] == [(CLASSIC, f"{CLASSIC}-client", "2", f"{TOPIC}(0,1)")]

    code, rows, _ = groups(setup, capsys, "--describe", "--group", KIP848, "--state", "--verbose")
    assert rows[0] == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS", "GROUP-EPOCH",
                       "TARGET-ASSIGNMENT-EPOCH"]  # fmt: skip
    assert (rows[1][0], rows[1][3], rows[1][4], rows[1][5]) == (KIP848, "uniform", "Stable", "1")
    assert int(rows[1][6]) >= 1 and int(rows[1][7]) == int(rows[1][6])
    code, rows, _ = groups(setup, capsys, "--describe", "--group", CLASSIC, "--state")
    assert len(rows[0]) == 6 and (rows[1][0], rows[1][3], rows[1][4], rows[1][5]) == (CLASSIC, "range", "Stable", "1")
    # A group no one has: Kafka's message, and a failing exit status.
    code, rows, err = groups(setup, capsys, "--describe", "--group", "nobody")
    assert (code, rows) == (1, []) and "Consumer group 'nobody' does not exist." in err


def test_reset_offsets_only_while_the_group_is_inactive(setup: Setup, capsys: pytest.CaptureFixture[str]) -> None:
    reset = ["--reset-offsets", "--group", KIP848, "--all-topics", "--to-earliest", "--execute"]
    code, rows, err = groups(setup, capsys, *reset)
    assert code == 1 and rows == []
    assert f"Assignments can only be reset if the group '{KIP848}' is inactive, but the current state is Stable." in err
    assert committed(setup, KIP848) == COMMITTED[KIP848]

    setup.consumers.pop(KIP848).close()  # leaves the group: it is Empty at once
    code, rows, err = groups(setup, capsys, *reset)
    assert code == 0, err
    assert rows == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], [KIP848, TOPIC, "0", "0"], [KIP848, TOPIC, "1", "0"]]
    assert committed(setup, KIP848) == {0: 0, 1: 0}
    # A dry run shows the plan and commits nothing; an offset past the end is clamped to it.
    code, rows, _ = groups(setup, capsys, "--reset-offsets", "--group", KIP848, "--topic", f"{TOPIC}:1",
                           "--to-offset", "99", "--dry-run")  # fmt: skip
    assert rows[1:] == [[KIP848, TOPIC, "1", str(PER_PARTITION)]]
    assert committed(setup, KIP848) == {0: 0, 1: 0}
    code, rows, _ = groups(setup, capsys, "--describe", "--group", KIP848)
    assert {int(r[2]): (r[5], r[6]) for r in rows[1:]} == {0: ("10", "-"), 1: ("10", "-")}


def test_delete_groups(setup: Setup, capsys: pytest.CaptureFixture[str]) -> None:
    # Offsets of a topic a live member subscribes to stay, partition by partition (OffsetDelete's rule).
    code, rows, err = groups(setup, capsys, "--delete-offsets", "--group", CLASSIC, "--topic", TOPIC)
    assert code == 1 and "partition level error" in err
    assert rows[1:] == [[TOPIC, str(n), "Error:", "GROUP_SUBSCRIBED_TO_TOPIC"] for n in (0, 1)]
    assert committed(setup, CLASSIC) == COMMITTED[CLASSIC]
    # The classic group still has its member: refused, as Kafka refuses.
    code, _, err = groups(setup, capsys, "--delete", "--group", CLASSIC)
    assert code == 1 and f"* Group '{CLASSIC}' could not be deleted due to: NON_EMPTY_GROUP" in err
    code, rows, err = groups(setup, capsys, "--delete", "--group", KIP848)
    assert code == 0, err
    assert rows == [f"Deletion of requested consumer groups ('{KIP848}') was successful.".split()]
    assert groups(setup, capsys, "--list")[1] == [[CLASSIC]]
    assert committed(setup, KIP848) == {}
    # Once empty, the classic group's offsets can go, then the group.
    setup.consumers.pop(CLASSIC).close()
    code, rows, err = groups(setup, capsys, "--delete-offsets", "--group", CLASSIC, "--topic", f"{TOPIC}:1")
    assert code == 0, err
    assert committed(setup, CLASSIC) == {0: COMMITTED[CLASSIC][0]}
    assert groups(setup, capsys, "--delete", "--all-groups")[0] == 0
    assert groups(setup, capsys, "--list")[1] == []


def test_usage_errors_exit_2() -> None:
    with pytest.raises(SystemExit) as e:
        run(["--list", "--describe"])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        run(["--reset-offsets", "--group", "g", "--all-topics"])  # no scenario
    assert e.value.code == 2
