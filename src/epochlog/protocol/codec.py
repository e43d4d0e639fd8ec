"""Request decoding and response encoding on top of kio, for every API and version.

Requests: the header is parsed by hand (it is tiny and hot), the body by kio's native reader,
falling back to the tolerant reader when kio meets an unknown tagged field. Responses: handlers
describe a response once, as plain dicts/lists with the union of fields over all versions, and
``build`` shapes that into the kio dataclass of the version the client asked for.
"""

from __future__ import annotations

import datetime as dt
import io
import struct
import uuid
from dataclasses import MISSING, dataclass, fields
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    is_optional,
)
from kio.static.protocol import ResponsePayload

from epochlog.protocol.errors import InvalidRequest, MalformedFrame, UnsupportedVersion
from epochlog.protocol.tolerant_reader import tolerant_reader

_HEADER_FIXED = struct.Struct(">hhih")
_I32 = struct.Struct(">i")

API_VERSIONS_KEY = 18


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    size: int  # bytes the header occupies in the frame
    # The connection's security.session.Session (principal, listener, host); None for the broker's own calls.
    session: Any = None
    # Set by a handler whose client went over its quota: the connection is not read for this long (KIP-219).
    throttle_ms: int = 0
    quota_exempt: bool = False  # a follower's fetch: replication has its own throttles, not client quotas


@cache
def request_class(api_key: int, version: int) -> type:
    # A plain class, not kio's RequestPayload protocol: callers build the version's dataclass by keyword,
    # and the protocol declares no fields.
    return load_request_schema(api_key, version)


@cache
def response_class(api_key: int, version: int) -> type[ResponsePayload]:
    return load_response_schema(api_key, version)


@cache
def _fast_reader(cls: type) -> Any:
    return entity_reader(cls)


@cache
def _writer(cls: type) -> Any:
    return entity_writer(cls)


