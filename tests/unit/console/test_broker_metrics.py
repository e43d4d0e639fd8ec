"""Where the console finds the brokers' metrics endpoints, what it reads from them, which brokers it calls
fenced, and the broker's /v1/leader-epochs answer over a crafted broker."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import generate_latest

from epochlog.console.broker_metrics import MetricsEndpoints, parse_port_map, throughput_of
from epochlog.console.metadata import Broker, ClusterMetadata, Partition, Topic
from epochlog.console.reader import broker_states
from epochlog.replication.types import Role
from epochlog.server.metrics import BrokerMetrics
from epochlog.storage.epoch_cache import LeaderEpochCache

pytestmark = pytest.mark.unit


def test_port_map_and_urls() -> None:
    m = MetricsEndpoints(9404, parse_port_map("1=9301, 2=other:9302,3=::1:9303"))
    assert m.base_url(1, "h1") == "http://h1:9301"
    assert m.base_url(2, "h2") == "http://other:9302"
    assert m.base_url(3, "h3") == "http://[::1]:9303"
    assert m.base_url(4, "h4") == "http://h4:9404"  # not in the map: --metrics-port on its own host
    assert MetricsEndpoints().base_url(1, "h1") is None
    with pytest.raises(ValueError):
        parse_port_map("1:9301")


def test_throughput_sums_a_brokers_counters() -> None:
    m = BrokerMetrics()
    m.bytes_in.labels("a").inc(100)
    m.bytes_in.labels("b").inc(50)
    m.bytes_out.labels("a").inc(7)
    m.messages_in.labels("a").inc(3)
    got = throughput_of(generate_latest(m.registry).decode())
    assert (got["bytes_in"], got["bytes_out"], got["messages_in"]) == (150, 7, 3)
    assert got["topics"]["a"] == {"bytes_in": 100, "bytes_out": 7, "messages_in": 3}
    assert got["topics"]["b"]["bytes_in"] == 50


def _md(brokers: list[int], replicas: tuple[int, ...]) -> ClusterMetadata:
    part = Partition("t", 0, brokers[0], 1, replicas, tuple(brokers), (), 0)
    live = tuple(Broker(b, "h", 1, None) for b in brokers)
    return ClusterMetadata("c", brokers[0], live, {"t": Topic("t", False, 0, (part,))})


def test_broker_states() -> None:
    md = _md([1, 2], (1, 2, 3))
    assert broker_states(md, None) == [
        {"node_id": 1, "state": "up"},
        {"node_id": 2, "state": "up"},
        {"node_id": 3, "state": "fenced or down", "caught_up_ms_ago": None},
    ]
    # Broker 3 still fetches the metadata log: alive, fenced. Broker 4 holds no replica but is an observer
    # that stopped fetching; controller 0 is a voter only and is no broker.
    quorum = {
        "voters": [{"node_id": 0}],
        "observers": [{"node_id": 3, "caught_up_ms_ago": 200}, {"node_id": 4, "caught_up_ms_ago": 60_000}],
    }
    states = {s["node_id"]: s["state"] for s in broker_states(md, quorum)}
    assert states == {1: "up", 2: "up", 3: "fenced", 4: "fenced or down"}


def _call(app: Any, path: str, query: str) -> tuple[str, Any]:
    got: dict[str, Any] = {}

    def start(status: str, headers: list[tuple[str, str]]) -> None:
        got["status"], got["headers"] = status, dict(headers)

    env = {"PATH_INFO": path, "QUERY_STRING": query, "REQUEST_METHOD": "GET", "wsgi.input": io.BytesIO(b"")}
    body = b"".join(app(env, start))
    return got["status"], body


def test_leader_epochs_endpoint_reads_the_live_cache() -> None:
    cache = LeaderEpochCache([(0, 0), (2, 40)])
    plog = SimpleNamespace(epoch_cache=cache, log_start_offset=5, log_end_offset=77)
    replica = SimpleNamespace(role=Role.FOLLOWER, leader_id=2, leader_epoch=2, high_watermark=70)
    part = SimpleNamespace(log=plog, replica=replica, offline=False)
    broker = SimpleNamespace(config=SimpleNamespace(node_id=3), partitions={("t", 0): part})
    m = BrokerMetrics()
    m._broker = broker  # type: ignore[assignment]  # bind() needs a whole broker; the endpoint needs these
    app = m.wsgi_app()
    status, body = _call(app, "/v1/leader-epochs", "topic=t&partition=0")
    assert status == "200 OK"
    d = json.loads(body)
    assert d["entries"] == [{"epoch": 0, "start_offset": 0}, {"epoch": 2, "start_offset": 40}]
    assert (d["node_id"], d["role"], d["log_start_offset"], d["log_end_offset"], d["high_watermark"]) == (
        3, "follower", 5, 77, 70,
    )  # fmt: skip
    # The answer follows the cache as it changes (a truncation), with no file read.
    cache.truncate_from_end(30)
    assert json.loads(_call(app, "/v1/leader-epochs", "topic=t&partition=0")[1])["entries"] == [
        {"epoch": 0, "start_offset": 0}
    ]
    assert _call(app, "/v1/leader-epochs", "topic=t&partition=1")[0].startswith("404")
    assert _call(app, "/v1/leader-epochs", "topic=t&partition=x")[0].startswith("400")
    status, body = _call(app, "/metrics", "")
    assert status.startswith("200") and b"kafka_server_replicamanager_partitioncount" in body
