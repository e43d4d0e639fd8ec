"""An array length prefix is never trusted: kio's native reader would allocate what it claims and abort."""

from __future__ import annotations

import subprocess
import sys

import pytest

from epochlog.protocol.codec import RequestHeader, decode_body
from epochlog.protocol.errors import InvalidRequest

HUGE_COMPACT = bytes([0xF0, 0xFF, 0xFF, 0xFF, 0x0F])  # unsigned varint 4294967280
HUGE_LEGACY = b"\x7f\xff\xff\xf0"


@pytest.mark.parametrize(
    ("api_key", "version", "body"),
    [
        (20, 5, HUGE_COMPACT + b"\x00" * 30),  # DeleteTopics: a compact array of strings (native path)
        (20, 3, HUGE_LEGACY + b"\x00" * 30),  # the same, legacy array
        (3, 9, HUGE_COMPACT + b"\x00" * 30),  # Metadata: an array of entities
        (43, 2, b"\x00" + HUGE_COMPACT + b"\x00" * 30),  # ElectLeaders
    ],
)
def test_absurd_array_length_is_an_invalid_request(api_key: int, version: int, body: bytes) -> None:
    header = RequestHeader(api_key, version, 1, "t", 0)
    with pytest.raises(InvalidRequest, match="claims"):
        decode_body(memoryview(body), header)


def test_absurd_array_length_does_not_abort_the_process() -> None:
    # In a child process, so that a regression shows up as a failed test rather than a dead test run.
    code = (
        "from epochlog.protocol.codec import RequestHeader, decode_body\n"
        "from epochlog.protocol.errors import InvalidRequest\n"
        "try:\n"
        f"    decode_body(memoryview({HUGE_COMPACT + bytes(30)!r}), RequestHeader(20, 5, 1, 't', 0))\n"
        "except InvalidRequest:\n"
        "    print('refused')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "refused", out.stderr[-500:]


@pytest.mark.parametrize(
    ("api_key", "version", "body"),
    [
        (10, 5, b"\x00\x00\x00"),  # FindCoordinator v5: coordinator_keys (strings) null; found by the fuzzer
        (19, 5, b"\x00" + b"\x00\x00\x00\x00" + b"\x00\x00"),  # CreateTopics v5: topics (entities) null
        (20, 3, b"\xff\xff\xff\xff" + b"\x00\x00\x00\x00"),  # DeleteTopics v3: a legacy null array of strings
    ],
)
def test_null_for_an_array_that_is_not_nullable_is_an_invalid_request(api_key: int, version: int, body: bytes) -> None:
    # The native reader hands back None, which every handler would then iterate (a TypeError in the broker).
    with pytest.raises(InvalidRequest, match="not nullable"):
        decode_body(memoryview(body), RequestHeader(api_key, version, 1, "t", 0))


def test_null_for_a_nullable_array_is_kept() -> None:
    # Metadata v9: topics null means "all topics"
    req = decode_body(memoryview(b"\x00" + b"\x01\x00\x00\x00"), RequestHeader(3, 9, 1, "t", 0))
    assert req.topics is None
