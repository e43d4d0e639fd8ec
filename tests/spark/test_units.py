"""Option validation, planning arithmetic and the KIP-320 decision rule, without Spark or a broker."""

from __future__ import annotations

import itertools

import pytest

from epochlog.client.epochs import EpochEnd, Position, divergence
from epochlog.spark.options import OptionError, parse_sink_options, parse_source_options, time_string_ms
from epochlog.spark.planning import OffsetRange, rate_limit, should_delay, split_ranges
from epochlog.spark.source import offsets_from_json, offsets_to_json

BS = {"kafka.bootstrap.servers": "127.0.0.1:9"}


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        ({"subscribe": "a"}, True, "kafka.bootstrap.servers"),
        (BS, True, "One of the following options must be specified"),
        ({**BS, "subscribe": "a", "assign": '{"a":[0]}'}, True, "Only one of the following options"),
        ({**BS, "assign": "[0]"}, True, "No topicpartitions to assign"),
        ({**BS, "subscribe": " , "}, True, "No topics to subscribe"),
        ({**BS, "subscribePattern": ""}, True, "Pattern to subscribe is empty"),
        ({**BS, "subscribe": "a", "endingOffsets": "latest"}, True, "ending offset not valid in streaming"),
        ({**BS, "subscribe": "a", "startingOffsets": "latest"}, False, "starting offset can't be latest"),
        ({**BS, "subscribe": "a", "endingOffsets": "earliest"}, False, "ending offset can't be earliest"),
        ({**BS, "subscribe": "a", "startingOffsets": '{"a":{"0":-1}}'}, False, "can't be latest for batch"),
        ({**BS, "subscribe": "a", "endingOffsets": '{"a":{"0":-2}}'}, False, "can't be earliest for batch"),
        ({**BS, "subscribe": "a", "kafka.auto.offset.reset": "earliest"}, True, "auto.offset.reset"),
        ({**BS, "subscribe": "a", "minPartitions": "0"}, True, "minPartitions"),
        ({**BS, "subscribe": "a", "maxOffsetsPerTrigger": "x"}, True, "maxOffsetsPerTrigger"),
        ({**BS, "subscribe": "a", "failOnDataLoss": "maybe"}, True, "failOnDataLoss"),
        ({**BS, "subscribe": "a", "startingOffsetsByTimestampStrategy": "x"}, True, "Strategy"),
        ({**BS, "subscribe": "a", "maxTriggerDelay": "5 parsecs"}, True, "maxTriggerDelay"),
        ({**BS, "subscribe": "a", "startingOffsets": "{not json"}, True, "startingOffsets"),
    ],
)
def test_source_option_errors(options: dict[str, str], streaming: bool, message: str) -> None:
    with pytest.raises(OptionError, match=message):
        parse_source_options(options, streaming=streaming)


def test_source_options_defaults_and_priority() -> None:
    o = parse_source_options({**BS, "SUBSCRIBE": "a,b", "kafka.client.id": "x"}, streaming=True)
    assert o.subscribe == ["a", "b"] and o.kafka == {"bootstrap.servers": "127.0.0.1:9", "client.id": "x"}
    assert o.starting.kind == "latest" and o.fail_on_data_loss and o.max_trigger_delay_ms == 15 * 60_000
    b = parse_source_options({**BS, "subscribe": "a"}, streaming=False)
    assert (b.starting.kind, b.ending.kind) == ("earliest", "latest")
    # Timestamp beats per-partition timestamps beats offsets, as in the connector.
    p = parse_source_options(
        {
            **BS,
            "subscribe": "a",
            "startingOffsets": "earliest",
            "startingOffsetsByTimestamp": '{"a":{"0":5}}',
            "startingTimestamp": "7",
        },
        streaming=True,
    )
    assert p.starting.kind == "timestamp" and p.starting.timestamp == 7
    assert time_string_ms("500ms", "k") == 500 and time_string_ms("2h", "k") == 7_200_000


def test_sink_option_errors() -> None:
    with pytest.raises(OptionError, match="bootstrap"):
        parse_sink_options({"topic": "a"})
    with pytest.raises(OptionError, match=r"value\.serializer"):
        parse_sink_options({**BS, "kafka.value.serializer": "x"})


