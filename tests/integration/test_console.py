"""`epochlog console` against a real 3-broker cluster: its JSON API, and its pages in Debian's chromium driven
headless by Playwright (the system browser, never a downloaded one).

One cluster and one console process serve the whole module; the leader kill -9 runs last, since it changes
the cluster the other tests read. The brokers serve their metrics endpoints, but the console process is not
told where (so lineages come over the Kafka protocol); the quotas test runs a second console in-process
that is.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from epochlog.console.app import create_app
from epochlog.console.broker_metrics import MetricsEndpoints
from epochlog.console.reader import ClusterReader
from epochlog.server.cluster.local import LocalCluster, wait_for_port
from tests.integration.browser import chromium, recording_page, served
from tests.integration.cluster_helpers import create_topic, leader_epoch, new_cluster, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

TOPIC = "orders"
GROUP = "console-readers"
PARTITIONS = 3
PER_PARTITION = 10
COMMITTED = {0: 4, 1: 7}  # partition 2 has no committed offset: its lag is unknown, not 10
UPDATE_WITHIN = 5.0  # seconds from the kill -9 to the page showing the new leader (issue 18)
THROTTLED = "console-throttled"  # a client id with a producer_byte_rate quota
QUOTA = 1024  # bytes per second


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _produced() -> dict[int, list[tuple[bytes, bytes]]]:
    return {
        p: [(b"key-%d-%d" % (p, i), b"value-%d-%d" % (p, i)) for i in range(PER_PARTITION)] for p in range(PARTITIONS)
    }


def _configs(bootstrap: str, *args: str) -> None:
    """`epochlog configs`, as a user runs it."""
    cmd = [sys.executable, "-m", "epochlog.cli.main", "configs", "--bootstrap-server", bootstrap, *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.fixture(scope="module")
def metrics_ports() -> dict[int, int]:
    return {n: _free_port() for n in (1, 2, 3)}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, metrics_ports: dict[int, int]) -> Iterator[LocalCluster]:
    # A short broker session so the controller moves leadership soon after a kill -9: the 5 s the page
    # gets is measured from the kill, and Kafka's 9 s default session alone would exceed it.
    lc = new_cluster(
        tmp_path_factory.mktemp("console"),
        3,
        controller={"broker.session.timeout.ms": "2000"},
        broker_heartbeat_interval_ms="300",
    )
    for n, port in metrics_ports.items():
        with open(lc.broker(n).config, "a") as f:
            f.write(f"metrics.port={port}\n")
    lc.start()
    try:
        bs = lc.bootstrap
        create_topic(bs, TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
        wait_until(lambda: all(leader_epoch(bs, TOPIC, p)[0] >= 0 for p in range(PARTITIONS)), 20, "leaders")
        prod = Producer({"bootstrap.servers": bs, "acks": "all"})
        for p, records in _produced().items():
            for k, v in records:
                prod.produce(TOPIC, key=k, value=v, partition=p)
        # One record whose value is not UTF-8 and carries a header, for the hex view.
        prod.produce(TOPIC, key=b"bin", value=b"\x00\xff\x10", partition=2, headers=[("h", b"x")])
        assert prod.flush(30) == 0
        # Commit chosen offsets for a group that never joins (as kafka-consumer-groups --reset-offsets does).
        c = Consumer({"bootstrap.servers": bs, "group.id": GROUP, "enable.auto.commit": False})
        try:
            c.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in COMMITTED.items()], asynchronous=False)
        finally:
            c.close()
        # A quota from the start, so the quotas page has an entity on every test's console.
        add = f"producer_byte_rate={QUOTA}"
        _configs(bs, "--entity-type", "clients", "--entity-name", THROTTLED, "--alter", "--add-config", add)
        yield lc
    finally:
        lc.stop()


@pytest.fixture(scope="module")
def console(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real `epochlog console` command, as a user starts it."""
    port = _free_port()
    log = tmp_path_factory.mktemp("console-log") / "console.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "epochlog.cli.main", "console", "--bootstrap-server", cluster.bootstrap,
             "--bootstrap-controller", cluster.bootstrap_controllers, "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ},
        )  # fmt: skip
    try:
        wait_for_port(port, 30, proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        if proc.returncode not in (0, -15):
            print(log.read_text(errors="replace")[-4000:])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


# -- the JSON API (no browser needed) ------------------------------------------------------------------------


def test_api_topic_matches_the_cluster(cluster: LocalCluster, console: str) -> None:
    d = _get(f"{console}/api/topics/{TOPIC}")
    assert [p["partition"] for p in d["partitions"]] == list(range(PARTITIONS))
    for p in d["partitions"]:
        assert (p["leader"], p["leader_epoch"]) == leader_epoch(cluster.bootstrap, TOPIC, p["partition"])
        assert sorted(p["isr"]) == [1, 2, 3] and len(p["replicas"]) == 3
        assert p["log_start_offset"] == 0
        assert p["size"] > 0  # the leader's replica, from DescribeLogDirs
        assert p["high_watermark"] == PER_PARTITION + (1 if p["partition"] == 2 else 0)
    configs = {c["name"]: c for c in d["configs"]}
    assert (configs["min.insync.replicas"]["value"], configs["min.insync.replicas"]["source"]) == (
        "2",
        "DYNAMIC_TOPIC_CONFIG",
    )
    assert configs["cleanup.policy"]["source"] == "DEFAULT_CONFIG"
    ov = _get(f"{console}/api/overview")
    assert [b["node_id"] for b in ov["brokers"]] == [1, 2, 3]
    assert ov["under_replicated_partitions"] == 0 and ov["offline_partitions"] == 0
    assert ov["controller_id"] >= 0
    # The quorum's active controller comes from the controllers (DescribeQuorum), not from Metadata.
    q = ov["quorum"]
    assert q["leader_id"] == cluster.active_controller().node_id
    assert [v["node_id"] for v in q["voters"]] == [n.node_id for n in cluster.controller_nodes()]
    assert sorted(o["node_id"] for o in q["observers"]) == [1, 2, 3]  # the brokers follow the metadata log


def test_api_messages_and_group(console: str) -> None:
    d = _get(f"{console}/api/messages?topic={TOPIC}&partition=1&offset=3&limit=4")
    got = [(m["key"]["data"], m["value"]["data"]) for m in d["messages"]]
    assert got == [(k.decode(), v.decode()) for k, v in _produced()[1][3:7]]
    # As JSON: the produced values are not JSON, so they come back as text, saying so.
    d = _get(f"{console}/api/messages?topic={TOPIC}&partition=1&offset=0&limit=1&format=json")
    assert d["messages"][0]["value"] == {"as": "text", "data": "value-1-0"}
    # From a timestamp: the first record at or after it; none after the last record's time.
    d = _get(f"{console}/api/messages?topic={TOPIC}&partition=1&timestamp=0&limit=2")
    assert (d["start"], [m["offset"] for m in d["messages"]]) == (0, [0, 1])
    future = int(time.time() * 1000) + 3_600_000
    d = _get(f"{console}/api/messages?topic={TOPIC}&partition=1&timestamp={future}")
    assert (d["start"], d["messages"]) == (None, [])
    g = _get(f"{console}/api/groups/{GROUP}")
    lags = {p["partition"]: p["lag"] for p in g["partitions"]}
    assert lags == {p: PER_PARTITION - o for p, o in COMMITTED.items()}


# -- in the browser ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as b:
        yield b


class Page:
    """A fresh page that records every console error and uncaught exception."""

    def __init__(self, browser: Any) -> None:
        self.page, self.errors = recording_page(browser, timeout_ms=15_000)

    def close(self) -> None:
        self.page.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Page]:
    p = Page(browser)
    yield p
    p.close()


