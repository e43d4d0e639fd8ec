"""A bounds-checked reader over one Kafka message body, for the hand-written hot-path parsers.

kio decodes every field and copies every bytes field; the Produce request and the replica Fetch response
carry a megabyte of records each, which these parsers hand out as memoryview slices instead.
"""

from __future__ import annotations

import struct

from epochlog.protocol.codec import read_varint
from epochlog.protocol.errors import InvalidRequest

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")


class Cursor:
    __slots__ = ("buf", "flexible", "pos", "what")

    def __init__(self, buf: memoryview, flexible: bool, what: str, pos: int = 0) -> None:
        self.buf = buf
        self.pos = pos
        self.flexible = flexible
        self.what = what

    def need(self, n: int) -> None:
        if self.pos + n > len(self.buf) or n < 0:
            raise InvalidRequest(f"{self.what} truncated at byte {self.pos} (needs {n} more)")

    def i16(self) -> int:
        self.need(2)
        v: int = _H.unpack_from(self.buf, self.pos)[0]
        self.pos += 2
        return v

    def i32(self) -> int:
        self.need(4)
        v: int = _I.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return v

    def i64(self) -> int:
        self.need(8)
        v: int = _Q.unpack_from(self.buf, self.pos)[0]
        self.pos += 8
        return v

    def varint(self) -> int:
        v, self.pos = read_varint(self.buf, self.pos)
        return v

    def length(self) -> int:
        """Array/string/bytes length; -1 for null."""
        if self.flexible:
            return self.varint() - 1
        return self.i32()

    def count(self, limit: int) -> int:
        """An array length that a body of this size could hold; -1 for null."""
        n = self.length()
        if n > limit:
            raise InvalidRequest(f"{self.what}: array of {n} entries in {limit} bytes")
        return n

    def string(self) -> str | None:
        n = self.varint() - 1 if self.flexible else self.i16()
        if n < 0:
            return None
        self.need(n)
        try:
            s = bytes(self.buf[self.pos : self.pos + n]).decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidRequest(f"{self.what}: string at byte {self.pos} is not UTF-8") from e
        self.pos += n
        return s

    def raw(self, n: int) -> memoryview:
        self.need(n)
        v = self.buf[self.pos : self.pos + n]
        self.pos += n
        return v

    def tags(self) -> dict[int, memoryview]:
        if not self.flexible:
            return {}
        out = {}
        for _ in range(self.varint()):
            tag = self.varint()
            size = self.varint()
            out[tag] = self.raw(size)
        return out
