"""Garbage on the wire gets an error or a closed connection; the broker keeps serving and loses nothing."""

from __future__ import annotations

import os
import socket
import struct

import pytest

from tests.broker_process import BrokerProcess
from tests.integration.helpers import consume_assign, create_topic, produce, topic_name


def _send(port: int, payload: bytes, read: bool = True) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(payload)
        if not read:
            return b""
        s.settimeout(5)
        chunks = []
        try:
            while True:
                data = s.recv(65536)
                if not data:
                    break
                chunks.append(data)
        except TimeoutError:
            pass
        return b"".join(chunks)


def _header(api_key: int, version: int, corr: int = 1, client: bytes = b"bad") -> bytes:
    return struct.pack(">hhih", api_key, version, corr, len(client)) + client


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


CASES = {
    "random-garbage": os.urandom(257),
    "negative-size": struct.pack(">i", -5) + b"abc",
    "absurd-size": struct.pack(">i", 2**31 - 1) + b"x" * 100,
    "short-header": frame(b"\x00\x03\x00"),
    "unknown-api-key": frame(_header(9999, 0)),
    "unsupported-version": frame(_header(3, 99)),
    "produce-v0": frame(_header(0, 0) + b"\x00" * 20),
    "metadata-garbage-body": frame(_header(3, 9) + b"\x00" + os.urandom(40)),
    # kio's native reader would allocate 2^32 elements and abort the broker (see tolerant_reader.py)
    "delete-topics-huge-array": frame(_header(20, 5) + b"\x00" + bytes([0xF0, 0xFF, 0xFF, 0xFF, 0x0F]) + bytes(30)),
    "metadata-huge-array": frame(_header(3, 9) + b"\x00" + bytes([0xF0, 0xFF, 0xFF, 0xFF, 0x0F]) + bytes(30)),
    "produce-truncated-body": frame(_header(0, 9) + b"\x00" + b"\x01\xff\xff"),
    "client-id-overflow": frame(struct.pack(">hhih", 3, 1, 1, 3000) + b"abc"),
    "fetch-huge-array": frame(
        _header(1, 11) + struct.pack(">iiiibii", -1, 500, 1, 1000, 0, 0, 0) + struct.pack(">i", 2**30)
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_frames_close_or_error(broker: BrokerProcess, case: str) -> None:
    topic = topic_name("bad")
    create_topic(broker.bootstrap, topic)
    before = produce(broker.bootstrap, topic, [b"before-%d" % i for i in range(20)])
    reply = _send(broker.port, CASES[case])
    assert len(reply) < 1024  # closed, or at most a small error response
    after = produce(broker.bootstrap, topic, [b"after-%d" % i for i in range(20)])
    msgs = consume_assign(broker.bootstrap, topic, 0, 40)
    assert [m.value() for m in msgs] == [b"before-%d" % i for i in range(20)] + [b"after-%d" % i for i in range(20)]
    assert [o for _, o in before + after] == list(range(40))
    assert broker.proc is not None and broker.proc.poll() is None


def test_api_versions_with_unknown_version_gets_v0_error(broker: BrokerProcess) -> None:
    reply = _send(broker.port, frame(_header(18, 77, corr=55)))
    size, corr, err = struct.unpack_from(">iih", reply)
    assert corr == 55 and err == 35 and size == len(reply) - 4


def test_half_frame_then_hangup_does_not_disturb(broker: BrokerProcess) -> None:
    topic = topic_name("half")
    create_topic(broker.bootstrap, topic)
    socks = []
    for _ in range(20):
        s = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
        s.sendall(struct.pack(">i", 5000) + b"x" * 100)
        socks.append(s)
    acked = produce(broker.bootstrap, topic, [b"ok"] * 10)
    for s in socks:
        s.close()
    assert len(acked) == 10
    assert len(consume_assign(broker.bootstrap, topic, 0, 10)) == 10
