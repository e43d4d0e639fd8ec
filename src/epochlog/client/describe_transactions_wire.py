"""DescribeTransactions v0 responses read by hand.

kio reads ``transaction_start_time_ms`` as a timezone-aware datetime and refuses a negative value, but
Kafka (and epochlog) send -1 there whenever no transaction is running: for every Empty or Complete* id and
every error row. So the response is walked here with kio's primitive readers. Facts of the format
(DescribeTransactionsResponse.json v0, flexible): throttle_time_ms int32; transaction_states compact
array of {error_code int16, transactional_id compact string, transaction_state compact string,
transaction_timeout_ms int32, transaction_start_time_ms int64, producer_id int64, producer_epoch int16,
topics compact array of {topic compact string, partitions compact array of int32, tags}, tags}; tags.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.serial import readers as r

from epochlog.client.wire import WireError

_I32 = struct.Struct(">i")
Reader = Callable[[memoryview, int], tuple[Any, int]]


@dataclass(frozen=True)
class TxnStateRow:
    error_code: int
    transactional_id: str
    state: str
    timeout_ms: int
    start_ms: int
    producer_id: int
    producer_epoch: int
    partitions: tuple[tuple[str, int], ...]


class _Cursor:
    def __init__(self, data: bytes) -> None:
        self.buf = memoryview(data)
        self.pos = 0

    def take(self, reader: Reader) -> Any:
        value, size = reader(self.buf, self.pos)
        self.pos += size
        return value

    def num(self, reader: Reader) -> int:
        return int(self.take(reader))

    def text(self) -> str:
        return str(self.take(r.read_compact_string))

    def count(self) -> int:
        return self.num(r.read_compact_array_length)

    def skip_tags(self) -> None:
        for _ in range(self.num(r.read_unsigned_varint)):
            self.num(r.read_unsigned_varint)  # the tag
            self.pos += self.num(r.read_unsigned_varint)  # its size: skip the value


def decode(frame: bytes, correlation_id: int) -> list[TxnStateRow]:
    """The rows of a DescribeTransactions v0 response frame (correlation id, header tags, body)."""
    (got,) = _I32.unpack_from(frame, 0)
    if got != correlation_id:
        raise WireError(f"correlation id {got} does not match {correlation_id}")
    c = _Cursor(frame[4:])
    try:
        c.skip_tags()  # the response header's
        c.num(r.read_int32)  # throttle time
        rows = []
        for _ in range(c.count()):
            code, tid, state = c.num(r.read_int16), c.text(), c.text()
            timeout, start = c.num(r.read_int32), c.num(r.read_int64)
            pid, epoch = c.num(r.read_int64), c.num(r.read_int16)
            parts = []
            for _ in range(c.count()):
                topic = c.text()
                parts += [(topic, c.num(r.read_int32)) for _ in range(c.count())]
                c.skip_tags()
            c.skip_tags()
            rows.append(TxnStateRow(code, tid, state, timeout, start, pid, epoch, tuple(parts)))
        c.skip_tags()
    except (ValueError, IndexError, struct.error) as e:
        raise WireError(f"unreadable DescribeTransactions response: {e}") from e
    return rows
