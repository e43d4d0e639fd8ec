"""Writing and replaying the partitions of internal topics (``__consumer_offsets``,
``__transaction_state``): their coordinators append as the partition's leader and act only once the
write is durable, and rebuild their state by reading the partition from its start."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from epochlog.protocol.errors import Err
from epochlog.protocol.record_batch import iter_batches
from epochlog.server.partition import Partition

READ_CHUNK = 4 * 1024 * 1024


class InternalWriteFailed(RuntimeError):
    """The write was refused, or the ISR did not make it durable in time."""


async def append_durably(part: Partition, batch: bytes, timeout_s: float, now_ms: int) -> int:
    """Append as leader and return the batch's last offset once the ISR has it (as acks=all)."""
    result = part.append(batch, now_ms, acks=-1)
    if result.error:
        raise InternalWriteFailed(f"{part.topic}-{part.partition} refuses the write: {Err(result.error).name}")
    try:
        code = await asyncio.wait_for(part.wait_committed(result.wait_offset), timeout_s)
    except TimeoutError:
        raise InternalWriteFailed(f"{part.topic}-{part.partition}: no commit by the ISR in {timeout_s} s") from None
    if code:
        raise InternalWriteFailed(f"{part.topic}-{part.partition}: the write was not committed: {Err(code).name}")
    return result.last_offset


def read_batches(part: Partition) -> Iterator[bytes]:
    """Every batch of the partition's log, oldest first."""
    plog = part.log
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        result = plog.read(offset, READ_CHUNK, max_offset=None, min_one_batch=True)
        data = b"".join(bytes(c) for c in result.chunks)
        if not data:
            return
        last_next = offset
        for pos, h in iter_batches(data, validate_crc=False):
            if h.next_offset <= offset:
                continue
            yield data[pos : pos + h.size]
            last_next = h.next_offset
        if last_next <= offset:
            return
        offset = last_next