def _partition_rows(page: Any) -> dict[int, tuple[int, int]]:
    """{partition: (leader, leader epoch)} as the topic page shows them."""
    rows = page.eval_on_selector_all(
        "#partitions tbody tr",
        """rows => rows.map(r => [r.dataset.partition,
                r.querySelector('[data-field=leader]').textContent,
                r.querySelector('[data-field=leader-epoch]').textContent])""",
    )
    return {int(p): (int(ld) if ld != "none" else -1, int(e)) for p, ld, e in rows}


PAGES = [
    ("/", "#brokers tbody tr"),
    ("/topics", f'#topics tr[data-topic="{TOPIC}"]'),
    (f"/topics/{TOPIC}", "#configs"),
    (f"/topics/{TOPIC}/1", "#lineage tbody tr"),
    ("/groups", f'#groups tr[data-group="{GROUP}"]'),
    (f"/groups/{GROUP}", "#group-partitions tbody tr"),
    (f"/messages?topic={TOPIC}&partition=0&offset=0", "#messages tbody tr"),
    ("/quotas", f'#quotas tr[data-entity="client-id={THROTTLED}"]'),
]


def test_every_page_loads_without_console_errors(console: str, page: Page) -> None:
    for path, ready in PAGES:
        page.page.goto(console + path)
        page.page.wait_for_selector(ready)
        # Live pages must keep rendering events without errors: let a few SSE refreshes arrive.
        page.page.wait_for_timeout(1500)
        assert not page.page.query_selector(".error"), f"{path} shows an error: {page.page.inner_text('.error')}"
        assert page.errors == [], f"{path}: {page.errors}"


