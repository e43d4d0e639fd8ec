"""Retake docs/console.md's screenshots: a 3-broker LocalCluster with metrics endpoints, a topic whose
partition 0 lost its leader to a kill -9, a consumer group, the real `epochlog console`, and headless
Debian chromium (Playwright's Python API, executable /usr/bin/chromium); plus a simulator report served
by `epochlog sim --open`.

    PYTHONPATH=src .venv/bin/python scripts/console_screenshots.py [--out docs/console]
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from epochlog.client.epochs import LeaderEpochClient
from epochlog.server.cluster.local import LocalCluster, free_base_port, wait_for_port

TOPIC, GROUP = "orders", "billing"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def leader_of(bootstrap: str, partition: int) -> tuple[int, int]:
    with LeaderEpochClient(bootstrap) as c:
        pl = c.metadata([TOPIC])[(TOPIC, partition)]
    return pl.leader_id, pl.leader_epoch


def wait(cond, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("docs/console"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="console-shots-"))
    lc = LocalCluster(
        tmp / "cluster", 3, free_base_port(3),
        broker_settings={"group.initial.rebalance.delay.ms": "0", "broker.heartbeat.interval.ms": "300"},
        controller_settings={"broker.session.timeout.ms": "2000"},
    )  # fmt: skip
    mports = {n: free_port() for n in lc.broker_ids()}
    for n, p in mports.items():
        with open(lc.broker(n).config, "a") as f:
            f.write(f"metrics.port={p}\n")
    lc.start()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        bs = lc.bootstrap
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic(TOPIC, 3, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(15)
        wait(lambda: all(leader_of(bs, p)[0] >= 0 for p in range(3)), 20, "leaders")
        prod = Producer({"bootstrap.servers": bs, "acks": "all"})
        for p in range(3):
            for i in range(100):
                value = f'{{"order": {i}, "amount": {i * 7 % 50}}}'
                prod.produce(TOPIC, key=f"order-{p}-{i}", value=value, partition=p)
        assert prod.flush(30) == 0
        c = Consumer({"bootstrap.servers": bs, "group.id": GROUP, "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition(TOPIC, 0, 60), TopicPartition(TOPIC, 1, 90)], asynchronous=False)
        c.close()
        leader, epoch = leader_of(bs, 0)
        lc.kill9(f"broker-{leader}")
        wait(lambda: leader_of(bs, 0)[1] > epoch, 20, "a new leader")
        for i in range(5):
            prod.produce(TOPIC, value=f'{{"after": {i}}}', partition=0)
        assert prod.flush(30) == 0

        port = free_port()
        spec = ",".join(f"{n}={p}" for n, p in mports.items())
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "epochlog.cli.main", "console", "--bootstrap-server", bs,
             "--bootstrap-controller", lc.bootstrap_controllers, "--metrics-port-map", spec, "--port", str(port)]
        ))  # fmt: skip
        wait_for_port(port, 30, procs[-1])
        sim_port = free_port()
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "epochlog.cli.main", "sim", "--scenario", "kip101-scenario2", "-q",
             "--report-dir", str(tmp / "reports"), "--open", "--port", str(sim_port)],
            stdout=subprocess.DEVNULL,
        ))  # fmt: skip
        wait_for_port(sim_port, 30, procs[-1])
        base = f"http://127.0.0.1:{port}"

        stop = threading.Event()

        def traffic() -> None:
            p2 = Producer({"bootstrap.servers": bs, "linger.ms": 5})
            while not stop.is_set():
                for k in range(20):
                    p2.produce(TOPIC, value=b"x" * 200, partition=1 + k % 2)
                p2.poll(0)
                time.sleep(0.05)
            p2.flush(10)

        t = threading.Thread(target=traffic, daemon=True)
        t.start()
        from playwright.sync_api import sync_playwright

        shots = [
            ("overview", "/", "#broker-throughput svg polyline", 4000),
            ("topics", "/topics", "#topics tbody tr", 0),
            ("topic", f"/topics/{TOPIC}", "#configs", 3000),
            ("partition", f"/topics/{TOPIC}/0", "#lineage tbody tr", 1000),
            ("group", f"/groups/{GROUP}", "#group-partitions tbody tr", 1000),
            ("messages", f"/messages?topic={TOPIC}&partition=0&offset=95&format=json", "#messages tbody tr", 0),
        ]
        with sync_playwright() as pw:
            b = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox"])
            page = b.new_page(viewport={"width": 1280, "height": 800})
            for name, path, ready, settle in shots:
                page.goto(base + path)
                page.wait_for_selector(ready, timeout=20_000)
                page.wait_for_timeout(settle)
                page.screenshot(path=str(args.out / f"{name}.png"), full_page=True)
                print("wrote", args.out / f"{name}.png")
            page.goto(f"http://127.0.0.1:{sim_port}/sim/kip101-scenario2-leader-epoch.html#step-3")
            page.wait_for_selector("section.step:not([hidden]) svg.logs")
            page.screenshot(path=str(args.out / "sim-report.png"), full_page=True)
            print("wrote", args.out / "sim-report.png")
            b.close()
        stop.set()
        t.join(15)
    finally:
        for p in procs:
            p.terminate()
            p.wait(10)
        lc.stop()


if __name__ == "__main__":
    main()
