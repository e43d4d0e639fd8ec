"""KIP-227 incremental fetch sessions against a real broker: on the wire (Fetch v12, as kafka-python and the
Java client send it) a full request opens a session, an incremental one carries only what changed, the
session errors are Kafka's; and kafka-python (2.1+ fetches through sessions) reads a many-partition topic
through one, also when the cache has no slot for it."""

from __future__ import annotations

import datetime
import time

from kafka import KafkaConsumer
from kafka import TopicPartition as KTP

from tests.broker_process import BrokerProcess
from tests.integration.helpers import create_topic, produce, topic_name
from tests.integration.kafka_wire import WireClient, schema_module

PARTS = 8


class Session:
    """A raw client that speaks Fetch v12 with a session, as a consumer does."""

    def __init__(self, port: int, topic: str) -> None:
        self.m = schema_module(1, 12)
        self.wire = WireClient(port)
        self.topic = topic
        self.offsets = dict.fromkeys(range(PARTS), 0)

    def close(self) -> None:
        self.wire.close()

    def fetch(self, session_id: int, epoch: int, names: list[int], forget: list[int] = ()) -> object:  # type: ignore[assignment]
        m = self.m
        parts = tuple(
            m.FetchPartition(partition=p, fetch_offset=self.offsets[p], partition_max_bytes=1 << 20) for p in names
        )
        return self.wire.request(
            1,
            12,
            replica_id=-1,
            max_wait=datetime.timedelta(milliseconds=50),
            min_bytes=1,
            max_bytes=50 << 20,
            isolation_level=0,
            session_id=session_id,
            session_epoch=epoch,
            topics=(m.FetchTopic(topic=self.topic, partitions=parts),) if parts else (),
            forgotten_topics_data=(m.ForgottenTopic(topic=self.topic, partitions=tuple(forget)),) if forget else (),
            rack_id="",
        )


def answered(resp: object) -> dict[int, int]:
    """{partition: bytes of records} of the partitions the answer carries."""
    return {int(p.partition_index): len(p.records or b"") for t in resp.responses for p in t.partitions}  # type: ignore[attr-defined]


def test_incremental_answers_carry_only_what_changed(broker: BrokerProcess) -> None:
    topic = topic_name("kip227")
    create_topic(broker.bootstrap, topic, partitions=PARTS)
    s = Session(broker.port, topic)
    try:
        full = s.fetch(0, 0, list(range(PARTS)))
        sid = int(full.session_id)  # type: ignore[attr-defined]
        assert sid != 0 and int(full.error_code) == 0 and sorted(answered(full)) == list(range(PARTS))  # type: ignore[attr-defined]
        quiet = s.fetch(sid, 1, [])
        assert int(quiet.session_id) == sid and answered(quiet) == {}  # type: ignore[attr-defined]
        produce(broker.bootstrap, topic, [b"x" * 100], partition=3)
        changed = s.fetch(sid, 2, [])
        assert list(answered(changed)) == [3] and answered(changed)[3] > 0
        s.offsets[3] = 1
        # The new offset is sent for partition 3; nothing else changed, so nothing is answered.
        assert answered(s.fetch(sid, 3, [3])) == {}
        # Forgetting every partition closes the session: a sessionless answer.
        closed = s.fetch(sid, 4, [], forget=list(range(PARTS)))
        assert int(closed.session_id) == 0 and int(closed.error_code) == 0  # type: ignore[attr-defined]
        gone = s.fetch(sid, 5, [])
        assert int(gone.error_code) == 70  # FETCH_SESSION_ID_NOT_FOUND  # type: ignore[attr-defined]
    finally:
        s.close()


