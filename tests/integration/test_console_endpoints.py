"""The console with the brokers' metrics endpoints: every replica's lineage asked of its own broker over
`GET /v1/leader-epochs` (so it works with the brokers on other machines), throughput per broker from their
Prometheus counters, and brokers that drop out of Metadata shown as fenced or down.

One 3-broker cluster with metrics.port set on each broker; the console runs in-process (create_app over a
ClusterReader) so each test can point it at the endpoints it wants, including a wrong one.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from epochlog.console.app import create_app
from epochlog.console.broker_metrics import MetricsEndpoints, parse_port_map
from epochlog.console.reader import ClusterReader
from epochlog.server.cluster.local import LocalCluster, wait_for_port
from tests.broker_process import free_port
from tests.integration.browser import chromium, recording_page, served
from tests.integration.cluster_helpers import create_topic, leader_epoch, new_cluster, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TOPIC = "lineage"


def _get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return int(r.status), json.loads(r.read())
    except urllib.error.HTTPError as e:
        return int(e.code), json.loads(e.read())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, dict[int, int]]]:
    lc = new_cluster(
        tmp_path_factory.mktemp("endpoints"),
        3,
        controller={"broker.session.timeout.ms": "2000"},
        broker_heartbeat_interval_ms="300",
    )
    ports = {n: free_port() for n in lc.broker_ids()}
    for n, port in ports.items():
        with open(lc.broker(n).config, "a") as f:
            f.write(f"metrics.port={port}\n")
    lc.start()
    try:
        create_topic(lc.bootstrap, TOPIC, 1, 3, {"min.insync.replicas": "2"})
        wait_until(lambda: leader_epoch(lc.bootstrap, TOPIC)[0] >= 0, 20, "a leader")
        prod = Producer({"bootstrap.servers": lc.bootstrap, "acks": "all"})
        for i in range(12):
            prod.produce(TOPIC, value=b"v%d" % i, partition=0)
        assert prod.flush(30) == 0
        yield lc, ports
    finally:
        lc.stop()


@pytest.fixture
def console_with(cluster: tuple[LocalCluster, dict[int, int]]) -> Iterator[Any]:
    with ExitStack() as stack:

        def start(endpoints: MetricsEndpoints) -> str:
            reader = ClusterReader(cluster[0].bootstrap, bootstrap_controllers=cluster[0].bootstrap_controllers,
                                   endpoints=endpoints)  # fmt: skip
            stack.callback(reader.close)
            return stack.enter_context(served(create_app(reader, refresh=0.3)))

        yield start


def test_the_broker_serves_its_replicas_epoch_cache(cluster: tuple[LocalCluster, dict[int, int]]) -> None:
    lc, ports = cluster
    leader, epoch = leader_epoch(lc.bootstrap, TOPIC)
    for n, port in ports.items():
        status, d = _get(f"http://127.0.0.1:{port}/v1/leader-epochs?topic={TOPIC}&partition=0")
        assert status == 200, d
        assert d["node_id"] == n and d["role"] == ("leader" if n == leader else "follower")
        assert d["leader_epoch"] == epoch
        assert d["entries"] == [{"epoch": epoch, "start_offset": 0}]
        assert (d["log_start_offset"], d["log_end_offset"]) == (0, 12)
        # The in-memory cache is what the broker wrote to its checkpoint file.
        cp = (lc.data_dir / f"broker-{n}" / f"{TOPIC}-0" / "leader-epoch-checkpoint").read_text().split()
        assert cp == ["0", "1", str(epoch), "0"]
    port = ports[1]
    assert _get(f"http://127.0.0.1:{port}/v1/leader-epochs?topic=nope&partition=0")[0] == 404
    assert _get(f"http://127.0.0.1:{port}/v1/leader-epochs?topic={TOPIC}")[0] == 400
    # Prometheus text is still served on every other path.
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        assert b"kafka_server_brokertopicmetrics_bytesin_total" in r.read()


def test_lineage_comes_from_each_brokers_endpoint(
    cluster: tuple[LocalCluster, dict[int, int]], console_with: Any
) -> None:
    _, ports = cluster
    # As a user gives it on the command line.
    spec = ",".join(f"{n}=127.0.0.1:{p}" for n, p in ports.items())
    url = console_with(MetricsEndpoints(port_map=parse_port_map(spec)))
    status, d = _get(f"{url}/api/topics/{TOPIC}/partitions/0")
    assert status == 200, d
    epoch = d["leader_epoch"]
    for row in d["lineage"]:
        assert row["source"] == "the broker's /v1/leader-epochs", row
        assert row["entries"] == [{"epoch": epoch, "start_offset": 0}]
        assert row["log_end_offset"] == 12 and row.get("endpoint_error") is None
        assert "path" not in row  # no file was read


def test_lineage_falls_back_to_files_when_no_endpoint_answers(
    cluster: tuple[LocalCluster, dict[int, int]], console_with: Any
) -> None:
    """The negative case: endpoints named where nothing listens. The leader's column comes from
    OffsetsForLeaderEpoch and the followers' from their checkpoint files, each saying the endpoint failed."""
    lc, _ = cluster
    nowhere = free_port()
    url = console_with(MetricsEndpoints(port=nowhere, timeout=0.5))
    _, d = _get(f"{url}/api/topics/{TOPIC}/partitions/0")
    sources = {r["broker"]: r["source"] for r in d["lineage"]}
    assert sources == {
        n: ("OffsetsForLeaderEpoch" if n == d["leader"] else "leader-epoch-checkpoint") for n in lc.broker_ids()
    }
    assert all(str(nowhere) in r["endpoint_error"] for r in d["lineage"])
    assert all(r["entries"] == [{"epoch": d["leader_epoch"], "start_offset": 0}] for r in d["lineage"])


