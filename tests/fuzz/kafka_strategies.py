"""Hypothesis strategies for Kafka requests, built by walking kio's generated request dataclasses.

Every request class kio has for an API key and version the broker serves (protocol/api_versions.py) is a
frozen dataclass whose fields carry their Kafka type in ``metadata["kafka_type"]``; walking them gives a
strategy of valid-shaped requests, which kio's own writer encodes. ``mutated_frame`` then damages the
encoded bytes the ways a broken or hostile client would.
"""

from __future__ import annotations

import datetime as dt
import io
import random
import struct
import uuid
from dataclasses import dataclass, fields, is_dataclass
from functools import cache
from typing import Any

from hypothesis import strategies as st
from kio.serial import entity_writer
from kio.serial._introspect import EntityField, EntityTupleField, PrimitiveTupleField, classify_field, is_optional

from epochlog.protocol.api_versions import SERVED, kio_range
from epochlog.protocol.codec import request_class
from epochlog.protocol.records import Record, build_batch

_BOUNDS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


@dataclass(frozen=True)
class Names:
    """Names that exist on the broker under test, so requests reach past the "unknown topic" answers."""

    topics: tuple[str, ...]
    groups: tuple[str, ...]


def served_versions() -> list[tuple[int, int]]:
    return [(key, v) for key in sorted(SERVED) for v in range(kio_range(key)[0], kio_range(key)[1] + 1)]


def _int(bits: int) -> st.SearchStrategy[int]:
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    edges = [v for v in (lo, lo + 1, -2, -1, 0, 1, 2, 127, 128, 255, 32767, 65535, 2**31 - 1, hi) if lo <= v <= hi]
    return st.one_of(st.integers(-1, 5), st.sampled_from(edges), st.integers(lo, hi))


def _string(field_name: str, names: Names) -> st.SearchStrategy[str]:
    pool: tuple[str, ...] = ()
    if "topic" in field_name or field_name in ("name", "names"):
        pool = names.topics
    elif "group" in field_name:
        pool = names.groups
    choices = [st.text(max_size=12), st.just(""), st.text(alphabet="abc-._", min_size=1, max_size=8)]
    if pool:
        choices = [st.sampled_from(pool), st.sampled_from(pool), *choices]
    return st.one_of(choices)


def _records() -> st.SearchStrategy[bytes]:
    pairs = st.lists(
        st.tuples(st.one_of(st.none(), st.binary(max_size=8)), st.one_of(st.none(), st.binary(max_size=32))),
        min_size=1,
        max_size=4,
    )

    @st.composite
    def batch(draw: st.DrawFn) -> bytes:
        recs = draw(pairs)
        now = 1_700_000_000_000 + draw(st.integers(0, 10**9))
        out = build_batch(
            [Record(i, now, k, v) for i, (k, v) in enumerate(recs)],
            compression=draw(st.sampled_from([0, 0, 0, 1, 3, 4])),
            producer_id=draw(st.sampled_from([-1, -1, 0, 1, 2**40])),
            producer_epoch=draw(st.sampled_from([-1, 0, 1])),
            base_sequence=draw(st.sampled_from([-1, 0, 1, 5])),
        )
        return out * draw(st.sampled_from([1, 1, 1, 2]))

    return st.one_of(batch(), st.binary(max_size=80))


def _primitive(field: Any, names: Names, optional: bool) -> st.SearchStrategy[Any]:
    ktype = field.metadata.get("kafka_type")
    s: st.SearchStrategy[Any]
    if ktype in _BOUNDS:
        s = _int(_BOUNDS[ktype])
    elif ktype in ("timedelta_i32", "timedelta_i64"):
        # Long-poll waits and timeouts are honoured as given, as Kafka does; keep them short so every
        # unmutated request must be answered within the test's bound.
        s = st.integers(0, 300).map(lambda ms: dt.timedelta(milliseconds=ms))
    elif ktype == "bool":
        s = st.booleans()
    elif ktype == "string":
        s = _string(field.name, names)
    elif ktype == "bytes":
        s = st.binary(max_size=48)
    elif ktype == "records":
        s = _records()
    elif ktype == "uuid":
        s = st.one_of(st.just(uuid.UUID(int=0)), st.uuids())
    elif ktype == "float64":
        s = st.floats(allow_nan=False)
    else:
        raise AssertionError(f"no strategy for kafka_type {ktype!r} ({field.name})")
    return st.one_of(st.none(), s) if optional else s