def test_overview_page_shows_brokers_leader_counts_and_quorum(cluster: LocalCluster, console: str, page: Page) -> None:
    page.page.goto(console + "/")
    page.page.wait_for_selector("#brokers tbody tr")
    ov = _get(f"{console}/api/overview")
    shown = {int(b): int(n) for b, n in page.page.eval_on_selector_all(
        "#brokers tbody tr", "rows => rows.map(r => [r.dataset.broker, r.querySelector('[data-leaders]').textContent])"
    )}  # fmt: skip
    assert shown == {b["node_id"]: b["leaders"] for b in ov["brokers"]}
    assert sum(shown.values()) == ov["partitions"]
    assert page.page.inner_text('[data-card="under-replicated"] .v') == "0"
    active = str(cluster.active_controller().node_id)
    assert page.page.inner_text('[data-card="active-controller"] .v') == active
    assert page.page.get_attribute("#quorum-replicas tbody tr:first-child", "data-node") == active


def test_topic_page_shows_leaders_and_epochs(cluster: LocalCluster, console: str, page: Page) -> None:
    page.page.goto(f"{console}/topics/{TOPIC}")
    page.page.wait_for_selector("#partitions tbody tr")
    expected = {p: leader_epoch(cluster.bootstrap, TOPIC, p) for p in range(PARTITIONS)}
    assert _partition_rows(page.page) == expected
    assert page.errors == []


def test_group_page_lag_matches_committed_offsets(cluster: LocalCluster, console: str, page: Page) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    committed = {
        tp.partition: tp.offset
        for tp in admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUP)])[GROUP]
        .result(15)
        .topic_partitions
    }
    assert committed == COMMITTED
    page.page.goto(f"{console}/groups/{GROUP}")
    page.page.wait_for_selector("#group-partitions tbody tr")
    rows = page.page.eval_on_selector_all(
        "#group-partitions tbody tr",
        """rows => rows.map(r => [r.dataset.tp, ...['committed', 'end', 'lag'].map(
              f => r.querySelector(`[data-field=${f}]`).textContent)])""",
    )
    shown = {tp: (c, e, lg) for tp, c, e, lg in rows}
    assert shown == {f"{TOPIC}-{p}": (str(o), str(PER_PARTITION), str(PER_PARTITION - o)) for p, o in committed.items()}
    assert page.page.inner_text('[data-card="total-lag"] .v') == str(sum(PER_PARTITION - o for o in committed.values()))
    assert page.errors == []


def _committed(bootstrap: str, group: str) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(15)
    return {tp.partition: tp.offset for tp in res.topic_partitions if tp.offset >= 0}