def test_the_console_command_takes_the_endpoints(cluster: tuple[LocalCluster, dict[int, int]], tmp_path: Path) -> None:
    """`epochlog console --metrics-port-map` as a user types it; a malformed map is refused at start."""
    lc, ports = cluster
    bad = subprocess.run(
        [sys.executable, "-m", "epochlog.cli.main", "console", "-b", lc.bootstrap, "--metrics-port-map", "1:9301"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bad.returncode == 2 and "BROKER_ID=PORT" in bad.stderr, bad.stderr
    port = free_port()
    spec = ",".join(f"{n}={p}" for n, p in ports.items())
    with open(tmp_path / "console.log", "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "epochlog.cli.main", "console", "-b", lc.bootstrap, "--metrics-port-map", spec,
             "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        wait_for_port(port, 30, proc)
        _, d = _get(f"http://127.0.0.1:{port}/api/topics/{TOPIC}/partitions/0")
        assert {r["source"] for r in d["lineage"]} == {"the broker's /v1/leader-epochs"}, d
        _, ov = _get(f"http://127.0.0.1:{port}/api/overview")
        assert ov["throughput"]["source"] == "metrics"
        assert set(ov["throughput"]["brokers"]) == {str(n) for n in ports}
    finally:
        proc.terminate()
        proc.wait(10)


def test_overview_throughput_and_a_fenced_broker_in_chromium(
    cluster: tuple[LocalCluster, dict[int, int]], console_with: Any, tmp_path: Path
) -> None:
    """Per-broker bytes in/out per second from the metrics while records arrive; then a kill -9 shows the
    broker as fenced or down. Runs last in this module: it takes a broker down."""
    lc, ports = cluster
    url = console_with(MetricsEndpoints(port_map={n: (None, p) for n, p in ports.items()}))
    ov = _get(f"{url}/api/overview")[1]
    assert ov["throughput"]["source"] == "metrics"
    assert ov["throughput"]["topics"][TOPIC]["messages_in"] == 12  # counted once, on the leader
    assert [s["state"] for s in ov["broker_states"]] == ["up", "up", "up"]
    stop = threading.Event()

    def produce() -> None:
        prod = Producer({"bootstrap.servers": lc.bootstrap, "linger.ms": 5})
        deadline = time.monotonic() + 30
        while not stop.is_set() and time.monotonic() < deadline:
            for _ in range(20):
                prod.produce(TOPIC, value=b"x" * 100)
            prod.poll(0)
            time.sleep(0.05)
        prod.flush(15)

    leader, _ = leader_epoch(lc.bootstrap, TOPIC)
    with chromium() as b:
        p, errors = recording_page(b)
        p.goto(url + "/")
        p.wait_for_selector("#broker-throughput tbody tr")
        t = threading.Thread(target=produce, daemon=True)
        t.start()
        try:
            cell = f'#broker-throughput tr[data-broker="{leader}"] [data-field=bytes-in]'
            p.wait_for_function(
                f"() => Number((document.querySelector('{cell}') || {{}}).dataset?.value || 0) > 1000",
                timeout=10_000,
            )
            topic_cell = f'#topic-throughput tr[data-topic="{TOPIC}"] [data-field=records-in]'
            assert float(p.inner_text(topic_cell)) > 10
            # The live chart draws once it has two rates.
            p.wait_for_selector(f'#broker-throughput tr[data-broker="{leader}"] svg polyline', timeout=5_000)
        finally:
            stop.set()
            t.join(30)
        victim = next(n for n in lc.broker_ids() if n != leader)
        lc.kill9(f"broker-{victim}")
        p.wait_for_selector(f'#brokers tr[data-broker="{victim}"][data-state="fenced or down"]', timeout=10_000)
        assert p.inner_text('[data-card="fenced"] .v') == "1"
        assert p.inner_text('[data-card="brokers"] .v') == "2"
        assert errors == []
