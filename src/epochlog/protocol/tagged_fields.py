"""Pieces of flexible (KIP-482) message encoding that the hand-written response encoders share: one tagged
field, a compact string, and KIP-951's NodeEndpoints, which Produce (v10+) and Fetch (v16+) responses
carry as tag 0 of the top level."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from epochlog.protocol.codec import uvarint

_I32 = struct.Struct(">i")


def tag(number: int, payload: bytes) -> bytes:
    return uvarint(number) + uvarint(len(payload)) + payload


def compact_string(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    b = s.encode()
    return uvarint(len(b) + 1) + b


def top_level_tags(node_endpoints: Sequence[dict[str, Any]]) -> bytes:
    """The top level's tagged fields: NodeEndpoints when there are any, else none."""
    if not node_endpoints:
        return b"\x00"
    body = bytearray(uvarint(len(node_endpoints) + 1))
    for n in node_endpoints:
        body += _I32.pack(n["node_id"]) + compact_string(n["host"]) + _I32.pack(n["port"])
        body += compact_string(n.get("rack")) + b"\x00"
    return b"\x01" + tag(0, bytes(body))
