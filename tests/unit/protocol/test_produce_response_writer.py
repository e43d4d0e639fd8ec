"""The hand-written Produce response encoder writes exactly the bytes kio's encoder writes, for every
version epochlog serves and every shape of row the handler makes."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from epochlog.protocol import codec
from epochlog.protocol.api_versions import supported_range
from epochlog.protocol.errors import Err
from epochlog.protocol.produce_response_writer import encode_produce_response

VERSIONS = range(supported_range(0)[0], supported_range(0)[1] + 1)  # type: ignore[index]
TOPIC_ID = uuid.UUID("0d7f6a52-3c2b-4f6e-8a11-5be0c3d4e9f2")


def _ok(index: int, base: int, append_time: int = -1) -> dict[str, Any]:
    return {
        "index": index,
        "base_offset": base,
        "log_start_offset": 3,
        "record_errors": [],
        "error_message": None,
        "log_append_time": append_time,
        "error_code": Err.NONE,
    }


SHAPES: dict[str, list[dict[str, Any]]] = {
    "one row": [{"name": "orders", "topic_id": TOPIC_ID, "partition_responses": [_ok(0, 41)]}],
    "log append time": [{"name": "t", "topic_id": TOPIC_ID, "partition_responses": [_ok(2, 7, 1_700_000_000_123)]}],
    "error rows without the optional fields": [
        {
            "name": "ünïcode-topic",
            "topic_id": None,
            "partition_responses": [
                {"index": 0, "error_code": Err.UNKNOWN_TOPIC_OR_PARTITION, "base_offset": -1},
                {"index": 1, "error_code": Err.INVALID_REQUIRED_ACKS, "base_offset": -1},
            ],
        }
    ],
    "record errors and a message": [
        {
            "name": "orders",
            "topic_id": TOPIC_ID,
            "partition_responses": [
                {
                    **_ok(0, -1),
                    "error_code": Err.INVALID_RECORD,
                    "record_errors": [
                        {"batch_index": 0, "batch_index_error_message": "bad"},
                        {"batch_index": 3, "batch_index_error_message": None},
                    ],
                    "error_message": "no record batch in the partition data",
                }
            ],
        }
    ],
    "several topics": [
        {"name": "a", "topic_id": TOPIC_ID, "partition_responses": [_ok(0, 1), _ok(1, 2), _ok(2, 3)]},
        {"name": "b", "topic_id": uuid.UUID(int=5), "partition_responses": []},
    ],
}

HINTED = [
    {
        "name": "orders",
        "topic_id": TOPIC_ID,
        "partition_responses": [
            {
                "index": 0,
                "error_code": Err.NOT_LEADER_OR_FOLLOWER,
                "base_offset": -1,
                "current_leader": {"leader_id": 2, "leader_epoch": 7},
            },
            _ok(1, 9),
        ],
    }
]
NODES = [{"node_id": 2, "host": "127.0.0.1", "port": 19093, "rack": None}]


def _kio(version: int, responses: list[dict[str, Any]], nodes: list[dict[str, Any]] | None = None) -> bytes:
    body: dict[str, Any] = {"responses": responses, "throttle_time": 0}
    if nodes:
        body["node_endpoints"] = nodes
    return codec.encode_response(0, version, 1234, body)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("shape", SHAPES)
def test_matches_kio(version: int, shape: str) -> None:
    rows = SHAPES[shape]
    assert encode_produce_response(version, 1234, rows) == _kio(version, rows)


@pytest.mark.parametrize("version", VERSIONS)
def test_leader_hints_match_kio(version: int) -> None:
    """KIP-951's CurrentLeader and NodeEndpoints (v10+; older versions have no place for them)."""
    assert encode_produce_response(version, 1234, HINTED, NODES) == _kio(version, HINTED, NODES)


def test_a_wrong_encoder_is_caught() -> None:
    """The comparison can fail: a row's base offset changed by one is a different frame."""
    rows = SHAPES["one row"]
    other = [{**rows[0], "partition_responses": [_ok(0, 42)]}]
    assert encode_produce_response(12, 1234, other) != _kio(12, rows)
