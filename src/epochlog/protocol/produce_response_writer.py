"""A hand-written Produce response encoder (v3-v13).

Every acks=1 and acks=all write is answered with one of these: with producers' ~1 MiB batches that is one
answer per megabyte on a single broker, and on an RF=3 leader building kio's dataclasses from the
handler's rows and encoding them took ~13% of the Python time (cProfile, 2026-11-23). The fields are few
and fixed, so they are packed directly. tests/unit/protocol/test_produce_response_writer.py checks the
bytes against kio's encoder for every version served.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from epochlog.protocol.codec import uvarint
from epochlog.protocol.tagged_fields import compact_string, tag, top_level_tags

_I32 = struct.Struct(">i")
_ROW = struct.Struct(">ihq")  # index, error_code, base_offset
_I64 = struct.Struct(">q")
_LEADER = struct.Struct(">ii")
_ZERO_UUID = bytes(16)


def _string(s: str | None, flexible: bool) -> bytes:
    if flexible:
        return compact_string(s)
    if s is None:
        return b"\xff\xff"
    b = s.encode()
    return len(b).to_bytes(2, "big") + b


def _count(n: int, flexible: bool) -> bytes:
    return uvarint(n + 1) if flexible else _I32.pack(n)


def _append_time(value: Any) -> int:
    """The handler gives milliseconds, -1 (or None) for "not log append time"."""
    return -1 if value is None or value < 0 else int(value)


def encode_produce_response(
    version: int,
    correlation_id: int,
    responses: Sequence[dict[str, Any]],
    node_endpoints: Sequence[dict[str, Any]] = (),
    throttle_time_ms: int = 0,
) -> bytes:
    """The whole frame, size prefix first, for the handler's topic rows (``name`` or ``topic_id``, and
    ``partition_responses``); fields a row leaves out take the schema's defaults."""
    flexible = version >= 9
    out = bytearray(b"\x00\x00\x00\x00")
    out += _I32.pack(correlation_id)
    if flexible:
        out += b"\x00"
    out += _count(len(responses), flexible)
    for topic in responses:
        if version >= 13:
            tid = topic.get("topic_id")
            out += tid.bytes if tid is not None else _ZERO_UUID
        else:
            out += _string(topic.get("name") or "", flexible)
        rows = topic["partition_responses"]
        out += _count(len(rows), flexible)
        for row in rows:
            out += _ROW.pack(row["index"], int(row["error_code"]), row["base_offset"])
            out += _I64.pack(_append_time(row.get("log_append_time")))
            if version >= 5:
                out += _I64.pack(row.get("log_start_offset", -1))
            if version >= 8:
                errors = row.get("record_errors") or ()
                out += _count(len(errors), flexible)
                for e in errors:
                    out += _I32.pack(e["batch_index"]) + _string(e.get("batch_index_error_message"), flexible)
                    if flexible:
                        out += b"\x00"
                out += _string(row.get("error_message"), flexible)
            if flexible:
                leader = row.get("current_leader")
                if version >= 10 and leader is not None and (leader["leader_id"], leader["leader_epoch"]) != (-1, -1):
                    out += b"\x01" + tag(0, _LEADER.pack(leader["leader_id"], leader["leader_epoch"]) + b"\x00")
                else:
                    out += b"\x00"
        if flexible:
            out += b"\x00"
    out += _I32.pack(throttle_time_ms)
    if flexible:
        out += top_level_tags(node_endpoints if version >= 10 else ())
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)
