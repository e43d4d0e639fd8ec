"""``__transaction_state`` records in Kafka's format, so a Kafka tool reading our log (or we reading
Kafka's) sees the same thing.

Facts of the format (TransactionLogKey / TransactionLogValue, version 0, not flexible): the key is
version int16 = 0 and the transactional id (int16-length string); the value is version int16 = 0,
producerId int64, producerEpoch int16, transactionTimeoutMs int32, transactionStatus int8, the partitions
(int32 count, then per topic an int16-length name and an int32 count of int32 partition ids; -1 for
none), lastUpdateTimestampMs int64, startTimestampMs int64. A removed id is a tombstone (null value).
The previous producer id and epoch (KIP-360) live in tagged fields of version 1; version 0 drops them, and
a coordinator that loads such a record only loses the recognition of one lost InitProducerId answer.
"""

from __future__ import annotations

import struct

from epochlog.transactions.state import TxnMetadata, TxnState, partitions_by_topic

_KEY_HEAD = struct.Struct(">hh")
_VALUE_HEAD = struct.Struct(">hqhib")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_TIMES = struct.Struct(">qq")


class BadTxnRecord(ValueError):
    pass


def encode_key(transactional_id: str) -> bytes:
    raw = transactional_id.encode()
    return _KEY_HEAD.pack(0, len(raw)) + raw


def decode_key(data: bytes) -> str:
    try:
        version, n = _KEY_HEAD.unpack_from(data)
    except struct.error as e:
        raise BadTxnRecord(f"transaction log key: {e}") from None
    if version not in (0, 1) or n < 0 or 4 + n != len(data):
        raise BadTxnRecord(f"transaction log key of version {version} and length {len(data)}")
    return data[4:].decode()


def encode_value(txn: TxnMetadata) -> bytes | None:
    if txn.state is TxnState.DEAD:
        return None
    out = bytearray(_VALUE_HEAD.pack(0, txn.producer_id, txn.producer_epoch, txn.timeout_ms, int(txn.state)))
    by_topic = partitions_by_topic(sorted(txn.partitions))
    out += _I32.pack(len(by_topic))
    for topic, parts in by_topic.items():
        raw = topic.encode()
        out += _I16.pack(len(raw)) + raw + _I32.pack(len(parts)) + b"".join(_I32.pack(p) for p in parts)
    out += _TIMES.pack(txn.last_update_ms, txn.start_ms)
    return bytes(out)


def decode_value(transactional_id: str, data: bytes | None) -> TxnMetadata | None:
    """The record's metadata; None for a tombstone."""
    if data is None:
        return None
    try:
        version, pid, epoch, timeout, status = _VALUE_HEAD.unpack_from(data)
        if version != 0:
            raise BadTxnRecord(f"transaction log value version {version}")
        pos = _VALUE_HEAD.size
        (topics,) = _I32.unpack_from(data, pos)
        pos += 4
        partitions = set()
        for _ in range(max(topics, 0)):
            (n,) = _I16.unpack_from(data, pos)
            topic = data[pos + 2 : pos + 2 + n].decode()
            pos += 2 + n
            (count,) = _I32.unpack_from(data, pos)
            pos += 4
            for _ in range(count):
                partitions.add((topic, _I32.unpack_from(data, pos)[0]))
                pos += 4
        last_update, start = _TIMES.unpack_from(data, pos)
        if pos + _TIMES.size != len(data):
            raise BadTxnRecord(f"transaction log value of {len(data)} bytes has {len(data) - pos - 16} left over")
        state = TxnState(status)
    except (struct.error, ValueError, UnicodeDecodeError) as e:
        raise BadTxnRecord(f"transaction log value for {transactional_id!r}: {e}") from None
    return TxnMetadata(transactional_id, pid, epoch, timeout, state, frozenset(partitions), start, last_update)
