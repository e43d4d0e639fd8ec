from __future__ import annotations

import datetime as dt
import io
import struct
import uuid

import pytest
from kio.index import load_request_schema
from kio.serial import entity_writer

from epochlog.protocol.errors import InvalidRequest
from epochlog.protocol.produce_request import CURRENT_LEADER_EPOCH_TAG, parse_produce


def encode(version: int, topics: list[tuple[object, list[tuple[int, bytes | None]]]], acks: int = -1) -> bytes:
    mod = load_request_schema(0, version)
    import importlib

    m = importlib.import_module(mod.__module__)
    tds = []
    for topic, parts in topics:
        pds = tuple(m.PartitionProduceData(index=i, records=r) for i, r in parts)
        key = {"topic_id": topic} if version >= 13 else {"name": topic}
        tds.append(m.TopicProduceData(**key, partition_data=pds))
    req = mod(transactional_id=None, acks=acks, timeout=dt.timedelta(seconds=5), topic_data=tuple(tds))
    out = io.BytesIO()
    entity_writer(mod)(out, req)
    return out.getvalue()


@pytest.mark.parametrize("version", [3, 7, 8, 9, 12])
def test_parse_matches_kio_encoding(version: int) -> None:
    raw = encode(version, [("a", [(0, b"x" * 70), (3, None)]), ("b", [(1, b"yy")])], acks=1)
    req = parse_produce(memoryview(raw), version)
    assert req.acks == 1 and req.timeout_ms == 5000 and req.transactional_id is None
    assert [t.name for t in req.topics] == ["a", "b"]
    assert bytes(req.topics[0].partitions[0].records) == b"x" * 70
    assert req.topics[0].partitions[1].records is None
    assert req.topics[1].partitions[0].index == 1
    assert req.topics[0].partitions[0].current_leader_epoch == -1


def test_v13_topic_id_and_kip359_tag() -> None:
    tid = uuid.uuid4()
    raw = encode(13, [(tid, [(0, b"abc")])])
    # The partition's tagged-field section is the byte right after its records; put the tag there.
    records_end = raw.index(b"abc") + 3
    assert raw[records_end] == 0
    tag = bytes([0x80 | (CURRENT_LEADER_EPOCH_TAG & 0x7F), CURRENT_LEADER_EPOCH_TAG >> 7])
    patched = raw[:records_end] + b"\x01" + tag + b"\x04" + struct.pack(">i", 7) + raw[records_end + 1 :]
    req = parse_produce(memoryview(patched), 13)
    assert req.topics[0].topic_id == tid
    assert req.topics[0].partitions[0].current_leader_epoch == 7


@pytest.mark.parametrize("cut", [1, 5, 12, 20])
def test_truncated_request_is_invalid(cut: int) -> None:
    raw = encode(9, [("a", [(0, b"x" * 30)])])
    with pytest.raises(InvalidRequest):
        parse_produce(memoryview(raw[:-cut]), 9)


def test_old_versions_refused() -> None:
    with pytest.raises(InvalidRequest):
        parse_produce(memoryview(b""), 2)
