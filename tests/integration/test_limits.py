"""Resource limits with Kafka's names, enforced by a real broker: fetch.max.bytes, max.connections(.per.ip),
connections.max.idle.ms, queued.max.request.bytes; and a normal client's latency while a greedy one
asks for everything."""

from __future__ import annotations

import datetime
import multiprocessing
import os
import socket
import struct
import threading
import time
from typing import Any

import cramjam
import pytest
from confluent_kafka import Producer

from epochlog.protocol.records import ZSTD, build_batch, write_varint
from tests.broker_process import BrokerProcess
from tests.integration.helpers import create_topic, produce, topic_name
from tests.integration.kafka_wire import WireClient, schema_module

INTERVAL_S = 0.002  # the normal client's produce rate in the greedy test: 500/s
API_VERSIONS_V0 = struct.pack(">ihhih", 10, 18, 0, 1, 0)


def _alive(sock: socket.socket) -> bool:
    """Send ApiVersions v0 and see whether an answer comes back or the broker closed us."""
    try:
        sock.sendall(API_VERSIONS_V0)
        sock.settimeout(5)
        return len(sock.recv(4)) == 4
    except OSError:
        return False


def _fetch(port: int, topic: str, max_bytes: int) -> int:
    """A consumer Fetch v12 from offset 0 asking for ``max_bytes``; returns the record bytes answered."""
    m = schema_module(1, 12)
    wire = WireClient(port)
    try:
        resp = wire.request(
            1,
            12,
            replica_id=-1,
            max_wait=datetime.timedelta(milliseconds=100),
            min_bytes=1,
            max_bytes=max_bytes,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=(
                m.FetchTopic(
                    topic=topic,
                    partitions=(
                        m.FetchPartition(
                            partition=0,
                            current_leader_epoch=-1,
                            fetch_offset=0,
                            last_fetched_epoch=-1,
                            log_start_offset=-1,
                            partition_max_bytes=max_bytes,
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
            rack_id="",
        )
    finally:
        wire.close()
    return len(resp.responses[0].partitions[0].records or b"")


def test_fetch_max_bytes_caps_a_greedy_fetch(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory({"fetch.max.bytes": str(1 << 20)})
    topic = topic_name("greedy")
    create_topic(b.bootstrap, topic)
    produce(b.bootstrap, topic, [b"x" * 10_000] * 600, conf={"batch.size": 100_000})  # ~6 MB
    got = _fetch(b.port, topic, 2**31 - 1)
    assert 0 < got <= (1 << 20) + 200_000, f"{got} bytes answered past fetch.max.bytes=1 MiB"


def test_max_connections_per_ip(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory({"max.connections.per.ip": "3"})
    socks = [socket.create_connection(("127.0.0.1", b.port)) for _ in range(3)]
    try:
        assert all(_alive(s) for s in socks)
        extra = socket.create_connection(("127.0.0.1", b.port))
        assert not _alive(extra), "a 4th connection from 127.0.0.1 stayed open past max.connections.per.ip=3"
        extra.close()
        socks.pop().close()
        time.sleep(0.3)
        again = socket.create_connection(("127.0.0.1", b.port))
        socks.append(again)
        assert _alive(again), "a slot freed by a closed connection was not reused"
    finally:
        for s in socks:
            s.close()


def test_overrides_and_max_connections(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory({"max.connections.per.ip": "1", "max.connections.per.ip.overrides": "127.0.0.1:2"})
    socks = [socket.create_connection(("127.0.0.1", b.port)) for _ in range(3)]
    try:
        assert [_alive(s) for s in socks] == [True, True, False]
    finally:
        for s in socks:
            s.close()


def test_idle_connections_are_closed(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory({"connections.max.idle.ms": "800"})
    idle = socket.create_connection(("127.0.0.1", b.port))
    busy = socket.create_connection(("127.0.0.1", b.port))
    try:
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            assert _alive(busy)
            time.sleep(0.3)
        idle.settimeout(5)
        assert idle.recv(1) == b"", "an idle connection outlived connections.max.idle.ms"
    finally:
        idle.close()
        busy.close()


def test_queued_max_request_bytes_pauses_instead_of_refusing(broker_factory) -> None:  # type: ignore[no-untyped-def]
    """Twenty 200 KB produces pipelined with a 300 KB pool: the broker stops reading while it holds the
    pool's worth, and still answers every one."""
    b = broker_factory({"queued.max.request.bytes": str(300_000)})
    topic = topic_name("pool")
    create_topic(b.bootstrap, topic)
    m = schema_module(0, 9)
    wire = WireClient(b.port)
    import io

    from kio.index import load_request_schema
    from kio.serial import entity_writer

    cls = load_request_schema(0, 9)
    frames = []
    for i in range(20):
        out = io.BytesIO()
        out.write(struct.pack(">hhih", 0, 9, i + 1, 4) + b"pool" + b"\x00")
        req = cls(
            transactional_id=None,
            acks=1,
            timeout=datetime.timedelta(seconds=10),
            topic_data=(
                m.TopicProduceData(
                    name=topic,
                    partition_data=(m.PartitionProduceData(index=0, records=build_batch([(None, b"p" * 200_000)])),),
                ),
            ),
        )
        entity_writer(cls)(out, req)
        body = out.getvalue()
        frames.append(struct.pack(">i", len(body)) + body)
    from kio.index import load_response_schema
    from kio.serial import entity_reader

    read_response = entity_reader(load_response_schema(0, 9))
    answers: list[tuple[int, int, int]] = []  # (correlation id, error code, base offset)
    try:
        sender = threading.Thread(target=lambda: wire.sock.sendall(b"".join(frames)), daemon=True)
        sender.start()
        wire.sock.settimeout(20)
        for _ in range(20):
            size = struct.unpack(">i", wire._recv(4))[0]
            frame = wire._recv(size)
            resp, _ = read_response(frame[5:], 0)  # after the correlation id and the flexible header's tags
            part = resp.responses[0].partition_responses[0]
            answers.append((struct.unpack_from(">i", frame)[0], int(part.error_code), int(part.base_offset)))
        sender.join(10)
        assert not sender.is_alive(), "the broker never read the whole pipeline"
    finally:
        wire.close()
    # Every produce was answered in order and accepted (none refused for the pool), one record each.
    assert answers == [(i + 1, 0, i) for i in range(20)]


def _bomb() -> bytes:
    """A zstd batch of one record whose value expands to 256 MiB: refused, never expanded whole."""
    inner = bytearray(b"\x00")
    for v in (0, 0, -1, 256 << 20):
        write_varint(inner, v)
    record = bytearray()
    write_varint(record, len(inner) + (256 << 20) + 1)
    payload = bytes(cramjam.zstd.compress(bytes(record) + bytes(inner) + bytes(256 << 20) + b"\x00"))
    now = int(time.time() * 1000)
    tail = struct.pack(">hiqqqhii", ZSTD, 0, now, now, -1, -1, -1, 1)
    buf = bytearray(struct.pack(">qiibI", 0, 61 - 12 + len(payload), -1, 2, 0) + tail + payload)
    import crc32c

    struct.pack_into(">I", buf, 17, crc32c.crc32c(memoryview(buf)[21:]))
    return bytes(buf)


def _greedy(port: int, big: str, small: str, stop: Any, count: Any) -> None:
    """One greedy client: 2 GiB fetches and 256 MiB compression bombs, in turn, until ``stop``."""
    m = schema_module(0, 9)
    bomb = _bomb()
    while not stop.is_set():
        _fetch(port, big, 2**31 - 1)
        wire = WireClient(port)
        try:
            wire.request(
                0,
                9,
                transactional_id=None,
                acks=1,
                timeout=datetime.timedelta(seconds=10),
                topic_data=(
                    m.TopicProduceData(name=small, partition_data=(m.PartitionProduceData(index=0, records=bomb),)),
                ),
            )
        finally:
            wire.close()
        with count.get_lock():
            count.value += 2


@pytest.mark.timeout(240)
@pytest.mark.skipif(
    not os.environ.get("EPOCHLOG_LONG"),
    reason="a 60 s latency measurement; EPOCHLOG_LONG=1 runs it (docs/operations.md has its last figures)",
)
def test_a_normal_client_keeps_its_latency_while_another_is_greedy(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b: BrokerProcess = broker_factory({})
    big, small = topic_name("big"), topic_name("small")
    create_topic(b.bootstrap, big)
    create_topic(b.bootstrap, small)
    payload = b"y" * 100_000
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 20, "batch.size": 1_000_000})
    for _ in range(2000):  # 200 MB for the greedy fetches to read
        while True:
            try:
                p.produce(big, payload)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0
    # The greedy clients are another process, as they would be: their parsing of 55 MiB answers must
    # not hold this process's GIL while the normal client's latency is timed here.
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    greedy_requests = ctx.Value("i", 0)
    procs = [
        ctx.Process(target=_greedy, args=(b.port, big, small, stop, greedy_requests), daemon=True) for _ in range(2)
    ]
    for proc in procs:
        proc.start()
    latencies: list[float] = []
    normal = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 0})
    sent: dict[int, float] = {}

    def done(err, msg) -> None:  # type: ignore[no-untyped-def]
        assert err is None, err
        latencies.append(time.monotonic() - sent.pop(int(msg.value())))

    # Open loop: a produce is due every 2 ms and its latency counts from when it was due, so a stall of
    # the broker delays every produce that falls due during it (a client that waited for each answer
    # would send one request per stall and hide it).
    start = time.monotonic()
    for i in range(int(20 / INTERVAL_S)):
        due = start + i * INTERVAL_S
        while (wait := due - time.monotonic()) > 0:
            normal.poll(wait)
        sent[i] = due
        normal.produce(small, str(i).encode(), on_delivery=done)
        normal.poll(0)
    assert normal.flush(30) == 0
    stop.set()
    for proc in procs:
        proc.join(60)
        if proc.is_alive():  # pragma: no cover - a hung greedy client
            proc.kill()
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99) - 1]
    p50 = latencies[len(latencies) // 2]
    print(
        f"normal client: {len(latencies)} acks=all produces, p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
        f"max {latencies[-1] * 1000:.1f} ms; greedy requests {greedy_requests.value}"
    )
    assert greedy_requests.value >= 4, "the greedy clients did not get through"
    assert p99 < 0.050, f"p99 {p99 * 1000:.1f} ms while greedy clients fetch 2 GiB and send compression bombs"