def test_group_offsets_reset_from_the_group_page(cluster: LocalCluster, console: str, page: Page) -> None:
    p = page.page
    p.goto(f"{console}/groups/{GROUP}")
    p.wait_for_selector("#group-partitions tbody tr")
    p.fill("#reset input[name=partition]", "0")
    p.fill("#reset input[name=to]", "earliest")
    p.wait_for_timeout(1500)  # a few live refreshes: what was typed must survive them
    assert p.input_value("#reset input[name=topic]") == TOPIC
    assert p.input_value("#reset input[name=partition]") == "0"
    p.click("#reset button[type=submit]")
    p.wait_for_function("() => document.querySelector('#reset-result').textContent.startsWith('Reset ')")
    assert p.inner_text("#reset-result") == f"Reset {TOPIC}-0 to 0"
    assert _committed(cluster.bootstrap, GROUP) == {**COMMITTED, 0: 0}
    # The live group view follows: partition 0 now lags by all it holds.
    p.wait_for_function(
        f"""() => {{ const c = document.querySelector('tr[data-tp="{TOPIC}-0"] [data-field=lag]');
                    return c && c.textContent === '{PER_PARTITION}'; }}"""
    )
    # Back to the fixture's offset, by number this time, so the other tests see what they expect.
    p.fill("#reset input[name=to]", str(COMMITTED[0]))
    p.click("#reset button[type=submit]")
    p.wait_for_function(f"() => document.querySelector('#reset-result').textContent.endsWith('to {COMMITTED[0]}')")
    assert _committed(cluster.bootstrap, GROUP) == COMMITTED
    assert page.errors == []


def test_consumer_protocol_group_shows_its_type_epochs_and_members(
    cluster: LocalCluster, console: str, page: Page
) -> None:
    group = "console-kip848"
    conf = {"bootstrap.servers": cluster.bootstrap, "group.id": group, "group.protocol": "consumer",
            "client.id": "kip848-reader", "enable.auto.commit": False}  # fmt: skip
    c = Consumer(conf)
    try:
        c.subscribe([TOPIC])
        wait_until(lambda: (c.poll(0.2), len(c.assignment()) == PARTITIONS)[1], 30, "the member's assignment")
        types = {g["group_id"]: g["type"] for g in _get(f"{console}/api/groups")["groups"]}
        assert (types[group], types[GROUP]) == ("consumer", "classic")
        p = page.page
        p.goto(f"{console}/groups")
        assert p.inner_text(f'#groups tr[data-group="{group}"] [data-field=type]') == "consumer"
        p.goto(f"{console}/groups/{group}")
        p.wait_for_selector("#members tbody tr [data-field=member-epoch]")
        assert p.inner_text('[data-card="type"] .v') == "consumer"
        assert p.inner_text('[data-card="assignor"] .v') == "uniform"
        # From ConsumerGroupDescribe: the member's epoch and its target, which the group epoch has reached.
        epoch = int(p.inner_text("#members tbody tr [data-field=member-epoch]"))
        assert epoch >= 1 and int(p.inner_text('[data-card="group-epoch"] .v')) >= 1
        assert p.inner_text("#members tbody tr [data-field=target]") == ", ".join(
            f"{TOPIC}-{n}" for n in range(PARTITIONS)
        )
        assert page.errors == []
    finally:
        c.close()


