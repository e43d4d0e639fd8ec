"""`epochlog up --cores 2` as a user runs it: two full brokers on one host, partitions led by both, clients
unchanged, every process gone after SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from epochlog.server.cluster.local import free_base_port, wait_for_port
from tests.integration.helpers import consume_assign, create_topic, produce, topic_name


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True, timeout=10)
    return [int(x) for x in out.stdout.split()]


def test_up_with_two_cores_runs_two_brokers_that_share_the_partitions(tmp_path: Path) -> None:
    base = free_base_port(2)
    brokers: list[int] = []
    proc = subprocess.Popen(
        [sys.executable, "-m", "epochlog.cli.main", "up", "--cores", "2", "--port", str(base),
         "--data-dir", str(tmp_path / "d"), "--set", "num.partitions=4"],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "up.err", "wb"), start_new_session=True,
    )  # fmt: skip
    try:
        for port in (base, base + 1):
            wait_for_port(port, 60, proc)
        bootstrap = f"127.0.0.1:{base}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        cluster = admin.describe_cluster(request_timeout=10).result(timeout=15)
        assert sorted(n.id for n in cluster.nodes) == [1, 2]
        assert {n.rack for n in cluster.nodes} == {socket.gethostname()}
        topic = topic_name("cores")
        create_topic(bootstrap, topic, partitions=4)
        leaders = {p.id: p.leader for p in admin.list_topics(topic, timeout=10).topics[topic].partitions.values()}
        assert set(leaders.values()) == {1, 2}, f"both brokers lead partitions: {leaders}"
        for part in range(4):
            produce(bootstrap, topic, [b"p%d-%d" % (part, i) for i in range(50)], partition=part)
        for part in range(4):
            got = [m.value() for m in consume_assign(bootstrap, topic, part, 50, timeout=20)]
            assert got == [b"p%d-%d" % (part, i) for i in range(50)]
        brokers = _children(proc.pid)
        assert len(brokers) == 3, "a controller and two brokers, each its own process"
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
    assert rc == 0, (tmp_path / "up.err").read_text()[-2000:]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(pid) for pid in brokers):
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in brokers), "a broker outlived `epochlog up`"
    for port in (base, base + 1):
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
    assert "epochlog is up on 2 cores" in (tmp_path / "up.err").read_text()
