"""Consumers' records sent with sendfile (server/sendfile_writer.py) against a broker that reads them into memory
(epochlog.fetch.sendfile.enable=false): the same records for every client; a slow reader of pipelined requests
gets whole answers in order; a segment deleted while it is being sent still arrives whole; TLS keeps the old path.
"""

from __future__ import annotations

import re
import shutil
import socket
import struct
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from tests.broker_process import BrokerProcess, free_port
from tests.integration.helpers import consume_assign, create_topic, produce, topic_name
from tests.integration.security_node import ADMIN_PASSWORD, start_secure_node

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SENT = "epochlog_fetch_sendfile_bytes"
READ = "epochlog_fetch_region_read_bytes"


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {m[1]: float(m[2]) for m in re.finditer(r"^([a-z_]+) ([-0-9.e+]+)$", text, re.M)}


def start(factory: Any, sendfile: bool, name: str) -> tuple[BrokerProcess, int]:
    port = free_port()
    settings = {"metrics.port": str(port), "epochlog.fetch.sendfile.enable": str(sendfile).lower()}
    return factory(settings, name), port


def values(n: int, size: int = 1024) -> list[bytes]:
    return [(f"{i:07d}-".encode() * (size // 8 + 1))[:size] for i in range(n)]


def read_confluent(bootstrap: str, topic: str, n: int) -> list[tuple[bytes, bytes, int]]:
    msgs = consume_assign(bootstrap, topic, 0, n, timeout=60)
    return [(m.key(), m.value(), m.offset()) for m in msgs]


def read_kafka_python(bootstrap: str, topic: str, n: int) -> list[tuple[bytes, bytes, int]]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=20_000)
    c.assign([KpTopicPartition(topic, 0)])
    c.seek_to_beginning()
    got = []
    for m in c:
        got.append((m.key, m.value, m.offset))
        if len(got) == n:
            break
    c.close()
    return got


def read_kcat(bootstrap: str, topic: str, n: int) -> list[tuple[bytes, bytes, int]]:
    out = subprocess.run(
        ["kcat", "-b", bootstrap, "-t", topic, "-p", "0", "-C", "-o", "beginning", "-e", "-f", "%k %s %o\n"],
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    rows = [line.split(b" ") for line in out.splitlines()]
    return [(k, v, int(o)) for k, v, o in rows]


def test_every_client_reads_the_same_records_with_sendfile_on_and_off(broker_factory: Any) -> None:
    (on, on_metrics), (off, off_metrics) = start(broker_factory, True, "on"), start(broker_factory, False, "off")
    topic = topic_name("sf")
    vals = values(3000)
    keys = [b"k%d" % i for i in range(len(vals))]
    for b in (on, off):
        # Small segments, and a restart: a rolled segment keeps its in-memory tail while the shared tail budget
        # allows, and a restarted broker has none, so the closed segments' batches are read from the files.
        create_topic(b.bootstrap, topic, config={"segment.bytes": "200000"})
        for i in range(0, len(vals), 500):
            produce_keyed(b.bootstrap, topic, keys[i : i + 500], vals[i : i + 500])
        b.restart()
    expected = [(k, v, i) for i, (k, v) in enumerate(zip(keys, vals, strict=True))]
    readers = [read_confluent, read_kafka_python]
    if shutil.which("kcat"):
        readers.append(read_kcat)
    for b, metrics in ((on, on_metrics), (off, off_metrics)):
        before = scrape(metrics)
        for read in readers:
            assert read(b.bootstrap, topic, len(vals)) == expected, (read.__name__, b is on)
        after = scrape(metrics)
        sent = after[SENT] - before[SENT]
        if b is on:
            # Every reader read the closed segments (over 2.5 MB of the 3 MB) from the file with sendfile.
            assert sent >= len(readers) * 2_500_000
        else:
            assert sent == 0 and after[READ] == before[READ]


def produce_keyed(bootstrap: str, topic: str, keys: list[bytes], vals: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for k, v in zip(keys, vals, strict=True):
        p.produce(topic, key=k, value=v)
        p.poll(0)
    assert p.flush(30) == 0


def test_the_hot_segment_tail_is_served_from_memory(broker_factory: Any) -> None:
    b, metrics = start(broker_factory, True, "hot")
    topic = topic_name("hot")
    create_topic(b.bootstrap, topic)
    vals = values(300)
    produce(b.bootstrap, topic, vals)
    before = scrape(metrics)
    got = consume_assign(b.bootstrap, topic, 0, len(vals))
    assert [m.value() for m in got] == vals
    assert scrape(metrics)[SENT] == before[SENT]  # the active segment's tail: no file region at all


# -- a raw client: pipelined requests, read slowly ---------------------------------------------------------------


def fetch_v4(corr: int, topic: str, offset: int, max_bytes: int) -> bytes:
    t = topic.encode()
    body = struct.pack(">hhih", 1, 4, corr, 2) + b"sf"
    body += struct.pack(">iiiib", -1, 0, 0, max_bytes, 0)
    body += struct.pack(">ih", 1, len(t)) + t + struct.pack(">iiqi", 1, 0, offset, max_bytes)
    return struct.pack(">i", len(body)) + body


def metadata_v1(corr: int) -> bytes:
    body = struct.pack(">hhih", 3, 1, corr, 2) + b"sf" + struct.pack(">i", 0)
    return struct.pack(">i", len(body)) + body


def parse_fetch_v4(frame: bytes) -> tuple[int, bytes]:
    """(error code, records) of the only partition of a Fetch v4 answer (after the correlation id)."""
    pos = 4 + 4  # throttle, topics count
    (tlen,) = struct.unpack_from(">h", frame, pos)
    pos += 2 + tlen + 4  # topic name, partitions count
    _part, err, _hw, _lso, naborted = struct.unpack_from(">ihqqi", frame, pos)
    pos += 4 + 2 + 8 + 8 + 4 + max(naborted, 0) * 16
    (size,) = struct.unpack_from(">i", frame, pos)
    return err, frame[pos + 4 : pos + 4 + size]


class SlowReader:
    """A client with a 4 KiB receive buffer that reads a little at a time: the broker's socket fills."""

    def __init__(self, port: int) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.connect(("127.0.0.1", port))
        self.sock.settimeout(30)
        self.buf = bytearray()

    def fill(self, n: int, pause: float = 0.0) -> None:
        while len(self.buf) < n:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("closed by the broker")
            self.buf += chunk
            if pause:
                time.sleep(pause)  # a slow consumer, not synchronization

    def frame(self, pause: float = 0.0) -> tuple[int, bytes]:
        self.fill(4, pause)
        (size,) = struct.unpack_from(">i", self.buf)
        self.fill(4 + size, pause)
        frame = bytes(self.buf[4 : 4 + size])
        del self.buf[: 4 + size]
        return struct.unpack_from(">i", frame)[0], frame[4:]


# Bigger than the most a loopback socket holds (net.ipv4.tcp_wmem's 4 MiB and the reader's 4 KiB): most of an
# answer this big is still the broker's to send while the reader waits.
BIG = 10 << 20


def big_segment_topic(b: BrokerProcess) -> tuple[str, Path]:
    """A topic whose first segment (12 MiB, closed) is read from the file; that segment's path."""
    topic = topic_name("big")
    create_topic(b.bootstrap, topic, config={"segment.bytes": str(12 << 20)})
    vals = values(13_000)
    for i in range(0, len(vals), 1000):
        produce_keyed(b.bootstrap, topic, [b"k"] * 1000, vals[i : i + 1000])
    first = b.data_dir / f"{topic}-0" / f"{0:020d}.log"
    assert first.exists() and first.stat().st_size > BIG
    return topic, first


def test_a_slow_reader_gets_pipelined_answers_whole_and_in_order(broker_factory: Any) -> None:
    b, metrics = start(broker_factory, True, "slow")
    topic, first = big_segment_topic(b)
    segment = first.read_bytes()
    before = scrape(metrics)
    r = SlowReader(b.port)
    r.sock.sendall(fetch_v4(1, topic, 0, BIG) + metadata_v1(2) + fetch_v4(3, topic, 0, BIG) + metadata_v1(4))
    answers = [r.frame(pause=0.0002) for _ in range(4)]
    r.sock.close()
    assert [corr for corr, _ in answers] == [1, 2, 3, 4]
    for _, body in (answers[0], answers[2]):
        err, records = parse_fetch_v4(body)
        assert err == 0
        assert len(records) > BIG - (2 << 20)  # whole batches (up to 1 MB each) up to BIG
        assert records == segment[: len(records)]
    assert scrape(metrics)[SENT] - before[SENT] >= 2 * len(records)


def test_a_segment_deleted_while_it_is_sent_arrives_whole(broker_factory: Any) -> None:
    b, metrics = start(broker_factory, True, "deleted")
    topic, first = big_segment_topic(b)
    segment = first.read_bytes()
    before = scrape(metrics)
    r = SlowReader(b.port)
    r.sock.sendall(fetch_v4(1, topic, 0, BIG))
    r.fill(64 << 10)  # the answer has begun; most of it is still in the broker's hands
    assert scrape(metrics)[SENT] - before[SENT] < BIG - (1 << 20)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    (fut,) = admin.delete_records([TopicPartition(topic, 0, 12_900)], request_timeout=30).values()
    assert fut.result(30).low_watermark == 12_900
    deadline = time.monotonic() + 30
    while first.exists():  # DeleteRecords deletes the segments below the new start at once
        assert time.monotonic() < deadline, "the first segment was not deleted"
        time.sleep(0.05)
    corr, body = r.frame()
    r.sock.close()
    err, records = parse_fetch_v4(body)
    assert corr == 1 and err == 0
    assert len(records) > BIG - (2 << 20) and records == segment[: len(records)]
    # And the broker carries on: a new consumer reads from the new start.
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": uuid.uuid4().hex, "auto.offset.reset": "earliest"})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        c.close()
    assert (low, high) == (12_900, 13_000)


def test_tls_connections_read_into_memory_sasl_plaintext_ones_sendfile(tmp_path: Path) -> None:
    metrics = free_port()
    node = start_secure_node(tmp_path, {"metrics.port": str(metrics)})
    try:
        topic = topic_name("tls")
        create_topic(node.plaintext, topic, config={"segment.bytes": "200000"})
        vals = values(1500)
        produce(node.plaintext, topic, vals)
        node.broker.restart()  # no in-memory tails: the closed segments are read from their files
        before = scrape(metrics)
        got = consume_assign(node.ssl, topic, 0, len(vals), timeout=60, conf=node.librdkafka_ssl())
        assert [m.value() for m in got] == vals
        after = scrape(metrics)
        assert after[SENT] == before[SENT] and after[READ] == before[READ]  # no region at all over TLS
        got = consume_assign(node.plaintext, topic, 0, len(vals), timeout=60)
        assert [m.value() for m in got] == vals
        plain = scrape(metrics)[SENT]
        assert plain > after[SENT]  # while plaintext on the same broker sends with sendfile
        sasl = {
            "bootstrap.servers": node.sasl_plaintext,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "admin",
            "sasl.password": ADMIN_PASSWORD,
        }
        got = consume_assign(node.sasl_plaintext, topic, 0, len(vals), timeout=60, conf=sasl)
        assert [m.value() for m in got] == vals
        assert scrape(metrics)[SENT] > plain  # SASL_PLAINTEXT wraps nothing: sendfile too
    finally:
        node.broker.stop()
