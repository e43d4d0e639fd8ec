"""Read one offset range of one partition with plain Fetch requests on a blocking socket to its leader.

The fast path of the worker (reader.read_split): no librdkafka, no Message objects. A Metadata request
finds the leader; Fetch v12 requests (READ_UNCOMMITTED, no fetch session) are pipelined one ahead, so
the broker prepares the next answer while this process decodes the current one with batch_decode.

It only handles the plain case. It stops, and returns the offset to continue from, on anything else:
an error code in a Metadata or Fetch answer, an empty answer (the log may end before the range does),
a batch batch_decode does not take, a socket error or timeout. The caller reads the rest with the
general confluent-kafka reader, which owns the data-loss rules (failOnDataLoss, gaps, log end).
"""

from __future__ import annotations

import datetime
import logging
import os
import socket
import struct
from collections.abc import Generator, Mapping
from typing import Any

import pyarrow as pa

from epochlog.client.epochs import metadata_request, parse_bootstrap
from epochlog.client.wire import Connection, WireError, encode_request
from epochlog.protocol.codec import request_class
from epochlog.protocol.errors import InvalidRequest
from epochlog.protocol.fetch_response import VERSION as FETCH_VERSION
from epochlog.protocol.fetch_response import parse_fetch_response_v12
from epochlog.protocol.record_batch import CorruptBatchError
from epochlog.spark.batch_decode import decode_fetch

log = logging.getLogger("epochlog.spark.fetch_reader")

PARTITION_MAX_BYTES = 8 << 20
MAX_WAIT_MS = 500
SOCKET_TIMEOUT_S = 30.0
CLIENT_ID = "epochlog-spark-fetch"

# Set to "confluent" to read with confluent-kafka only (the source option `reader` does the same).
READER_ENV = "EPOCHLOG_SPARK_READER"

_I32 = struct.Struct(">i")


class FetchFailed(Exception):
    """The fast path cannot go on; the message says why (logged, then the general reader continues)."""


def unsupported_reason(conf: Mapping[str, str], reader: str = "auto") -> str | None:
    """Why the fast path must not be used for a split with these `kafka.*` settings, or None."""
    if reader == "confluent" or os.environ.get(READER_ENV, "").strip().lower() == "confluent":
        return "the confluent-kafka reader was asked for"
    keys = {k.lower(): str(v) for k, v in conf.items()}
    if keys.get("security.protocol", "plaintext").strip().lower() != "plaintext":
        return f"security.protocol={keys['security.protocol']}"
    if any(k.startswith(("sasl.", "ssl.")) for k in keys):
        return "SASL/SSL settings"
    if keys.get("isolation.level", "read_uncommitted").strip().lower() != "read_uncommitted":
        return f"isolation.level={keys['isolation.level']}"
    if not keys.get("bootstrap.servers", "").strip():
        return "no bootstrap.servers"
    return None


def find_leader(bootstrap: str, topic: str, partition: int, timeout: float = 10.0) -> tuple[str, int]:
    """(host, port) of the partition's leader, from a Metadata request to the first bootstrap that answers."""
    req = metadata_request([topic])
    last: Exception | None = None
    for host, port in parse_bootstrap(bootstrap):
        try:
            with Connection(host, port, timeout, CLIENT_ID) as conn:
                resp = conn.request(req)
        except WireError as e:
            last = e
            continue
        brokers = {b.node_id: (b.host, b.port) for b in resp.brokers}
        for t in resp.topics:
            if t.name != topic:
                continue
            if t.error_code.value != 0:
                raise FetchFailed(f"Metadata answered error {t.error_code.value} for topic {topic}")
            for p in t.partitions:
                if p.partition_index == partition:
                    if p.error_code.value != 0 or p.leader_id not in brokers:
                        raise FetchFailed(f"no leader for {topic}-{partition} (error {p.error_code.value})")
                    return brokers[p.leader_id]
        raise FetchFailed(f"{topic}-{partition} is not in the metadata")
    raise FetchFailed(f"no bootstrap server answered Metadata: {last}")


