"""The console stays responsive with 1,000 partitions: one `epochlog up` node with 10 topics of 100
partitions (replication factor 1), the real `epochlog console` command, and Debian's chromium.

Bound (issue 18, "stays responsive with 1,000 partitions"): each page shows its content within
PAGE_READY_S of navigation, its live refreshes keep arriving (at least LIVE_EVENTS in LIVE_WINDOW_S, each
bringing all of the cluster's partitions), and a click on a link answers within CLICK_S. The overview's
live throughput has no metrics endpoint here, so each of its refreshes asks ListOffsets for all 1,000
partitions: the heaviest refresh the console makes.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from epochlog.server.cluster.local import wait_for_port
from tests.broker_process import BrokerProcess
from tests.integration.browser import chromium, recording_page
from tests.integration.cluster_helpers import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TOPICS = [f"scale-{i}" for i in range(10)]
PARTITIONS = 100
PAGE_READY_S = 5.0
CLICK_S = 2.0
LIVE_WINDOW_S = 4.0
LIVE_EVENTS = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("scale")
    broker = BrokerProcess(tmp / "data").start()
    proc = None
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        futs = admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in TOPICS], request_timeout=60)
        for f in futs.values():
            f.result(60)
        wait_until(
            lambda: sum(len(t.partitions) for n, t in admin.list_topics(timeout=10).topics.items() if n in TOPICS)
            == len(TOPICS) * PARTITIONS,
            30,
            "1,000 partitions in the metadata",
        )
        prod = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
        for p in range(PARTITIONS):
            prod.produce(TOPICS[0], value=b"x", partition=p)
        assert prod.flush(30) == 0
        port = _free_port()
        log: Path = tmp / "console.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "epochlog.cli.main", "console", "--bootstrap-server", broker.bootstrap,
                 "--port", str(port)],
                stdout=out, stderr=subprocess.STDOUT, env={**os.environ},
            )  # fmt: skip
        wait_for_port(port, 30, proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
        broker.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as b:
        yield b


# Counts the live events a page receives, before its own script runs.
COUNT_EVENTS = """
window.__events = 0;
const Real = window.EventSource;
window.EventSource = function (url) {
  const es = new Real(url);
  es.addEventListener("message", () => { window.__events += 1; });
  return es;
};
"""


def _timed_load(browser: Any, url: str, ready: str) -> tuple[Any, list[str], float]:
    page, errors = recording_page(browser)
    page.add_init_script(COUNT_EVENTS)
    t0 = time.monotonic()
    page.goto(url)
    page.wait_for_selector(ready, timeout=PAGE_READY_S * 1000)
    return page, errors, time.monotonic() - t0


def _live_events(page: Any) -> int:
    before = int(page.evaluate("window.__events"))
    page.wait_for_timeout(LIVE_WINDOW_S * 1000)
    return int(page.evaluate("window.__events")) - before


def test_overview_with_1000_partitions(console: str, browser: Any) -> None:
    page, errors, took = _timed_load(browser, console + "/", '[data-card="partitions"] .v')
    try:
        assert page.inner_text('[data-card="partitions"] .v') == str(len(TOPICS) * PARTITIONS)
        page.wait_for_selector("#topic-throughput tbody tr", timeout=PAGE_READY_S * 1000)
        assert len(page.query_selector_all("#topic-throughput tbody tr")) == len(TOPICS)
        n = _live_events(page)
        assert n >= LIVE_EVENTS, f"{n} overview refreshes in {LIVE_WINDOW_S} s"
        t0 = time.monotonic()
        page.click('header a[data-nav="topics"]')
        page.wait_for_selector(f'#topics tr[data-topic="{TOPICS[-1]}"]', timeout=CLICK_S * 1000)
        clicked = time.monotonic() - t0
        print(f"overview ready in {took:.2f} s, {n} refreshes in {LIVE_WINDOW_S} s, topics in {clicked:.2f} s")
        assert errors == []
    finally:
        page.close()


def test_topic_and_partition_pages_with_1000_partitions(console: str, browser: Any) -> None:
    page, errors, took = _timed_load(
        browser, f"{console}/topics/{TOPICS[0]}", f'#partitions tr[data-partition="{PARTITIONS - 1}"]'
    )
    try:
        assert len(page.query_selector_all("#partitions tbody tr")) == PARTITIONS
        n = _live_events(page)
        assert n >= LIVE_EVENTS, f"{n} topic refreshes in {LIVE_WINDOW_S} s"
        t0 = time.monotonic()
        page.click(f'#partitions tr[data-partition="{PARTITIONS - 1}"] a')
        page.wait_for_selector("#lineage tbody tr", timeout=CLICK_S * 1000)
        clicked = time.monotonic() - t0
        assert page.inner_text('[data-card="high-watermark"] .v') == "1"
        print(f"topic page ready in {took:.2f} s, {n} refreshes, partition page after a click {clicked:.2f} s")
        assert errors == []
    finally:
        page.close()
    page, errors, took = _timed_load(browser, f"{console}/topics", f'#topics tr[data-topic="{TOPICS[-1]}"]')
    try:
        print(f"topics page ready in {took:.2f} s")
        assert errors == []
    finally:
        page.close()
