"""Transaction markers: the control batches a transaction coordinator has written to each partition.

Facts of Kafka's format (EndTransactionMarker, ControlRecordType): a control batch has the control and
transactional attribute bits, the transaction's producer id and epoch, base sequence -1, no compression,
and one record whose key is (version int16 = 0, type int16: 0 ABORT, 1 COMMIT) and whose value is
(version int16 = 0, coordinatorEpoch int32).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from epochlog.protocol.record_batch import HEADER_SIZE, CorruptBatchError, read_header
from epochlog.protocol.records import Buffer, Record, build_batch, decode_batch

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class Marker:
    type: ControlType
    coordinator_epoch: int


def marker_batch(
    producer_id: int, producer_epoch: int, kind: ControlType, coordinator_epoch: int, timestamp_ms: int
) -> bytes:
    return build_batch(
        [Record(0, timestamp_ms, _KEY.pack(0, int(kind)), _VALUE.pack(0, coordinator_epoch))],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        is_control=True,
        is_transactional=True,
    )


def read_marker(buf: Buffer, pos: int = 0) -> Marker | None:
    """The marker in the control batch at ``pos``; None for a control record of another type (Kafka has
    others, e.g. the quorum's LeaderChange) or a batch that is not a control batch."""
    h = read_header(buf, pos)
    if not h.is_control or h.size <= HEADER_SIZE:
        return None
    _h, records = decode_batch(buf, pos, verify_crc=False)
    if not records or records[0].key is None or len(records[0].key) < _KEY.size:
        raise CorruptBatchError(f"control batch at offset {h.base_offset} has no control record key")
    _version, kind = _KEY.unpack_from(records[0].key)
    if kind not in (ControlType.ABORT, ControlType.COMMIT):
        return None
    value = records[0].value or b""
    coordinator_epoch = _VALUE.unpack_from(value)[1] if len(value) >= _VALUE.size else -1
    return Marker(ControlType(kind), coordinator_epoch)
