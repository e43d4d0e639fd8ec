"""The replica fetcher's hand-written Fetch v12 response parser reads what kio's encoder writes."""

from __future__ import annotations

import pytest

from epochlog.protocol.codec import encode_response
from epochlog.protocol.errors import InvalidRequest
from epochlog.protocol.fetch_response import EpochEndOffset, parse_fetch_response_v12


def _partition(index: int, **extra: object) -> dict[str, object]:
    base: dict[str, object] = {
        "partition_index": index,
        "error_code": 0,
        "high_watermark": 100 + index,
        "last_stable_offset": 100 + index,
        "log_start_offset": index,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": b"",
    }
    base.update(extra)
    return base


def _frame_after_correlation_id(body: dict[str, object]) -> memoryview:
    frame = encode_response(1, 12, 7, body)
    return memoryview(frame)[8:]  # size prefix and correlation id


def test_fields_records_and_diverging_epoch_are_read() -> None:
    records = bytes(range(256)) * 300
    body = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {
                "topic": "orders",
                "partitions": [
                    _partition(0, records=records),
                    _partition(1, diverging_epoch={"epoch": 3, "end_offset": 42}),
                    _partition(
                        2,
                        error_code=74,
                        records=None,
                        aborted_transactions=[{"producer_id": 9, "first_offset": 5}],
                    ),
                ],
            },
            {"topic": "ünïcode", "partitions": [_partition(5, records=b"xyz")]},
        ],
    }
    answer = parse_fetch_response_v12(_frame_after_correlation_id(body))
    assert [t.topic for t in answer.responses] == ["orders", "ünïcode"]
    p0, p1, p2 = answer.responses[0].partitions
    assert (p0.partition_index, p0.high_watermark, p0.log_start_offset) == (0, 100, 0)
    assert isinstance(p0.records, memoryview) and bytes(p0.records) == records
    assert p0.diverging_epoch is None or p0.diverging_epoch.epoch < 0
    assert p1.diverging_epoch == EpochEndOffset(3, 42)
    assert p2.error_code == 74 and not p2.records
    assert bytes(answer.responses[1].partitions[0].records or b"") == b"xyz"


@pytest.mark.parametrize("cut", [0, 1, 5, 17, 40])
def test_a_truncated_answer_is_an_error_not_a_crash(cut: int) -> None:
    body = {"responses": [{"topic": "t", "partitions": [_partition(0, records=b"r" * 50)]}]}
    frame = _frame_after_correlation_id(body)
    with pytest.raises(InvalidRequest):
        parse_fetch_response_v12(frame[: len(frame) - 60 + cut] if cut else frame[:0])


def test_a_topic_name_that_is_not_utf8_is_an_error_not_a_crash() -> None:
    # header tags, throttle, error, session, one topic named b"\xff"
    frame = memoryview(b"\x00" + b"\x00" * 4 + b"\x00\x00" + b"\x00" * 4 + b"\x02" + b"\x02\xff")
    with pytest.raises(InvalidRequest, match="not UTF-8"):
        parse_fetch_response_v12(frame)