def test_share_group_is_listed_and_shows_members_epochs_and_start_offsets(
    cluster: LocalCluster, console: str, page: Page
) -> None:
    """A KIP-932 share group in the console: listed with type share beside the consumer groups, and its page
    from ShareGroupDescribe and DescribeShareGroupOffsets (what librdkafka's AdminClient cannot ask): the
    member with its epoch, the partitions it is assigned, each share-partition's start offset."""
    from confluent_kafka import ShareConsumer

    from epochlog.client.configs import alter as alter_configs
    from epochlog.config_defs import RESOURCE_GROUP

    group = "console-share"
    alter_configs(cluster.bootstrap, RESOURCE_GROUP, group, {"share.auto.offset.reset": "earliest"}, [])
    c = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "client.id": "share-reader",
                       "share.acknowledgement.mode": "implicit"})  # fmt: skip
    try:
        c.subscribe([TOPIC])
        got = [0]

        def read_some() -> bool:
            got[0] += len([m for m in (c.poll(0.2) or []) if m.error() is None])
            return got[0] > 0

        wait_until(read_some, 30, "share records")
        c.poll(0.2)  # acknowledges what the last poll handed out (implicit mode)

        def listed_started() -> bool:
            d = _get(f"{console}/api/groups/{group}")
            return d.get("type") == "share" and any(p["committed_offset"] for p in d["partitions"])

        wait_until(listed_started, 30, "a share-partition with a start offset past 0")
        types = {g["group_id"]: g["type"] for g in _get(f"{console}/api/groups")["groups"]}
        assert types[group] == "share" and types[GROUP] == "classic"
        p = page.page
        p.goto(f"{console}/groups")
        assert p.inner_text(f'#groups tr[data-group="{group}"] [data-field=type]') == "share"
        p.goto(f"{console}/groups/{group}")
        p.wait_for_selector("#members tbody tr [data-field=member-epoch]")
        assert p.inner_text('[data-card="type"] .v') == "share"
        assert int(p.inner_text("#members tbody tr [data-field=member-epoch]")) >= 1
        assert "start offset" in p.inner_text("#group-partitions thead")
        assert int(p.inner_text('[data-card="group-epoch"] .v')) >= 1
        assert page.errors == []
    finally:
        c.close()


def test_api_refuses_a_reset_while_the_group_has_members(cluster: LocalCluster, console: str) -> None:
    url = f"{console}/api/groups/console-active/offsets"
    body = json.dumps({"topic": TOPIC, "to": "earliest"}).encode()
    # Not JSON: refused before anything is asked (a cross-origin form post cannot send JSON without a preflight).
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(urllib.request.Request(url, data=body, method="POST"), timeout=30)
    assert e.value.code == 415
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "console-active", "enable.auto.commit": False})
    try:
        c.subscribe([TOPIC])
        wait_until(lambda: c.poll(0.2) is not None or c.assignment(), 30, "a group member with an assignment")
        req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=30)
        assert e.value.code == 409
        assert "has 1 members" in json.loads(e.value.read())["error"]
    finally:
        c.close()


def test_message_browser_returns_what_was_produced(console: str, page: Page) -> None:
    page.page.goto(f"{console}/messages")
    page.page.fill("input[name=topic]", TOPIC)
    page.page.fill("input[name=partition]", "2")
    page.page.fill("input[name=offset]", "0")
    page.page.click("#browse button[type=submit]")
    page.page.wait_for_selector("#messages tbody tr")
    rows = page.page.eval_on_selector_all(
        "#messages tbody tr",
        """rows => rows.map(r => [r.dataset.offset, r.querySelector('[data-field=key]').textContent,
                                  r.querySelector('[data-field=value]').textContent])""",
    )
    expected = [(str(i), k.decode(), v.decode()) for i, (k, v) in enumerate(_produced()[2])]
    # The last record's value is not UTF-8: shown as hex even in the text view, never mangled.
    assert [tuple(r) for r in rows] == [*expected, (str(PER_PARTITION), "bin", "00 ff 10")]
    # The hex view shows the same bytes as hex.
    page.page.select_option("select[name=format]", "hex")
    page.page.fill("input[name=offset]", "1")
    page.page.fill("input[name=limit]", "1")
    page.page.click("#browse button[type=submit]")
    page.page.wait_for_function(
        "() => { const r = document.querySelector('#messages tbody tr'); return r && r.dataset.offset === '1'; }"
    )
    assert page.page.inner_text('#messages tbody tr [data-field="value"]') == b"value-2-1".hex(" ")
    # From a time picked in the form: one before anything was produced starts at the first record.
    page.page.select_option("select[name=format]", "text")
    page.page.fill("input[name=offset]", "5")
    page.page.fill("input[name=from_time]", "2001-02-03T04:05:06")
    page.page.click("#browse button[type=submit]")
    page.page.wait_for_function(
        "() => (document.querySelector('#count') || {}).textContent === '1 messages from offset 0'"
    )
    assert "timestamp=" in page.page.url and "offset=" not in page.page.url
    assert page.errors == []