@cache
def entity_strategy(cls: type, names: Names) -> st.SearchStrategy[Any]:
    parts: dict[str, st.SearchStrategy[Any]] = {}
    for f in fields(cls):
        kind = classify_field(f)
        optional = is_optional(f)
        s: st.SearchStrategy[Any]
        if isinstance(kind, EntityTupleField):
            s = st.lists(st.deferred(lambda t=kind.type_: entity_strategy(t, names)), max_size=3).map(tuple)
        elif isinstance(kind, EntityField):
            s = st.deferred(lambda t=kind.type_: entity_strategy(t, names))
        elif isinstance(kind, PrimitiveTupleField):
            s = st.lists(_primitive(f, names, False), max_size=4).map(tuple)
        else:
            s = _primitive(f, names, False)
        if optional:
            s = st.one_of(st.none(), s)
        parts[f.name] = s
    return st.builds(cls, **parts)


def encode_body(obj: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(obj))(out, obj)
    return out.getvalue()


def header_bytes(api_key: int, version: int, correlation_id: int, client_id: bytes = b"fuzz") -> bytes:
    head = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    flexible = bool(request_class(api_key, version).__flexible__) if (api_key, version) in _SERVED_SET else False
    return head + (b"\x00" if flexible else b"")


_SERVED_SET = frozenset(served_versions())


@dataclass
class Frame:
    """One frame as it goes on the wire, and what the sender may expect back."""

    data: bytes  # size prefix included
    correlation_id: int
    api_key: int
    version: int
    mutations: tuple[str, ...]
    stream_ends: bool  # the size prefix claims more than follows, or is out of range: nothing after it is a frame

    @property
    def clean(self) -> bool:
        return not self.mutations


@st.composite
def request_frame(
    draw: st.DrawFn, names: Names, correlation_id: int, api: tuple[int, int] | None = None
) -> Frame:
    key, version = api or draw(st.sampled_from(served_versions()))
    obj = draw(entity_strategy(request_class(key, version), names))
    body = header_bytes(key, version, correlation_id) + encode_body(obj)
    return Frame(struct.pack(">i", len(body)) + body, correlation_id, key, version, (), False)


_HUGE32 = [0x7FFFFFFF, 0xFFFFFFFF, 0x80000000, 0x40000000, 0x00FFFFFF, 0x7FFFFFF0]
_VARINT_HUGE = [b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\xff\x01", b"\x80\x80\x80\x80\x80\x80"]
MUTATIONS = ("bitflip", "truncate", "length32", "varint", "splice", "insert", "header-key", "header-version",
             "trailing", "claims-more", "huge-size", "byte-set")  # fmt: skip


def mutate(rng: random.Random, frame: Frame, pool: list[Frame]) -> Frame:
    """The frame with one to three byte-level mutations, drawn from ``rng`` (seeded, so a run replays). The
    size prefix is recomputed unless a mutation is about the size prefix itself."""
    body = bytearray(frame.data[4:])
    applied: list[str] = []
    size_override: int | None = None
    for _ in range(rng.randint(1, 3)):
        op = rng.choice(MUTATIONS)
        n = len(body)
        if n == 0 and op not in ("insert", "trailing", "claims-more", "huge-size", "splice"):
            continue
        if op == "bitflip":
            for _ in range(rng.randint(1, 4)):
                body[rng.randrange(n)] ^= 1 << rng.randrange(8)
        elif op == "byte-set":
            body[rng.randrange(n)] = rng.choice([0x00, 0xFF, 0x7F, 0x80, 0x01])
        elif op == "truncate":
            del body[rng.randint(0, n) :]
        elif op == "length32" and n >= 4:
            pos = rng.randint(0, n - 4)
            body[pos : pos + 4] = struct.pack(">I", rng.choice(_HUGE32))
        elif op == "varint":
            pos = rng.randrange(n)
            v = rng.choice(_VARINT_HUGE)
            body[pos : pos + len(v)] = v
        elif op == "splice":
            other = rng.choice(pool).data[4:]
            body = body[: rng.randint(0, n)] + other[rng.randint(0, len(other)) :]
        elif op == "insert":
            pos = rng.randint(0, n)
            body[pos:pos] = rng.randbytes(rng.randint(1, 16))
        elif op == "header-key" and n >= 2:
            key = rng.choice(sorted(SERVED)) if rng.random() < 0.7 else rng.randint(-32768, 32767)
            body[0:2] = struct.pack(">h", key)
        elif op == "header-version" and n >= 4:
            body[2:4] = struct.pack(">h", rng.randint(-2, 20) if rng.random() < 0.7 else rng.randint(-32768, 32767))
        elif op == "trailing":
            body += rng.randbytes(rng.randint(1, 32))
        elif op == "claims-more":
            size_override = len(body) + rng.randint(1, 200_000)
        elif op == "huge-size":
            size_override = rng.choice([-1, -(2**31), 2**31 - 1, 200 * 1024 * 1024])
        else:
            continue
        applied.append(op)
    size = len(body) if size_override is None else size_override
    data = struct.pack(">i", size) + bytes(body)
    return Frame(data, frame.correlation_id, frame.api_key, frame.version, tuple(applied), size_override is not None)


def is_entity(obj: Any) -> bool:
    return is_dataclass(obj)
