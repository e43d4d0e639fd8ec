"""The exactly-once sink keeps its Kafka clients between micro-batches without giving up exactly-once.

The tasks run in this process, against a real broker, as a reused Spark Python worker runs them one after
the other: the counters in epochlog.spark.sink_clients.STATS say which clients were created, reused or
replaced, and a read_committed read of the sink topic says every row landed once.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.spark.conftest import make_topic
from tests.spark.test_sink_exactly_once import _read

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def fresh_caches() -> Iterator[Any]:
    from epochlog.spark import sink_clients

    def clear() -> None:
        for cache in (
            sink_clients.TXN_PRODUCERS,
            sink_clients.DRIVER_PRODUCERS,
            sink_clients.MARKER_READERS,
            sink_clients.ADMINS,
        ):
            cache.clear()
        sink_clients.STATS.clear()

    clear()
    yield sink_clients.STATS
    clear()


def _setup(bootstrap: str) -> tuple[Any, str, str]:
    from epochlog.spark import sink
    from epochlog.spark.options import parse_sink_options

    dst = make_topic(bootstrap, prefix="eos-cache")
    opts = parse_sink_options({"kafka.bootstrap.servers": bootstrap, "topic": dst})
    sink._ensure_commit_topic(opts)
    return opts, dst, f"cache-{uuid.uuid4().hex[:8]}"


def _values(batch_id: int, n: int = 10) -> list[bytes]:
    return [b"b%d-%03d" % (batch_id, i) for i in range(n)]


def _batches(values: list[bytes], pieces: int = 2) -> Iterator[Any]:
    """`values` as `pieces` Arrow batches: a cached producer's probe writes the first, the rest come after."""
    import pyarrow as pa

    step = max(1, -(-len(values) // pieces))
    for i in range(0, len(values), step):
        yield pa.RecordBatch.from_pydict({"value": pa.array(values[i : i + step], pa.binary())})


def _fence(bootstrap: str, txn_id: str) -> None:
    """What a task of the same partition in another worker does first: a new producer, init_transactions."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    p.init_transactions(60)


def test_second_micro_batch_reuses_the_producer_and_the_marker_reader(
    bootstrap: str, fresh_caches: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from epochlog.spark import sink

    opts, dst, query = _setup(bootstrap)
    inits = 0
    real_init = sink._Producer.__init__

    def counting_init(self: Any, conf: Any) -> None:
        nonlocal inits
        inits += 1
        real_init(self, conf)

    monkeypatch.setattr(sink._Producer, "__init__", counting_init)
    for b in range(3):
        r = sink.write_task_transactional(opts, _batches(_values(b)), query, b, 0)
        assert r == sink.TaskResult(10, False)
    assert inits == 1, "batches 1 and 2 created a producer of their own"
    assert fresh_caches["txn_producers_created"] == 1
    assert fresh_caches["txn_producers_reused"] == 2
    assert fresh_caches["marker_readers_created"] == 1 and fresh_caches["marker_readers_reused"] == 2
    assert sorted(_read(bootstrap, dst, "read_committed")) == sorted(_values(0) + _values(1) + _values(2))
    assert sink.read_commit_state(opts, query).tasks == {0: 2}


def test_driver_commit_reuses_its_producer_across_writers(bootstrap: str, fresh_caches: Any) -> None:
    """Spark makes a new stream writer for every commit, in the same Python process."""
    from pyspark.sql.types import BinaryType, StructField, StructType

    from epochlog.spark import sink

    opts, dst, query = _setup(bootstrap)
    options = {"kafka.bootstrap.servers": bootstrap, "topic": dst}
    schema = StructType([StructField("value", BinaryType())])
    for b in range(3):
        w = sink.EpochlogStreamWriter(options, schema)
        w.commit([sink.SinkCommit(5, partition=0, query_id=query)], b)
    assert fresh_caches["driver_producers_created"] == 1
    assert fresh_caches["admins_created"] == 1  # the commit topic check of each new writer
    assert sink.read_commit_state(opts, query).last_batch == 2
    assert _read(bootstrap, dst, "read_uncommitted") == []


@pytest.mark.parametrize("rows", [10, 0], ids=["rows", "empty-partition"])
def test_fenced_cached_producer_is_replaced_and_the_batch_lands_once(
    bootstrap: str, fresh_caches: Any, rows: int
) -> None:
    from epochlog.spark import sink

    opts, dst, query = _setup(bootstrap)
    assert sink.write_task_transactional(opts, _batches(_values(0)), query, 0, 0).rows == 10
    _fence(bootstrap, sink.transactional_id(opts, query, 0))
    r = sink.write_task_transactional(opts, _batches(_values(1, rows)), query, 1, 0)
    assert r == sink.TaskResult(rows, False)
    assert fresh_caches["txn_producers_replaced"] == 1
    assert fresh_caches["txn_producers_created"] == 2
    assert sorted(_read(bootstrap, dst, "read_committed")) == sorted(_values(0) + _values(1, rows))
    assert sink.read_commit_state(opts, query).tasks == {0: 1}
    # The replacement is cached in turn.
    assert sink.write_task_transactional(opts, _batches(_values(2)), query, 2, 0).rows == 10
    assert fresh_caches["txn_producers_created"] == 2 and fresh_caches["txn_producers_reused"] == 1


def test_producer_of_a_failed_task_is_not_reused(bootstrap: str, fresh_caches: Any) -> None:
    """A task that fails inside its transaction (its rows written, the marker not) leaves its producer out
    of the cache: the retry initializes a new one, which aborts the open transaction."""
    from epochlog.spark import sink, sink_clients

    opts, dst, query = _setup(bootstrap)
    sink.write_task_transactional(opts, _batches(_values(0)), query, 0, 0)

    def failing() -> Iterator[Any]:
        yield from _batches(_values(1), pieces=2)
        raise RuntimeError("upstream failure after the rows")

    with pytest.raises(RuntimeError, match="upstream failure"):
        sink.write_task_transactional(opts, failing(), query, 1, 0)
    assert len(sink_clients.TXN_PRODUCERS) == 0  # the failed attempt's producer was not handed back
    r = sink.write_task_transactional(opts, _batches(_values(1)), query, 1, 0)
    assert r == sink.TaskResult(10, False)
    assert fresh_caches["txn_producers_created"] == 2
    assert sorted(_read(bootstrap, dst, "read_committed")) == sorted(_values(0) + _values(1))
    # The failed attempt's rows are in the log, aborted: at least its flushed first half.
    assert len(_read(bootstrap, dst, "read_uncommitted")) >= 25


def test_batch_writer_connects_its_producer_before_the_rows(
    bootstrap: str, fresh_caches: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The at-least-once writer's producer fetches the topic's metadata before its first row (else
    librdkafka's producer id request waits for a 0.5 s timer), and the rows land."""
    from pyspark.sql.types import BinaryType, StructField, StructType

    from epochlog.spark import sink, sink_clients

    dst = make_topic(bootstrap, prefix="plain-connect")
    connected: list[str] = []
    real_connect = sink_clients.connect

    def counting(client: Any, topic: str) -> None:
        connected.append(topic)
        real_connect(client, topic)

    monkeypatch.setattr(sink_clients, "connect", counting)
    w = sink.EpochlogBatchWriter(
        {"kafka.bootstrap.servers": bootstrap, "topic": dst}, StructType([StructField("value", BinaryType())])
    )
    assert w.write(_batches(_values(0))).rows == 10
    assert connected == [dst]
    assert sorted(_read(bootstrap, dst, "read_uncommitted")) == sorted(_values(0))