def test_topic_page_shows_throughput_while_records_arrive(cluster: LocalCluster, console: str, page: Page) -> None:
    create_topic(cluster.bootstrap, "rates", 1, 3, {})
    wait_until(lambda: leader_epoch(cluster.bootstrap, "rates")[0] >= 0, 20, "a leader for rates")
    p = page.page
    p.goto(f"{console}/topics/rates")
    p.wait_for_selector("#partitions tbody tr")
    rate = "() => Number(document.querySelector('[data-card=rate] .v').textContent)"
    p.wait_for_function(f"() => ({rate})() === 0")  # two events seen, nothing produced yet
    stop = threading.Event()

    def produce() -> None:
        prod = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5})
        deadline = time.monotonic() + 30  # bounded even if the test fails before setting stop
        while not stop.is_set() and time.monotonic() < deadline:
            for _ in range(20):
                prod.produce("rates", value=b"r")
            prod.poll(0)
            time.sleep(0.05)
        prod.flush(15)

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    try:
        p.wait_for_function(f"() => ({rate})() > 50", timeout=10_000)
        shown = float(p.inner_text('tr[data-partition="0"] [data-field=rate]'))
        assert shown > 50
    finally:
        stop.set()
        t.join(30)
    # Once nothing arrives the rate falls back to zero.
    p.wait_for_function(f"() => ({rate})() === 0", timeout=10_000)
    assert p.query_selector("[data-card=rate] svg polyline") is not None
    assert page.errors == []


def test_quotas_page_shows_a_throttled_clients_quota_and_throttle_time(
    cluster: LocalCluster, console: str, metrics_ports: dict[int, int], page: Page
) -> None:
    # Without the metrics endpoints (the console process): the configured quota only, saying why.
    d = _get(f"{console}/api/quotas")
    got = next(r for r in d["entities"] if r["name"] == f"client-id={THROTTLED}")
    assert (d["metrics"], got["configured"], got["total"]) == (False, {"producer_byte_rate": QUOTA}, None)
    create_topic(cluster.bootstrap, "throttled", 1, 1, {})
    wait_until(lambda: leader_epoch(cluster.bootstrap, "throttled")[0] >= 0, 20, "a leader for throttled")
    endpoints = MetricsEndpoints(port_map={n: ("127.0.0.1", p) for n, p in metrics_ports.items()})
    reader = ClusterReader(cluster.bootstrap, endpoints=endpoints)
    stop = threading.Event()

    def produce() -> None:
        # Well over the quota: its first answers carry a throttle time, after which the client holds back.
        prod = Producer({"bootstrap.servers": cluster.bootstrap, "client.id": THROTTLED, "linger.ms": 5})
        deadline = time.monotonic() + 30  # bounded even if the test fails before setting stop
        while not stop.is_set() and time.monotonic() < deadline:
            prod.produce("throttled", value=b"q" * QUOTA)
            prod.poll(0.05)
        prod.purge()
        prod.flush(1)

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    try:
        with served(create_app(reader, refresh=0.3)) as url:
            p = page.page
            try:
                p.goto(f"{url}/quotas")
                row = f'#quotas tr[data-entity="client-id={THROTTLED}"]'
                cell = f"{row} [data-field=throttle]"
                shown = "s => Number((document.querySelector(s) || {dataset: {}}).dataset.value) > 0"
                p.wait_for_function(shown, arg=cell)
                assert p.inner_text(f"{row} [data-field=producer_byte_rate]") == str(QUOTA)
                assert p.inner_text(cell).startswith("produce ") and float(p.get_attribute(cell, "data-value") or 0) > 0
                # The broker leading the topic measured the client's bytes.
                leader = leader_epoch(cluster.bootstrap, "throttled")[0]
                assert f"(broker {leader})" in p.inner_text(f"{row} [data-field=produce_byte_rate]")
            finally:
                p.goto("about:blank")  # closes the event stream, which the server waits for before it stops
    finally:
        stop.set()
        t.join(30)
        reader.close()
    assert page.errors == []


