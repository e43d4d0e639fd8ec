"""`epochlog metadata-quorum describe` against real controllers: Kafka's field names, live values."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.broker_process import BrokerProcess, free_port
from tests.integration.helpers import create_topic, topic_name
from tests.integration.quorum_procs import kraft_version


def describe(bootstrap_controller: str, what: str) -> str:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "epochlog.cli.main",
            "metadata-quorum",
            "describe",
            what,
            "--bootstrap-controller",
            bootstrap_controller,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def status(bootstrap_controller: str) -> dict[str, str]:
    return {
        k.strip(): v.strip()
        for k, _, v in (line.partition(":") for line in describe(bootstrap_controller, "--status").splitlines())
    }


def test_status_and_replication_of_a_cluster(cluster) -> None:  # type: ignore[no-untyped-def]
    ctrl = f"127.0.0.1:{cluster.controller.port}"
    before = status(ctrl)
    assert before["LeaderId"] == "0" and before["CurrentVoters"] == "[0]"
    assert before["ClusterId"] == (cluster.data_dir / "cluster.id").read_text().strip()
    assert before["CurrentObservers"] == "[1,2,3]", "the brokers follow the metadata log as observers"
    assert kraft_version(cluster.controller.port) == (0, 1), "controller.quorum.voters: a static quorum"
    create_topic(cluster.bootstrap, topic_name("mq"), partitions=3)
    deadline = time.monotonic() + 20
    while int(status(ctrl)["HighWatermark"]) <= int(before["HighWatermark"]):  # the topic's records committed
        assert time.monotonic() < deadline, "the high watermark did not move after CreateTopics"
        time.sleep(0.2)
    hw = int(status(ctrl)["HighWatermark"])
    deadline = time.monotonic() + 20
    while True:
        lines = describe(ctrl, "--replication").splitlines()
        assert lines[0].split() == [
            "NodeId",
            "DirectoryId",
            "LogEndOffset",
            "Lag",
            "LastFetchTimestamp",
            "LastCaughtUpTimestamp",
            "Status",
        ]
        rows = {r.split()[0]: r.split() for r in lines[1:]}
        if all(int(rows[b][2]) >= hw for b in ("1", "2", "3")):
            break
        assert time.monotonic() < deadline, f"observers did not reach the high watermark {hw}: {lines}"
        time.sleep(0.2)
    assert rows["0"][6] == "Leader" and {rows[b][6] for b in ("1", "2", "3")} == {"Observer"}
    cluster.kill9("broker-2")
    dead_at = None
    deadline = time.monotonic() + 15
    while True:  # the live observers keep fetching; the dead one's last fetch stays where it was
        rows = {r.split()[0]: r.split() for r in describe(ctrl, "--replication").splitlines()[1:]}
        dead_at = dead_at or int(rows["2"][4])
        if int(rows["1"][4]) > dead_at and int(rows["3"][4]) > dead_at:
            break
        assert time.monotonic() < deadline, f"live observers did not fetch past the dead one's last fetch: {rows}"
        time.sleep(0.3)
    assert int(rows["2"][4]) == dead_at, "a dead observer's last fetch moved"


def test_a_combined_node_describes_itself(tmp_path: Path) -> None:
    cport = free_port()
    b = BrokerProcess(
        tmp_path / "data", settings={"listeners": f"PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{cport}"}
    )
    b.start()
    try:
        st = status(f"127.0.0.1:{cport}")
        assert st["LeaderId"] == "1" and st["CurrentVoters"] == "[1]" and st["CurrentObservers"] == "[]"
        assert st["ClusterId"] and int(st["HighWatermark"]) > 0
    finally:
        b.stop()
