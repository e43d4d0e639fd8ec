"""Records spliced into an encoded Fetch response decode exactly like records encoded by kio."""

from __future__ import annotations

import os

import pytest

from epochlog.client.wire import decode_response
from epochlog.protocol import codec
from epochlog.protocol.records_splice import marker, splice


def _body(records: list[bytes]) -> dict:
    return {
        "throttle_time": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {
                "topic": "orders",
                "partitions": [
                    {
                        "partition_index": i,
                        "error_code": 0,
                        "high_watermark": 10,
                        "last_stable_offset": 10,
                        "log_start_offset": 0,
                        "aborted_transactions": None,
                        "preferred_read_replica": -1,
                        "records": r,
                    }
                    for i, r in enumerate(records)
                ],
            }
        ],
    }


@pytest.mark.parametrize("version", [4, 11, 12, 16])
@pytest.mark.parametrize("sizes", [[0], [5], [300, 0, 70_000], [1 << 20, 17]])
def test_spliced_response_decodes_like_the_codec_would(version: int, sizes: list[int]) -> None:
    records = [os.urandom(n) for n in sizes]
    expected = codec.encode_response(1, version, 9, _body(records))
    chunks, placeholders = [], []
    for r in records:
        if r:
            placeholders.append(marker(len(chunks)))
            chunks.append([r[: len(r) // 2], memoryview(r)[len(r) // 2 :]])  # two buffers, like a segment read
        else:
            placeholders.append(b"")
    frame = codec.encode_response(1, version, 9, _body(placeholders))
    got = b"".join(bytes(b) for b in splice(frame, chunks, compact=version >= 12))
    assert got == expected
    resp = decode_response(1, version, got[4:], 9)
    assert [bytes(p.records or b"") for p in resp.responses[0].partitions] == records