def _wait_for_new_leader(page: Any, leader0: int, epoch0: int) -> None:
    page.wait_for_function(
        """([old, epoch]) => {
            const r = document.querySelector('#partitions tr[data-partition="0"]');
            if (!r) return false;
            const leader = r.querySelector('[data-field=leader]').textContent;
            const e = Number(r.querySelector('[data-field=leader-epoch]').textContent);
            return leader !== 'none' && Number(leader) !== old && e > epoch;
        }""",
        arg=[leader0, epoch0],
        timeout=UPDATE_WITHIN * 1000,
    )


def test_topic_page_follows_a_leader_kill9_within_5s(cluster: LocalCluster, console: str, page: Page) -> None:
    """Runs after the tests that need all three brokers: it takes one down for good."""
    page.page.goto(f"{console}/topics/{TOPIC}")
    page.page.wait_for_selector("#partitions tbody tr")
    leader0, epoch0 = _partition_rows(page.page)[0]
    assert (leader0, epoch0) == leader_epoch(cluster.bootstrap, TOPIC, 0)

    killed_at = time.monotonic()
    cluster.kill9(f"broker-{leader0}")
    # The page has no reload: only the server-sent events can change what it shows.
    try:
        _wait_for_new_leader(page.page, leader0, epoch0)
    except Exception as e:
        shown = _partition_rows(page.page)[0]
        now = leader_epoch(cluster.bootstrap, TOPIC, 0)
        raise AssertionError(
            f"page shows {shown}, metadata {now}, {time.monotonic() - killed_at:.1f}s after kill"
        ) from e
    took = time.monotonic() - killed_at
    leader1, epoch1 = _partition_rows(page.page)[0]
    assert leader1 != leader0 and epoch1 > epoch0, (leader1, epoch1)
    # What the page shows is what the cluster says.
    assert wait_until(lambda: leader_epoch(cluster.bootstrap, TOPIC, 0) == (leader1, epoch1), 5, "metadata")
    print(f"page showed leader {leader1} epoch {epoch1} {took:.2f}s after the kill -9 of broker {leader0}")
    assert page.errors == []


def _lineage_shown(page: Any) -> dict[int, dict[int, int]]:
    """{broker: {epoch: start offset}} as the partition page's lineage table shows it."""
    cells = page.eval_on_selector_all(
        "#lineage tbody tr td.epoch",
        "cells => cells.map(c => [c.dataset.replica, c.closest('tr').dataset.epoch, c.textContent])",
    )
    out: dict[int, dict[int, int]] = {}
    for b, e, s in cells:
        out.setdefault(int(b), {})[int(e)] = int(s)
    return out


def test_partition_page_after_the_kill_shows_each_replicas_lineage(
    cluster: LocalCluster, console: str, page: Page
) -> None:
    """After the failover above: the new leader's lineage (walked over OffsetsForLeaderEpoch) and the live
    follower's (its checkpoint file) both start the new epoch at the old high watermark; the dead broker's
    column says why it is empty."""
    leader, epoch = leader_epoch(cluster.bootstrap, TOPIC, 0)
    dead = [b for b in cluster.broker_ids() if not cluster.broker(b).alive]
    assert len(dead) == 1 and epoch >= 1
    # A follower records an epoch in its checkpoint only with the first batch it copies from that epoch.
    prod = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    prod.produce(TOPIC, value=b"after the failover", partition=0)
    assert prod.flush(30) == 0
    page.page.goto(f"{console}/topics/{TOPIC}/0")
    page.page.wait_for_selector("#lineage tbody tr")
    expected = {0: 0, epoch: PER_PARTITION}
    live = [b for b in (1, 2, 3) if b not in dead]
    shown = wait_until(
        lambda: (s := _lineage_shown(page.page)) and set(s) == set(live) and s, 10, "lineage of live replicas"
    )
    assert shown == {b: expected for b in live}, shown
    note = {b: page.page.inner_text(f'#lineage-notes li[data-replica="{b}"]') for b in (1, 2, 3)}
    assert note[leader].endswith("the leader's lineage, from OffsetsForLeaderEpoch"), note
    assert note[dead[0]].startswith(f"broker {dead[0]}: broker not in the metadata"), note
    assert all(" on disk)" in note[b] for b in live), note  # sizes from DescribeLogDirs
    assert page.page.query_selector("td.diverged") is None
    assert page.errors == []