def test_session_errors_are_kafkas(broker: BrokerProcess) -> None:
    topic = topic_name("kip227err")
    create_topic(broker.bootstrap, topic, partitions=PARTS)
    s = Session(broker.port, topic)
    try:
        sid = int(s.fetch(0, 0, list(range(PARTS))).session_id)  # type: ignore[attr-defined]
        stale = s.fetch(sid, 7, [])
        assert (int(stale.error_code), answered(stale)) == (71, {})  # INVALID_FETCH_SESSION_EPOCH  # type: ignore[attr-defined]
        assert int(s.fetch(sid + 1, 1, []).error_code) == 70  # type: ignore[attr-defined]
        assert int(s.fetch(sid, 1, []).error_code) == 0, "a refused request did not move the session on"  # type: ignore[attr-defined]
        # Epoch -1 closes the session and is answered in full, without one.
        final = s.fetch(sid, -1, list(range(PARTS)))
        assert int(final.session_id) == 0 and len(answered(final)) == PARTS  # type: ignore[attr-defined]
        assert int(s.fetch(sid, 2, []).error_code) == 70  # type: ignore[attr-defined]
    finally:
        s.close()


def _consume_all(bootstrap: str, topic: str, parts: int, expected: int, timeout: float = 60) -> tuple[int, object]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    c.assign([KTP(topic, p) for p in range(parts)])
    seen: list[tuple[int, int]] = []
    deadline = time.monotonic() + timeout
    session_ids = set()
    try:
        while len(seen) < expected and time.monotonic() < deadline:
            for tp, msgs in c.poll(timeout_ms=500).items():
                seen += [(tp.partition, m.offset) for m in msgs]
            session_ids |= {h.next_metadata.session_id for h in c._fetcher._session_handlers.values()}
    finally:
        c.close()
    assert len(seen) == len(set(seen)) == expected, f"{len(seen)} records, {len(set(seen))} distinct, of {expected}"
    return len(seen), session_ids


def test_kafka_python_reads_many_partitions_through_a_session(broker: BrokerProcess) -> None:
    parts = 200
    topic = topic_name("many")
    create_topic(broker.bootstrap, topic, partitions=parts)
    for p in range(0, parts, 7):
        produce(broker.bootstrap, topic, [b"a", b"b"], partition=p)
    expected = 2 * len(range(0, parts, 7))
    _n, sessions = _consume_all(broker.bootstrap, topic, parts, expected)
    assert sessions - {0}, "kafka-python never got a fetch session"


def test_no_slot_left_still_serves_sessionless(broker_factory: object) -> None:
    b = broker_factory({"max.incremental.fetch.session.cache.slots": "0"})  # type: ignore[operator]
    topic = topic_name("noslot")
    create_topic(b.bootstrap, topic, partitions=PARTS)
    for p in range(PARTS):
        produce(b.bootstrap, topic, [b"v"], partition=p)
    _n, sessions = _consume_all(b.bootstrap, topic, PARTS, PARTS)
    assert sessions <= {0}, "a session was opened with no slot for it"


def test_kafka_python_recovers_when_the_broker_forgets_its_session(broker: BrokerProcess) -> None:
    """A restarted broker has no sessions: kafka-python (whose connection broke, or whose next incremental
    fetch is answered FETCH_SESSION_ID_NOT_FOUND) goes back to a full fetch and a new session opens;
    nothing is lost or read twice."""
    topic = topic_name("restart")
    create_topic(broker.bootstrap, topic, partitions=PARTS)
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    seen: list[tuple[int, int]] = []

    def poll_until(count: int, timeout: float = 60) -> set[int]:
        deadline = time.monotonic() + timeout
        ids = set()
        while len(seen) < count and time.monotonic() < deadline:
            for tp, msgs in c.poll(timeout_ms=300).items():
                seen.extend((tp.partition, m.offset) for m in msgs)
            ids |= {h.next_metadata.session_id for h in c._fetcher._session_handlers.values()}
        return ids - {0}

    try:
        c.assign([KTP(topic, p) for p in range(PARTS)])
        for p in range(PARTS):
            produce(broker.bootstrap, topic, [b"before"], partition=p)
        before = poll_until(PARTS)
        assert before, "no session before the restart"
        broker.restart()
        for p in range(PARTS):
            produce(broker.bootstrap, topic, [b"after"], partition=p)
        after = poll_until(2 * PARTS)
        assert after - before, "no new session after the restart"
    finally:
        c.close()
    assert len(seen) == len(set(seen)) == 2 * PARTS
