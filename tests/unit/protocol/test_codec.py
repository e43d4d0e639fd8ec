from __future__ import annotations

import io
import struct
import uuid

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from epochlog.protocol import codec
from epochlog.protocol.api_versions import advertised, api_versions_v0_error_frame
from epochlog.protocol.errors import InvalidRequest, MalformedFrame


def request_frame(api_key: int, version: int, body: object, correlation_id: int = 7) -> bytes:
    cls = load_request_schema(api_key, version)
    out = io.BytesIO()
    out.write(struct.pack(">hhi", api_key, version, correlation_id))
    cid = b"test-client"
    out.write(struct.pack(">h", len(cid)) + cid)
    if cls.__flexible__:
        out.write(b"\x00")
    entity_writer(cls)(out, body)
    return out.getvalue()


def decode_response(api_key: int, version: int, frame: bytes) -> object:
    cls = load_response_schema(api_key, version)
    size = struct.unpack_from(">i", frame)[0]
    assert size == len(frame) - 4
    pos = 8 + (1 if cls.__flexible__ and api_key != 18 else 0)
    obj, _ = entity_reader(cls)(frame[pos:], 0)
    return obj


@pytest.mark.parametrize("version", [0, 3, 4])
def test_api_versions_response_every_version(version: int) -> None:
    body = {
        "error_code": 0,
        "throttle_time": 0,
        "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in advertised()],
    }
    frame = codec.encode_response(18, version, 42, body)
    assert struct.unpack_from(">i", frame, 4)[0] == 42
    obj = decode_response(18, version, frame)
    assert obj.error_code == ErrorCode.none
    assert {(k.api_key, k.min_version, k.max_version) for k in obj.api_keys} == set(advertised())


@pytest.mark.parametrize("version", [0, 1, 5, 9, 12, 13])
def test_metadata_one_description_for_every_version(version: int) -> None:
    tid = uuid.uuid4()
    body = {
        "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092}],
        "cluster_id": "c1",
        "controller_id": 1,
        "topics": [
            {
                "error_code": 0,
                "name": "t",
                "topic_id": tid,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": 0,
                        "leader_id": 1,
                        "leader_epoch": 3,
                        "replica_nodes": [1],
                        "isr_nodes": [1],
                    }
                ],
            }
        ],
        "error_code": 0,
    }
    obj = decode_response(3, version, codec.encode_response(3, version, 1, body))
    assert obj.topics[0].name == "t"
    assert obj.topics[0].partitions[0].leader_id == 1
    if version >= 7:
        assert obj.topics[0].partitions[0].leader_epoch == 3
    if version >= 10:
        assert obj.topics[0].topic_id == tid


def test_header_and_body_decode() -> None:
    cls = load_request_schema(3, 12)
    body = cls(topics=None, allow_auto_topic_creation=True, include_topic_authorized_operations=False)
    frame = memoryview(request_frame(3, 12, body))
    header = codec.parse_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (3, 12, 7, "test-client")
    codec.finish_header(frame, header)
    req = codec.decode_body(frame, header)
    assert req.topics is None


def test_unknown_tagged_field_is_skipped() -> None:
    cls = load_request_schema(3, 12)
    body = cls(topics=None, allow_auto_topic_creation=True, include_topic_authorized_operations=False)
    raw = request_frame(3, 12, body)
    assert raw.endswith(b"\x00")  # empty tagged-field section of the body
    # replace it with one unknown tag (tag 99, 3 bytes)
    raw = raw[:-1] + b"\x01" + bytes([99, 3]) + b"abc"
    frame = memoryview(raw)
    header = codec.parse_header(frame)
    codec.finish_header(frame, header)
    req = codec.decode_body(frame, header)
    assert req.allow_auto_topic_creation is True


def test_truncated_body_is_invalid_request() -> None:
    cls = load_request_schema(3, 12)
    body = cls(topics=(), allow_auto_topic_creation=True, include_topic_authorized_operations=False)
    raw = request_frame(3, 12, body)[:-3]
    frame = memoryview(raw)
    header = codec.parse_header(frame)
    codec.finish_header(frame, header)
    with pytest.raises(InvalidRequest):
        codec.decode_body(frame, header)


def test_short_header_is_malformed() -> None:
    with pytest.raises(MalformedFrame):
        codec.parse_header(memoryview(b"\x00\x03"))
    with pytest.raises(MalformedFrame):
        codec.parse_header(memoryview(struct.pack(">hhih", 3, 1, 1, 500) + b"x"))


def test_api_versions_fallback_frame_is_v0() -> None:
    frame = api_versions_v0_error_frame(9)
    obj = decode_response(18, 0, frame)
    assert obj.error_code == ErrorCode.unsupported_version
    assert len(obj.api_keys) == len(advertised())
