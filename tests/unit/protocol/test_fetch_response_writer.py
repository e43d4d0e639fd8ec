"""The hand-written Fetch response encoder writes exactly the bytes kio's encoder writes, for every version
epochlog serves, with records placed as separate buffers."""

from __future__ import annotations

import os
import uuid
from typing import Any

import pytest

from epochlog.client.wire import decode_response
from epochlog.protocol import codec
from epochlog.protocol.api_versions import supported_range
from epochlog.protocol.fetch_response_writer import encode_fetch_response

VERSIONS = range(supported_range(1)[0], supported_range(1)[1] + 1)  # type: ignore[index]
TOPIC_ID = uuid.UUID("6f1c2a4e-7b1d-4c55-9a51-0b3c9e2d7a10")


def _rows(records: list[bytes | None]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for i, r in enumerate(records):
        row: dict[str, Any] = {
            "partition_index": i,
            "error_code": 0,
            "high_watermark": 10 + i,
            "last_stable_offset": 10 + i,
            "log_start_offset": i,
            "aborted_transactions": None,
            "preferred_read_replica": -1,
            "records": r,
        }
        rows.append(row)
    return rows


def _topics(rows: list[dict[str, Any]], extra: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    return [
        {"topic": "orders", "topic_id": TOPIC_ID, "partitions": rows},
        {"topic": "ünïcode-topic", "topic_id": None, "partitions": extra or []},
    ]


def _kio(version: int, topics: list[dict[str, Any]]) -> bytes:
    body = {"throttle_time": 0, "error_code": 0, "session_id": 0, "responses": topics}
    return codec.encode_response(1, version, 77, body)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("sizes", [[0], [5], [300, 0, 70_000], [1 << 20, 17]])
def test_records_as_buffers_match_kio(version: int, sizes: list[int]) -> None:
    records = [os.urandom(n) for n in sizes]
    expected = _kio(version, _topics(_rows(list(records))))
    chunks: list[list[bytes | memoryview]] = []
    placed: list[Any] = []
    for r in records:
        placed.append(len(chunks))
        chunks.append([r[: len(r) // 2], memoryview(r)[len(r) // 2 :]])  # two buffers, like a tail read
    got_buffers = encode_fetch_response(version, 77, _topics(_rows(placed)), chunks)
    got = b"".join(bytes(b) for b in got_buffers)
    assert got == expected
    assert any(isinstance(b, memoryview) for b in got_buffers) == any(sizes)  # records were not copied in
    resp = decode_response(1, version, got[4:], 77)
    assert [bytes(p.records or b"") for p in resp.responses[0].partitions] == records


@pytest.mark.parametrize("version", VERSIONS)
def test_errors_tags_aborted_and_sparse_rows_match_kio(version: int) -> None:
    rows = _rows([b"", b"", b""])
    rows[0]["error_code"] = 74
    rows[1]["diverging_epoch"] = {"epoch": 4, "end_offset": 1234}
    rows[2]["aborted_transactions"] = [
        {"producer_id": 9, "first_offset": 5},
        {"producer_id": 11, "first_offset": 8},
    ]
    sparse = [
        {"partition_index": 3, "error_code": 100, "high_watermark": -1, "records": b"", "aborted_transactions": None}
    ]
    topics = _topics(rows, sparse)
    got = b"".join(bytes(b) for b in encode_fetch_response(version, 77, topics, []))
    assert got == _kio(version, topics)


def test_a_default_diverging_epoch_is_not_written() -> None:
    rows = _rows([b""])
    rows[0]["diverging_epoch"] = {"epoch": -1, "end_offset": -1}
    got = b"".join(bytes(b) for b in encode_fetch_response(12, 77, _topics(rows), []))
    assert got == _kio(12, _topics(rows))


@pytest.mark.parametrize("version", [v for v in VERSIONS if v >= 12])
def test_kip951_current_leader_and_node_endpoints_match_kio(version: int) -> None:
    rows = _rows([b"", b""])
    rows[0]["error_code"] = 6
    rows[0]["current_leader"] = {"leader_id": 2, "leader_epoch": 7}
    nodes = [{"node_id": 2, "host": "127.0.0.1", "port": 19092, "rack": None}]
    got = b"".join(bytes(b) for b in encode_fetch_response(version, 77, _topics(rows), [], node_endpoints=nodes))
    body: dict[str, Any] = {"throttle_time": 0, "error_code": 0, "session_id": 0, "responses": _topics(rows)}
    if version >= 16:
        body["node_endpoints"] = nodes
    assert got == codec.encode_response(1, version, 77, body)
    if version >= 16:
        resp = decode_response(1, version, got[4:], 77)
        assert [(int(n.node_id), n.host, int(n.port)) for n in resp.node_endpoints] == [(2, "127.0.0.1", 19092)]
        assert int(resp.responses[0].partitions[0].current_leader.leader_id) == 2
