"""Fixtures for the Spark source and sink: a real `epochlog up` broker and one shared local SparkSession."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[spark]')")
pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install -e '.[spark]')")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _up_available() -> str | None:
    """None when `epochlog up` exists, else why not."""
    try:
        r = subprocess.run(
            [sys.executable, "-m", "epochlog.cli.main", "up", "--help"], capture_output=True, timeout=30, text=True
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"cannot run `epochlog up --help`: {e}"
    if r.returncode != 0 or "--port" not in r.stdout:
        return "`epochlog up` does not exist yet (the single-broker issue has not landed)"
    return None


class Broker:
    """One `epochlog up` process on a free port; stopped by its pid."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.log_path = data_dir.parent / f"{data_dir.name}.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> Broker:
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "epochlog.cli.main",
                "up",
                "--port",
                str(self.port),
                "--data-dir",
                str(self.data_dir),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"epochlog up exited with {self.proc.returncode}: {self.log_path.read_text()[-2000:]}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise TimeoutError(f"epochlog up did not listen on {self.port} within 30 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture(scope="session")
def broker_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    why = _up_available()
    if why:
        pytest.skip(why)
    started: list[Broker] = []

    def make() -> Broker:
        b = Broker(tmp_path_factory.mktemp("broker") / "data").start()
        started.append(b)
        return b

    yield make
    for b in started:
        b.stop()


@pytest.fixture(scope="session")
def broker(broker_factory: Any) -> Broker:
    return broker_factory()


@pytest.fixture(scope="session")
def bootstrap(broker: Broker) -> str:
    return broker.bootstrap


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from epochlog.spark.pipeline import local_session

    s = local_session("epochlog-tests")
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()


def make_topic(bootstrap: str, partitions: int = 1, prefix: str = "t") -> str:
    from epochlog.client.admin import admin_client, create_topic, wait_for_partitions

    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    admin = admin_client({"bootstrap.servers": bootstrap})
    create_topic(admin, name, partitions, 1)
    wait_for_partitions(admin, name, partitions)
    return name


def produce(
    bootstrap: str,
    topic: str,
    values: list[bytes],
    partition: int | None = 0,
    keys: list[bytes | None] | None = None,
    timestamps: list[int] | None = None,
    headers: list[list[tuple[str, bytes]]] | None = None,
    one_per_batch: bool = False,
) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "enable.idempotence": True})
    errors: list[Any] = []
    for i, v in enumerate(values):
        kw: dict[str, Any] = {"on_delivery": lambda err, _m: errors.append(err) if err else None}
        if partition is not None:
            kw["partition"] = partition
        if keys is not None:
            kw["key"] = keys[i]
        if timestamps is not None:
            kw["timestamp"] = timestamps[i]
        if headers is not None:
            kw["headers"] = headers[i]
        p.produce(topic, v, **kw)
        if one_per_batch:
            assert p.flush(30) == 0
    assert p.flush(30) == 0
    assert not errors, errors


def consume_all(bootstrap: str, topic: str, partitions: int = 1, timeout: float = 20.0) -> list[Any]:
    """Every record of a topic (up to its current end), as confluent-kafka messages."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
        }
    )
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions) if ends[p] > 0])
        out: list[Any] = []
        pos = dict.fromkeys(range(partitions), 0)
        deadline = time.monotonic() + timeout
        while any(pos[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                if m.error():
                    continue
                out.append(m)
                pos[m.partition()] = m.offset() + 1
        return out
    finally:
        c.close()
