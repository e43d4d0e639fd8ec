"""Batch reads through format("epochlog") against a real `epochlog up` broker."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.spark.conftest import code_under_test_path, make_topic, produce

pytestmark = pytest.mark.timeout(120)


def _read(spark: Any, bootstrap: str, **options: str) -> Any:
    r = spark.read.format("epochlog").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_schema_and_values(spark: Any, bootstrap: str) -> None:
    topic = make_topic(bootstrap)
    produce(bootstrap, topic, [b"v0", b"v1"], keys=[b"k0", None], headers=[[("h", b"1")], []])
    df = _read(spark, bootstrap, subscribe=topic, includeHeaders="true")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    rows = sorted(df.collect(), key=lambda r: r.offset)
    assert [(bytes(r.key) if r.key else None, bytes(r.value), r.offset) for r in rows] == [
        (b"k0", b"v0", 0),
        (None, b"v1", 1),
    ]
    assert rows[0].topic == topic and rows[0].partition == 0 and rows[0].timestampType == 0
    assert [(h.key, bytes(h.value)) for h in rows[0].headers] == [("h", b"1")]
    assert abs(rows[0].timestamp.timestamp() - time.time()) < 600
    no_headers = _read(spark, bootstrap, subscribe=topic)
    assert "headers" not in no_headers.columns


def test_offset_ranges(spark: Any, bootstrap: str) -> None:
    topic = make_topic(bootstrap, partitions=2)
    produce(bootstrap, topic, [b"a%d" % i for i in range(10)], partition=0)
    produce(bootstrap, topic, [b"b%d" % i for i in range(6)], partition=1)
    df = _read(
        spark,
        bootstrap,
        assign=f'{{"{topic}":[0,1]}}',
        startingOffsets=f'{{"{topic}":{{"0":3,"1":-2}}}}',
        endingOffsets=f'{{"{topic}":{{"0":7,"1":-1}}}}',
    )
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(3, 7)] + [(1, o) for o in range(6)]
    # subscribePattern sees the same topic; minPartitions splits the big partition into several tasks.
    pat = _read(spark, bootstrap, subscribePattern=topic.replace("-", "."), minPartitions="4")
    assert pat.count() == 16
    assert pat.rdd.getNumPartitions() >= 3


def test_timestamps(spark: Any, bootstrap: str) -> None:
    topic = make_topic(bootstrap)
    base = 1_700_000_000_000
    # One record per batch: epochlog's ListOffsets-by-timestamp currently answers at batch granularity.
    stamps = [base + i * 1000 for i in range(10)]
    produce(bootstrap, topic, [b"x%d" % i for i in range(10)], timestamps=stamps, one_per_batch=True)
    df = _read(spark, bootstrap, subscribe=topic, startingTimestamp=str(base + 2500), endingTimestamp=str(base + 6000))
    assert sorted(r.offset for r in df.collect()) == [3, 4, 5]
    by_tp = _read(
        spark,
        bootstrap,
        subscribe=topic,
        startingOffsetsByTimestamp=f'{{"{topic}":{{"0":{base + 8000}}}}}',
    )
    assert sorted(r.offset for r in by_tp.collect()) == [8, 9]
    # Past the last record: an error by default, the latest offset with strategy=latest.
    late = str(base + 10**9)
    with pytest.raises(Exception, match="No offset matched"):
        _read(spark, bootstrap, subscribe=topic, startingTimestamp=late).collect()
    assert (
        _read(
            spark, bootstrap, subscribe=topic, startingTimestamp=late, startingOffsetsByTimestampStrategy="latest"
        ).count()
        == 0
    )


def test_option_errors_surface_in_spark(spark: Any, bootstrap: str) -> None:
    with pytest.raises(Exception, match="One of the following options must be specified"):
        spark.read.format("epochlog").option("kafka.bootstrap.servers", bootstrap).load().collect()
    with pytest.raises(Exception, match="starting offset can't be latest"):
        _read(spark, bootstrap, subscribe="x", startingOffsets="latest").collect()
    with pytest.raises(Exception, match="ending offset not valid in streaming"):
        spark.readStream.format("epochlog").option("kafka.bootstrap.servers", bootstrap).option(
            "subscribe", "x"
        ).option("endingOffsets", "latest").load().writeStream.format("noop").start().awaitTermination(30)


def _produce_with(bootstrap: str, topic: str, conf: dict[str, Any], records: list[tuple[Any, ...]]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    for key, value, ts, headers in records:
        p.produce(topic, value, key=key, partition=0, timestamp=ts, headers=headers)
    assert p.flush(30) == 0


def test_plain_fetch_matches_confluent_and_hands_over(spark: Any, bootstrap: str) -> None:
    """The plain-Fetch path gives exactly what the confluent-kafka path gives, and hands over to it at a
    compressed batch and at records with headers (includeHeaders), from that offset on."""
    topic = make_topic(bootstrap)
    base = 1_700_000_000_000
    plain = [
        (None if i % 3 else b"k%d" % i, b"v" * (i % 150), base + (i * 37) % 5000 - 2500, None) for i in range(3000)
    ]
    _produce_with(bootstrap, topic, {}, plain)
    _produce_with(
        bootstrap, topic, {"compression.type": "gzip"}, [(b"z", b"zipped%d" % i, base, None) for i in range(50)]
    )
    _produce_with(
        bootstrap, topic, {}, [(None, b"after%d" % i, base, [("h", b"%d" % i)] if i % 2 else None) for i in range(50)]
    )

    def rows(**options: str) -> list[tuple[Any, ...]]:
        df = _read(spark, bootstrap, subscribe=topic, **options)
        out = []
        for r in df.collect():
            headers = tuple((h.key, bytes(h.value)) for h in r.headers) if "headers" in df.columns else None
            out.append((r.offset, r.key, r.value, r.timestamp, r.timestampType, headers))
        return sorted(out, key=lambda t: t[0])

    for headers in ("false", "true"):
        fast = rows(includeHeaders=headers)
        slow = rows(includeHeaders=headers, reader="confluent")
        assert len(fast) == 3100
        assert fast == slow
    assert [bytes(r[2]) for r in fast[3000:3002]] == [b"zipped0", b"zipped1"]
    assert fast[3051][5] == (("h", b"1"),)
    # The plain path itself read the first 3000 records and stopped at the compressed batch.
    from epochlog.spark import fetch_reader

    gen = fetch_reader.read_range(
        bootstrap=bootstrap, topic=topic, partition=0, from_offset=0, until_offset=3100, include_headers=False
    )
    n = 0
    with pytest.raises(StopIteration) as stop:
        while True:
            n += next(gen).num_rows
    assert (n, stop.value.value) == (3000, 3000)


def test_workers_import_the_code_under_test(spark: Any) -> None:
    """Spark's Python workers import epochlog from the same place as this process (not the editable
    install's checkout when a worktree's src/ is on PYTHONPATH)."""

    def where(_: Any) -> Any:
        import epochlog

        yield epochlog.__file__

    paths = set(spark.sparkContext.parallelize(range(2), 2).mapPartitions(where).collect())
    assert paths == {str(Path(code_under_test_path()) / "epochlog" / "__init__.py")}, paths
