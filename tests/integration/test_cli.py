"""The `epochlog` command line against a real broker: topics and dump-log."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.broker_process import BrokerProcess
from tests.integration.helpers import produce, topic_name


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "epochlog.cli.main", *args], capture_output=True, text=True, timeout=60
    )


def test_topics_create_list_describe_delete(broker: BrokerProcess) -> None:
    name = topic_name("cli")
    r = run("topics", "create", name, "--partitions", "3", "--config", "retention.ms=60000", "-b", broker.bootstrap)
    assert r.returncode == 0, r.stderr
    r = run("topics", "list", "-b", broker.bootstrap)
    assert name in r.stdout.split()
    r = run("topics", "describe", name, "-b", broker.bootstrap)
    lines = r.stdout.splitlines()
    assert r.returncode == 0 and lines[0].startswith(f"Topic: {name}\tTopicId: "), r.stdout
    assert "PartitionCount: 3" in lines[0] and "retention.ms=60000" in lines[0], r.stdout
    assert [x.split("\t")[2] for x in lines[1:]] == ["Partition: 0", "Partition: 1", "Partition: 2"], r.stdout
    assert all("Leader: 1\tReplicas: 1\tIsr: 1\tElr: \tLastKnownElr: " in x for x in lines[1:]), r.stdout
    r = run("topics", "create", name, "-b", broker.bootstrap)
    assert r.returncode == 1 and "already exists" in r.stderr.lower()
    r = run("topics", "delete", name, "-b", broker.bootstrap)
    assert r.returncode == 0, r.stderr
    assert name not in run("topics", "list", "-b", broker.bootstrap).stdout.split()


def test_dump_log_reports_epochs_and_a_torn_tail(broker: BrokerProcess) -> None:
    name = topic_name("dump")
    for i in range(3):
        produce(broker.bootstrap, name, [b"m%d" % i], {"linger.ms": 0})
    broker.stop()
    part = broker.data_dir / f"{name}-0"
    r = run("dump-log", str(part), "--json")
    batches = [json.loads(line) for line in r.stdout.splitlines()][1:]
    assert [b["base_offset"] for b in batches] == [0, 1, 2]
    assert all(b["crc_valid"] and b["partition_leader_epoch"] >= 0 for b in batches)
    seg = sorted(part.glob("*.log"))[0]
    with open(seg, "r+b") as f:
        f.truncate(seg.stat().st_size - 5)
    r = run("dump-log", str(seg))
    assert r.returncode == 0
    assert "CORRUPT TAIL" in r.stdout and r.stdout.count("isvalid: true") == 2


def test_bad_config_is_a_clear_error(tmp_path) -> None:
    r = run("up", "--data-dir", str(tmp_path / "d"), "--port", "1", "--set", "log.segment.bytes=lots")
    assert r.returncode == 2
    # the message the controller gives for the same value of segment.bytes (one table, one check)
    assert "Invalid value lots for configuration log.segment.bytes: Not a number of type INT" in r.stderr


def test_deleted_topic_does_not_come_back_with_old_data(broker: BrokerProcess) -> None:
    name = topic_name("again")
    produce(broker.bootstrap, name, [b"old"] * 3)
    r = run("topics", "delete", name, "-b", broker.bootstrap)
    assert r.returncode == 0, r.stderr
    acked = produce(broker.bootstrap, name, [b"new"])  # auto-created afresh
    assert acked[0][1] == 0
    broker.restart(hard=True)
    acked = produce(broker.bootstrap, name, [b"newer"])
    assert acked[0][1] == 1


def test_leftover_log_dirs_are_removed_at_start(broker: BrokerProcess) -> None:
    import shutil

    name = topic_name("keep")
    produce(broker.bootstrap, name, [b"x"])
    broker.stop()
    ghost = broker.data_dir / "ghost-0"
    shutil.copytree(broker.data_dir / f"{name}-0", ghost)
    broker.start()
    assert not ghost.exists()
    assert (broker.data_dir / f"{name}-0").exists()
