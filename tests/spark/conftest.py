"""Fixtures for the Spark source and sink: a real `epochlog up` broker and one shared local SparkSession."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker_process import BrokerProcess

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[spark]')")
pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install -e '.[spark]')")


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


Broker = BrokerProcess  # one `epochlog up` process on a free port, stopped by its pid


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


def code_under_test_path() -> str:
    """The directory this process imports `epochlog` from (a worktree's src/ or the editable install's)."""
    import epochlog

    return str(Path(epochlog.__file__).resolve().parents[1])


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from epochlog.spark.pipeline import local_session

    # Spark's Python workers inherit PYTHONPATH from the JVM, and their working directory need not be ours:
    # put the code this process imports first, as an absolute path, so the workers run the same code (the
    # venv's editable install may point at another checkout).
    rest = [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([code_under_test_path(), *rest]))
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
    """Every record of a topic (up to its current end), as confluent-kafka messages. The end may be a
    transaction's control record, which is never delivered: end of partition counts as reaching it."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
            "enable.partition.eof": True,
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
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        pos[m.partition()] = max(pos[m.partition()], m.offset())
                    continue
                out.append(m)
                pos[m.partition()] = m.offset() + 1
        return out
    finally:
        c.close()


def stream(spark: Any, bootstrap: str, topic: str, **options: str) -> Any:
    """A streaming DataFrame over format epochlog, from the earliest offsets unless told otherwise."""
    r = spark.readStream.format("epochlog").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    for k, v in {"startingOffsets": "earliest", **options}.items():
        r = r.option(k, v)
    return r.load()
