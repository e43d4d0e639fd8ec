"""Bad batches against a real broker: each refused with Kafka's error, the log end unchanged, the broker
still serving; and real clients' batches (every codec) still accepted."""

from __future__ import annotations

import datetime
import struct

import crc32c
import pytest
from confluent_kafka import Consumer, TopicPartition

from epochlog.protocol.control_records import ControlType, marker_batch
from epochlog.protocol.records import Record, build_batch, write_varint
from tests.broker_process import BrokerProcess
from tests.integration.helpers import consume_assign, create_topic, produce, topic_name
from tests.integration.kafka_wire import WireClient, schema_module

NOW_MS = lambda: int(datetime.datetime.now().timestamp() * 1000)  # noqa: E731


def _recrc(buf: bytearray) -> bytes:
    struct.pack_into(">I", buf, 17, crc32c.crc32c(memoryview(buf)[21:]))
    return bytes(buf)


def _garbage(count: int) -> bytes:
    """A correct CRC around bytes that are not records, declaring ``count`` of them."""
    body = bytes(range(256)) * 4
    now = NOW_MS()
    tail = struct.pack(">hiqqqhii", 0, count - 1, now, now, -1, -1, -1, count)
    return _recrc(bytearray(struct.pack(">qiibI", 0, 61 - 12 + len(body), -1, 2, 0) + tail + body))


def _claims_more(real: bytes) -> bytes:
    buf = bytearray(real)
    struct.pack_into(">i", buf, 23, 4)  # lastOffsetDelta
    struct.pack_into(">i", buf, 57, 5)  # recordCount
    return _recrc(buf)


def _negative_length() -> bytes:
    body = bytearray()
    write_varint(body, -3)
    body += b"\x00" * 16
    now = NOW_MS()
    tail = struct.pack(">hiqqqhii", 0, 0, now, now, -1, -1, -1, 1)
    return _recrc(bytearray(struct.pack(">qiibI", 0, 61 - 12 + len(body), -1, 2, 0) + tail + bytes(body)))


def _produce_raw(port: int, topic: str, batch: bytes) -> object:
    m = schema_module(0, 9)
    wire = WireClient(port)
    try:
        resp = wire.request(
            0,
            9,
            transactional_id=None,
            acks=-1,
            timeout=datetime.timedelta(seconds=10),
            topic_data=(
                m.TopicProduceData(name=topic, partition_data=(m.PartitionProduceData(index=0, records=batch),)),
            ),
        )
    finally:
        wire.close()
    return resp.responses[0].partition_responses[0]


def _log_end(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "le"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        c.close()


CASES = {
    "garbage-with-a-million-offsets": (lambda: _garbage(1_000_001), 87),
    "claims-more-records-than-it-holds": (lambda: _claims_more(build_batch([(None, b"a"), (None, b"b")])), 87),
    "negative-record-length": (_negative_length, 87),
    "timestamp-two-hours-ahead": (lambda: build_batch([Record(0, NOW_MS() + 7_200_000, None, b"x")]), 32),
    "bad-crc": (lambda: build_batch([(None, b"x")])[:-2] + b"\xff\x00", 2),
    # A transactional batch with no transactional id would open a transaction nothing can close, holding
    # read_committed readers (confluent-kafka's default) at its first offset: TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
    "transactional-without-a-transactional-id": (
        lambda: build_batch(
            [(None, b"t")], producer_id=1000, producer_epoch=0, base_sequence=0, is_transactional=True
        ),
        53,
    ),
    "a-transaction-marker-from-a-client": (
        lambda: marker_batch(1000, 0, ControlType.ABORT, 0, NOW_MS()),
        87,
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_batch_is_refused_and_moves_nothing(broker: BrokerProcess, case: str) -> None:
    topic = topic_name("val")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [b"before"])
    end = _log_end(broker.bootstrap, topic)
    make, code = CASES[case]
    row = _produce_raw(broker.port, topic, make())
    assert int(row.error_code) == code, row
    assert row.error_message
    if code in (87, 32) and case not in ("bad-crc", "a-transaction-marker-from-a-client"):
        assert row.record_errors, "record_errors name the records (Produce v8+)"
    assert _log_end(broker.bootstrap, topic) == end, "a refused batch moved the log end"
    produce(broker.bootstrap, topic, [b"after"])
    assert [m.value() for m in consume_assign(broker.bootstrap, topic, 0, 2, timeout=20)] == [b"before", b"after"]


def test_null_key_on_a_compacted_topic(broker: BrokerProcess) -> None:
    topic = topic_name("cmp")
    create_topic(broker.bootstrap, topic, config={"cleanup.policy": "compact"})
    row = _produce_raw(broker.port, topic, build_batch([(b"k", b"a"), (None, b"b")]))
    assert int(row.error_code) == 87 and [int(e.batch_index) for e in row.record_errors] == [1]
    assert _log_end(broker.bootstrap, topic) == 0
    row = _produce_raw(broker.port, topic, build_batch([(b"k", b"a")]))
    assert int(row.error_code) == 0


def test_librdkafka_fails_only_the_keyless_records(broker: BrokerProcess) -> None:
    """KIP-467 through confluent-kafka: one batch of keyed and keyless records to a compacted topic;
    the keyless ones fail INVALID_RECORD, the others _INVALID_DIFFERENT_RECORD, nothing is retried."""
    from confluent_kafka import KafkaError, Producer

    topic = topic_name("kip467")
    create_topic(broker.bootstrap, topic, config={"cleanup.policy": "compact"})
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 500, "enable.idempotence": False})
    keys = [b"a", None, b"c", None, b"e"]
    results: dict[int, int] = {}
    for i, k in enumerate(keys):
        p.produce(topic, b"v%d" % i, k, 0, on_delivery=lambda e, _m, i=i: results.update({i: e.code()}))
    assert p.flush(30) == 0
    assert results == {
        0: KafkaError._INVALID_DIFFERENT_RECORD,
        1: KafkaError.INVALID_RECORD,
        2: KafkaError._INVALID_DIFFERENT_RECORD,
        3: KafkaError.INVALID_RECORD,
        4: KafkaError._INVALID_DIFFERENT_RECORD,
    }
    assert _log_end(broker.bootstrap, topic) == 0


def test_kafka_python_names_the_keyless_records(broker: BrokerProcess) -> None:
    from kafka import KafkaProducer
    from kafka.errors import InvalidRecordError
    from kafka.errors import KafkaError as PyKafkaError

    topic = topic_name("kip467py")
    create_topic(broker.bootstrap, topic, config={"cleanup.policy": "compact"})
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=500, retries=0)
    try:
        futs = [p.send(topic, value=b"v", key=k, partition=0) for k in (b"a", None, b"c", None)]
        p.flush(30)
        errors = [f.exception for f in futs]
    finally:
        p.close(10)
    assert isinstance(errors[1], InvalidRecordError) and isinstance(errors[3], InvalidRecordError)
    assert "without key" in str(errors[1])
    for e in (errors[0], errors[2]):
        assert type(e) is PyKafkaError and "invalid records" in str(e)