def test_rate_limit_splits_by_backlog() -> None:
    a, b, c = ("t", 0), ("t", 1), ("t", 2)
    out = rate_limit(100, {a: 0, b: 0, c: 50}, {a: 300, b: 100, c: 51})
    # 300:100:1 of 100 -> 74, 24, and the tiny partition still gets its one record.
    assert out == {a: 74, b: 24, c: 51}
    assert rate_limit(1000, {a: 0}, {a: 10}) == {a: 10}
    assert rate_limit(5, {a: 10}, {a: 10}) == {a: 10}


def test_min_offsets_delay() -> None:
    assert should_delay(100, 10, now_ms=1000, last_trigger_ms=900, max_delay_ms=5000)
    assert not should_delay(100, 100, now_ms=1000, last_trigger_ms=900, max_delay_ms=5000)
    assert not should_delay(100, 10, now_ms=7000, last_trigger_ms=1000, max_delay_ms=5000)


def test_split_ranges_min_partitions() -> None:
    big, small = OffsetRange("t", 0, 0, 1000), OffsetRange("t", 1, 0, 10)
    assert split_ranges([big, small], None) == [big, small]
    parts = split_ranges([big, small, OffsetRange("t", 2, 5, 5)], 4)
    assert [p for p in parts if p.partition == 1] == [small]
    big_parts = [p for p in parts if p.partition == 0]
    assert len(big_parts) == 3 and big_parts[0].from_offset == 0 and big_parts[-1].until_offset == 1000
    assert all(x.until_offset == y.from_offset for x, y in itertools.pairwise(big_parts))


def test_offsets_json_roundtrip_and_spark_form() -> None:
    pos = {("a", 0): Position(5, 2), ("a", 1): Position(7, -1)}
    assert offsets_from_json(offsets_to_json(pos)) == pos
    assert offsets_from_json({"a": {"0": 23}}) == {("a", 0): Position(23, -1)}


@pytest.mark.parametrize(
    ("position", "answer", "expected"),
    [
        (Position(20, 0), EpochEnd(0, 0, 25), None),  # epoch 0 still reaches past us
        (Position(20, 0), EpochEnd(0, 0, 10), 10),  # epoch 0 ends at 10 now: records 10..19 are gone
        (Position(20, 3), EpochEnd(0, 1, 15), 15),  # leader never had epoch 3; its epoch 1 ends at 15
        (Position(20, -1), EpochEnd(0, 0, 10), None),  # no epoch saved: cannot validate (librdkafka skips too)
    ],
)
def test_divergence_rule(position: Position, answer: EpochEnd, expected: int | None) -> None:
    t = divergence(position, answer)
    assert (t.divergence_offset if t else None) == expected


def test_divergence_unknown_when_leader_has_no_such_history() -> None:
    t = divergence(Position(20, 0), EpochEnd(0, -1, -1))
    assert t is not None and t.divergence_offset is None


def test_fetch_reader_takes_only_plain_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from epochlog.spark.fetch_reader import READER_ENV, parse_bootstrap, unsupported_reason

    monkeypatch.delenv(READER_ENV, raising=False)
    ok = {"bootstrap.servers": "127.0.0.1:9092"}
    assert unsupported_reason(ok) is None
    assert unsupported_reason({**ok, "security.protocol": "PLAINTEXT", "client.id": "x"}) is None
    assert unsupported_reason(ok, reader="confluent")
    assert unsupported_reason({**ok, "security.protocol": "SASL_SSL"})
    assert unsupported_reason({**ok, "sasl.mechanism": "PLAIN"})
    assert unsupported_reason({**ok, "ssl.ca.location": "/x"})
    assert unsupported_reason({**ok, "isolation.level": "read_committed"})
    assert unsupported_reason({})
    monkeypatch.setenv(READER_ENV, "confluent")
    assert unsupported_reason(ok)
    assert parse_bootstrap("PLAINTEXT://h1:1, [::1]:2") == [("h1", 1), ("::1", 2)]


def test_reader_option() -> None:
    base = {"kafka.bootstrap.servers": "b:1", "subscribe": "t"}
    assert parse_source_options(base, streaming=False).reader == "auto"
    assert parse_source_options({**base, "reader": "Confluent"}, streaming=False).reader == "confluent"
    with pytest.raises(OptionError, match="reader"):
        parse_source_options({**base, "reader": "fast"}, streaming=False)
