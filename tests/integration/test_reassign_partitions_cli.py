"""`epochlog reassign-partitions` against real processes (one controller, four brokers): --generate,
--execute, --verify and --cancel with kafka-reassign-partitions.sh's JSON, and --throttle holding a move
back until the throttle is lifted (leader.replication.throttled.* / follower.replication.throttled.*)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient

from epochlog.server.cluster.local import LocalCluster
from tests.integration.cluster_helpers import new_cluster, partition_info, wait_until
from tests.integration.helpers import produce

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def lc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = new_cluster(tmp_path_factory.mktemp("reassign-cli"), brokers=4)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "epochlog.cli.main", "reassign-partitions", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def create(lc: LocalCluster, name: str, assignments: dict[int, list[int]]) -> None:
    a = KafkaAdminClient(bootstrap_servers=lc.bootstrap, request_timeout_ms=30000)
    try:
        a.create_topics({name: {"assignments": assignments}})
    finally:
        a.close()
    wait_until(lambda: all(partition_info(lc.bootstrap, name, p)[0] >= 0 for p in assignments), 15, "leaders")


def replicas_size(lc: LocalCluster, broker: int, topic: str) -> int:
    d = lc.data_dir / f"broker-{broker}" / f"{topic}-0"
    return sum(f.stat().st_size for f in d.glob("*.log")) if d.exists() else 0


def test_generate_execute_verify(lc: LocalCluster, tmp_path: Path) -> None:
    name = f"cli-{uuid.uuid4().hex[:6]}"
    create(lc, name, {0: [1, 2], 1: [2, 3]})
    bs = lc.bootstrap
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": name}]}))
    r = run("--bootstrap-server", bs, "--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "3,4")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment"
    current = json.loads(lines[1])
    assert {(p["topic"], p["partition"]): p["replicas"] for p in current["partitions"]} == {
        (name, 0): [1, 2],
        (name, 1): [2, 3],
    }
    proposed = json.loads(lines[lines.index("Proposed partition reassignment configuration") + 1])
    assert all(sorted(p["replicas"]) == [3, 4] for p in proposed["partitions"])
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(proposed))
    r = run("--bootstrap-server", bs, "--execute", "--reassignment-json-file", str(plan))
    assert r.returncode == 0, r.stderr
    assert f"Successfully started partition reassignments for {name}-0,{name}-1" in r.stdout
    assert "Save this to use as the --reassignment-json-file option during rollback" in r.stdout

    def verified() -> bool:
        out = run("--bootstrap-server", bs, "--verify", "--reassignment-json-file", str(plan)).stdout
        return out.count("is completed.") == 2

    wait_until(verified, 30, "--verify to report both partitions completed")
    for p in proposed["partitions"]:
        assert partition_info(bs, name, p["partition"])[1] == p["replicas"]
    # a file naming a broker the cluster lacks is refused before anything starts
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": 1, "partitions": [{"topic": name, "partition": 0, "replicas": [3, 9]}]}))
    r = run("--bootstrap-server", bs, "--execute", "--reassignment-json-file", str(bad))
    assert r.returncode == 1 and "9" in r.stderr


def test_throttle_holds_the_move_back_until_lifted_and_cancel(lc: LocalCluster, tmp_path: Path) -> None:
    name = f"throttled-{uuid.uuid4().hex[:6]}"
    create(lc, name, {0: [1]})
    bs = lc.bootstrap
    produce(bs, name, [b"x" * 1000] * 3000, {"acks": "all", "linger.ms": 20})  # about 3 MB to move
    total = replicas_size(lc, 1, name)
    assert total > 2_500_000
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": name, "partition": 0, "replicas": [1, 2]}]}))
    started = time.monotonic()
    r = run("--bootstrap-server", bs, "--execute", "--reassignment-json-file", str(plan), "--throttle", "200000")
    assert r.returncode == 0, r.stderr
    assert "The inter-broker throttle limit was set to 200000 B/s" in r.stdout
    r = run("--bootstrap-server", bs, "--execute", "--reassignment-json-file", str(plan))
    assert r.returncode == 1 and "--additional" in r.stderr  # a move is in progress
    time.sleep(3)
    r = run("--bootstrap-server", bs, "--verify", "--reassignment-json-file", str(plan))
    assert "is still in progress." in r.stdout, r.stdout
    moved = replicas_size(lc, 2, name)
    # Measured against the time that really passed since the move began (each CLI run is a new process, seconds
    # on a loaded machine): at 200 kB/s, plus one fetch's worth of burst. Unthrottled, all of it moves at once.
    elapsed = time.monotonic() - started
    allowed = 200_000 * elapsed * 1.5 + 1_048_576
    assert moved < min(allowed, total), f"{moved} of {total} bytes moved in {elapsed:.1f} s at 200 kB/s"
    # cancel while it is held back: the joining replica leaves and its log goes
    r = run("--bootstrap-server", bs, "--cancel", "--reassignment-json-file", str(plan))
    assert r.returncode == 0 and f"Successfully cancelled partition reassignments for: {name}-0" in r.stdout, r
    wait_until(lambda: not (lc.data_dir / "broker-2" / f"{name}-0").exists(), 15, "broker 2 to drop its replica")
    assert partition_info(bs, name)[1] == [1]
    r = run("--bootstrap-server", bs, "--cancel", "--reassignment-json-file", str(plan))
    assert "None of the specified partition moves are active." in r.stdout
    # again, and this time lift the throttle: --verify clears it once all is done
    r = run("--bootstrap-server", bs, "--execute", "--reassignment-json-file", str(plan), "--throttle", "200000")
    assert r.returncode == 0, r.stderr
    for b in (1, 2):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "epochlog.cli.main",
                "configs",
                "-b",
                bs,
                "--entity-type",
                "brokers",
                "--entity-name",
                str(b),
                "--alter",
                "--delete-config",
                "leader.replication.throttled.rate,follower.replication.throttled.rate",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
    wait_until(lambda: partition_info(bs, name)[2] == [1, 2], 30, "broker 2 in sync once unthrottled")
    r = run("--bootstrap-server", bs, "--verify", "--reassignment-json-file", str(plan))
    assert "is completed." in r.stdout and "Clearing topic-level throttles on topic" in r.stdout, r.stdout