class _FetchConnection:
    """A blocking socket to the leader with at most one Fetch in flight."""

    def __init__(self, addr: tuple[str, int], topic: str, partition: int, timeout: float) -> None:
        self.topic, self.partition = topic, partition
        try:
            self.sock = socket.create_connection(addr, timeout=timeout)
        except OSError as e:
            raise FetchFailed(f"cannot connect to {addr[0]}:{addr[1]}: {e}") from e
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.corr = 0
        self.in_flight: tuple[int, int] | None = None  # (correlation id, fetch offset)
        req_cls = request_class(1, FETCH_VERSION)
        self._req_cls = req_cls
        self._mod = __import__(req_cls.__module__, fromlist=["FetchTopic", "FetchPartition"])
        self._resp_partition: Any = None

    def send(self, offset: int) -> None:
        assert self.in_flight is None
        m = self._mod
        req = self._req_cls(
            replica_id=-1,
            max_wait=datetime.timedelta(milliseconds=MAX_WAIT_MS),
            min_bytes=1,
            max_bytes=PARTITION_MAX_BYTES,
            isolation_level=0,  # READ_UNCOMMITTED, as the source's default
            session_id=0,
            session_epoch=-1,  # a full fetch, no session
            topics=(
                m.FetchTopic(
                    topic=self.topic,
                    partitions=(
                        m.FetchPartition(
                            partition=self.partition, fetch_offset=offset, partition_max_bytes=PARTITION_MAX_BYTES
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
            rack_id="",
        )
        self.corr = (self.corr + 1) & 0x7FFFFFFF
        try:
            self.sock.sendall(encode_request(req, self.corr, CLIENT_ID))
        except OSError as e:
            raise FetchFailed(f"sending Fetch: {e}") from e
        self.in_flight = (self.corr, offset)

    def _recv_into(self, view: memoryview) -> None:
        got = 0
        while got < len(view):
            n = self.sock.recv_into(view[got:])
            if n == 0:
                raise FetchFailed("the leader closed the connection")
            got += n

    def receive(self) -> tuple[int, bytes]:
        """(fetch offset, records) of the answer in flight; FetchFailed on any error code."""
        assert self.in_flight is not None
        corr, offset = self.in_flight
        self.in_flight = None
        try:
            head = bytearray(4)
            self._recv_into(memoryview(head))
            (size,) = _I32.unpack(head)
            frame = bytearray(size)
            self._recv_into(memoryview(frame))
        except OSError as e:
            raise FetchFailed(f"reading the Fetch answer: {e}") from e
        if len(frame) < 4 or _I32.unpack_from(frame, 0)[0] != corr:
            raise FetchFailed("the Fetch answer does not carry the request's correlation id")
        try:
            resp = parse_fetch_response_v12(memoryview(frame)[4:])
        except InvalidRequest as e:
            raise FetchFailed(f"cannot read the Fetch answer: {e}") from e
        if resp.error_code != 0:
            raise FetchFailed(f"Fetch answered error {resp.error_code}")
        for t in resp.responses:
            for p in t.partitions:
                if t.topic == self.topic and p.partition_index == self.partition:
                    if p.error_code != 0:
                        raise FetchFailed(f"Fetch answered error {p.error_code} at offset {offset}")
                    if p.diverging_epoch is not None and p.diverging_epoch.end_offset >= 0:
                        raise FetchFailed(f"Fetch answered a diverging epoch at offset {offset}")
                    return offset, bytes(p.records or b"")
        raise FetchFailed("the Fetch answer does not name the partition")

    def close(self) -> None:
        self.sock.close()


def _next_position(data: bytes, position: int) -> int:
    """The offset after the last whole batch in ``data`` (headers only; cheap), or ``position``."""
    pos = 0
    size = len(data)
    nxt = position
    while pos + 61 <= size:
        base, length = struct.unpack_from(">qi", data, pos)
        last_delta = _I32.unpack_from(data, pos + 23)[0]
        if pos + 12 + length > size:
            break
        nxt = max(nxt, base + last_delta + 1)
        pos += 12 + length
    return nxt


def read_range(
    *,
    bootstrap: str,
    topic: str,
    partition: int,
    from_offset: int,
    until_offset: int,
    include_headers: bool,
    timeout: float = SOCKET_TIMEOUT_S,
) -> Generator[pa.RecordBatch, None, int]:
    """Yield Arrow batches of [from_offset, until_offset) in offset order; return where reading stopped.

    The return value is until_offset when everything was read, else the first offset not yielded, from
    which the caller reads with the general reader.
    """
    position = from_offset
    conn: _FetchConnection | None = None
    try:
        conn = _FetchConnection(find_leader(bootstrap, topic, partition), topic, partition, timeout)
        conn.send(position)
        while position < until_offset:
            fetched_at, data = conn.receive()
            if fetched_at != position:
                raise FetchFailed(f"answer for offset {fetched_at}, expected {position}")
            if not data:
                raise FetchFailed(f"no records at offset {position}")
            ahead = _next_position(data, position)
            if position < ahead < until_offset:
                conn.send(ahead)  # the broker reads the next part while this one is decoded
            decoded = decode_fetch(
                data,
                topic=topic,
                partition=partition,
                start=position,
                until=until_offset,
                include_headers=include_headers,
            )
            if decoded.batch is not None:
                yield decoded.batch
            if decoded.next_offset <= position and decoded.unsupported is None:
                raise FetchFailed(f"no whole record batch at offset {position}")
            position = decoded.next_offset
            if decoded.unsupported is not None:
                raise FetchFailed(f"{decoded.unsupported} at offset {position}")
            if position < until_offset and conn.in_flight is None:
                conn.send(position)
            elif conn.in_flight is not None and conn.in_flight[1] != position:
                raise FetchFailed(f"decoded up to {position}, fetched ahead from {conn.in_flight[1]}")
        return until_offset
    except (FetchFailed, CorruptBatchError) as e:  # CorruptRecordsError too
        if position < until_offset:
            log.info(
                "%s-%s: plain Fetch stops (%s); reading on from offset %s with confluent-kafka",
                topic,
                partition,
                e,
                position,
            )
        return position
    except Exception:  # an accelerator only: anything unforeseen hands the rest to confluent-kafka
        log.warning(
            "%s-%s: plain Fetch failed; reading on from offset %s with confluent-kafka",
            topic,
            partition,
            position,
            exc_info=True,
        )
        return position
    finally:
        if conn is not None:
            conn.close()