def uvarint(n: int) -> bytes:
    """An unsigned varint (compact lengths and tag counts of flexible versions)."""
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def read_varint(buf: Any, pos: int) -> tuple[int, int]:
    """Unsigned varint at ``pos``: (value, new position)."""
    result = 0
    shift = 0
    n = len(buf)
    while True:
        if pos >= n:
            raise InvalidRequest("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 35:
            raise InvalidRequest("varint too long")


def skip_tagged_fields(buf: Any, pos: int) -> int:
    count, pos = read_varint(buf, pos)
    for _ in range(count):
        _tag, pos = read_varint(buf, pos)
        size, pos = read_varint(buf, pos)
        pos += size
    if pos > len(buf):
        raise InvalidRequest("tagged fields run past the end of the frame")
    return pos


@cache
def is_flexible_request(api_key: int, version: int) -> bool:
    return load_request_schema(api_key, version).__flexible__


def parse_header(frame: memoryview) -> RequestHeader:
    """Parse a request header; raises MalformedFrame when even that is impossible."""
    if len(frame) < 10:
        raise MalformedFrame(f"frame of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id, client_len = _HEADER_FIXED.unpack_from(frame, 0)
    pos = 10
    client_id: str | None = None
    if client_len >= 0:
        if pos + client_len > len(frame):
            raise MalformedFrame("client id runs past the end of the frame")
        client_id = bytes(frame[pos : pos + client_len]).decode("utf-8", "replace")
        pos += client_len
    elif client_len != -1:
        raise MalformedFrame(f"negative client id length {client_len}")
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def finish_header(frame: memoryview, header: RequestHeader) -> None:
    """Skip the header's tagged fields when the request version is flexible (header v2)."""
    try:
        flexible = is_flexible_request(header.api_key, header.api_version)
    except Exception as e:
        raise UnsupportedVersion(f"api {header.api_key} v{header.api_version} is not known") from e
    if flexible:
        header.size = skip_tagged_fields(frame, header.size)


def decode_body(frame: memoryview, header: RequestHeader) -> Any:
    """The request body as a kio object. Always through the length-checking reader: kio's native reader
    aborts the process on an absurd array length (see protocol/tolerant_reader.py)."""
    cls = request_class(header.api_key, header.api_version)
    buf = frame[header.size :].toreadonly() if not frame.readonly else frame[header.size :]
    try:
        obj, _ = tolerant_reader(cls)(buf, 0)
        return obj
    except Exception as e:
        raise InvalidRequest(f"cannot decode {cls.__name__}: {type(e).__name__}: {e}") from e


# -- responses ---------------------------------------------------------------------------


def response_header(correlation_id: int, flexible: bool) -> bytes:
    return _I32.pack(correlation_id) + (b"\x00" if flexible else b"")


def encode_response(api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
    """A whole response frame (size prefix, header, body) for ``body`` shaped by ``build``."""
    cls = response_class(api_key, version)
    obj = body if isinstance(body, cls) else build(cls, body)
    out = io.BytesIO()
    out.write(b"\x00\x00\x00\x00")
    # ApiVersions responses always use header v0 so old clients can read them.
    flexible = bool(cls.__flexible__) and api_key != API_VERSIONS_KEY
    out.write(response_header(correlation_id, flexible))
    _writer(cls)(out, obj)
    data = out.getbuffer()
    _I32.pack_into(data, 0, len(data) - 4)
    del data
    return out.getvalue()


NO_TIME = dt.datetime.fromtimestamp(-0.001, tz=dt.UTC)  # a timestamp field's -1 ("none") as kio writes it


@dataclass(frozen=True, slots=True)
class _FieldPlan:
    name: str
    kind: str  # "entity", "entities", "error", "ms32", "ms64", "datetime", "uuid", "plain", "array"
    nested: type | None
    optional: bool
    default: Any  # value used when the handler did not give the field; MISSING = derive


@cache
def _plan(cls: type) -> tuple[_FieldPlan, ...]:
    plans = []
    for f in fields(cls):
        kind_info = classify_field(f)
        ktype = f.metadata.get("kafka_type")
        nested = None
        if isinstance(kind_info, EntityTupleField):
            kind, nested = "entities", kind_info.type_
        elif isinstance(kind_info, EntityField):
            kind, nested = "entity", kind_info.type_
        elif isinstance(kind_info, PrimitiveTupleField):
            kind = "array"
        elif ktype == "error_code":
            kind = "error"
        elif ktype == "timedelta_i32":
            kind = "ms32"
        elif ktype == "timedelta_i64":
            kind = "ms64"
        elif ktype == "datetime_i64":
            kind = "datetime"
        elif ktype == "uuid":
            kind = "uuid"
        else:
            kind = "plain"
        default: Any = f.default if f.default is not MISSING else MISSING
        if default is MISSING and callable(f.default_factory):
            default = f.default_factory()
        plans.append(_FieldPlan(f.name, kind, nested, is_optional(f), default))
    return tuple(plans)


def _neutral(plan: _FieldPlan, cls: type) -> Any:
    if plan.optional:
        return None
    if plan.kind in ("entities", "array"):
        return ()
    if plan.kind == "error":
        return ErrorCode.none
    if plan.kind in ("ms32", "ms64"):
        return dt.timedelta(0)
    if plan.kind == "uuid":
        return uuid.UUID(int=0)
    if plan.kind == "entity":
        return build(plan.nested, {})  # type: ignore[arg-type]
    ftype = {f.name: f for f in fields(cls)}[plan.name].metadata.get("kafka_type")
    if ftype == "string":
        return ""
    if ftype in ("bytes", "records"):
        return b""
    if ftype == "bool":
        return False
    return 0


def _convert(plan: _FieldPlan, value: Any) -> Any:
    kind = plan.kind
    if value is None:
        return None
    if kind == "error":
        return value if isinstance(value, ErrorCode) else ErrorCode(int(value))
    if kind in ("ms32", "ms64"):
        return value if isinstance(value, dt.timedelta) else dt.timedelta(milliseconds=int(value))
    if kind == "datetime":
        if isinstance(value, dt.datetime):
            return value
        if value < 0:
            # Kafka's -1 "no time": null where the field may be null, else the instant 1 ms before the epoch,
            # which kio writes as -1 (DescribeTransactions' start time of an id with no transaction).
            return None if plan.optional else NO_TIME
        return dt.datetime.fromtimestamp(value / 1000, tz=dt.UTC)
    if kind == "entities":
        return tuple(build(plan.nested, v) for v in value)  # type: ignore[arg-type]
    if kind == "entity":
        return build(plan.nested, value)  # type: ignore[arg-type]
    if kind == "array":
        return tuple(value)
    return value


def build(cls: type, data: Any) -> Any:
    """Shape ``data`` (a dict, or an object with attributes) into kio's ``cls``.

    Keys the version does not have are ignored; fields the data does not give take the
    schema default or a neutral zero, so one description serves every version.
    """
    if isinstance(data, cls):
        return data
    get = data.get if isinstance(data, dict) else (lambda k, d=None: getattr(data, k, d))
    values: dict[str, Any] = {}
    for plan in _plan(cls):
        v = get(plan.name, MISSING)
        if v is MISSING:
            if plan.default is not MISSING:
                continue
            v = _neutral(plan, cls)
            values[plan.name] = v
            continue
        if v is None and not plan.optional:
            # Nullable in some versions, not in this one: send the neutral value.
            values[plan.name] = _neutral(plan, cls)
            continue
        values[plan.name] = _convert(plan, v)
    return cls(**values)


def error_code(value: int) -> ErrorCode:
    return ErrorCode(int(value))
