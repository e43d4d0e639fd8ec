"""A Fetch request seen through its KIP-227 fetch session: the partitions to read (the request's own, or
its session's), and the answer cut down to what the session says must be sent. The rules are the
session cache's (replication/fetch_sessions); this translates between them and the wire."""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from epochlog.clock import now_ms
from epochlog.replication.fetch_sessions import (
    FINAL_EPOCH,
    Answer,
    Context,
    Key,
    Outcome,
    SessionError,
    Sessionless,
)

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker


@dataclass(frozen=True)
class SessionTopic:
    """A topic to read, grouped from the session's partitions (the shape the reading code walks)."""

    topic: str | None
    topic_id: uuid.UUID | None
    partitions: tuple[Any, ...]


@dataclass(frozen=True)
class _Params:
    topic: str | None
    topic_id: uuid.UUID | None
    partition: Any  # the request's FetchPartition: offset, max bytes, epochs


def open_context(broker: Broker, req: Any, version: int, replica_id: int) -> tuple[Context | None, Any]:
    """The request's session context (None before Fetch v7) and the request to read: ``req`` itself, or a
    copy whose topics are the session's partitions."""
    if version < 7:
        return None, req
    ids = version >= 13
    fetch_data: list[tuple[Key, _Params]] = []
    for t in req.topics:
        name = getattr(t, "topic", None)
        topic_id = getattr(t, "topic_id", None)
        for p in t.partitions:
            fetch_data.append(((topic_id if ids else name, int(p.partition)), _Params(name, topic_id, p)))
    forget: list[Key] = [
        (getattr(f, "topic_id", None) if ids else getattr(f, "topic", None), int(p))
        for f in (getattr(req, "forgotten_topics_data", None) or ())
        for p in f.partitions
    ]
    session_id, epoch = int(getattr(req, "session_id", 0)), int(getattr(req, "session_epoch", FINAL_EPOCH))
    ctx = broker.fetch_sessions.new_context(ids, session_id, epoch, replica_id >= 0, fetch_data, forget, now_ms())
    if isinstance(ctx, SessionError):
        return ctx, dataclasses.replace(req, topics=())
    if isinstance(ctx, Sessionless) and session_id == 0:
        return ctx, req  # the common sessionless case (followers): read the request as it came
    groups: list[tuple[str | None, uuid.UUID | None, list[Any]]] = []
    for _key, params in ctx.partitions:
        if groups and groups[-1][0] == params.topic and groups[-1][1] == params.topic_id:
            groups[-1][2].append(params.partition)
        else:
            groups.append((params.topic, params.topic_id, [params.partition]))
    topics = tuple(SessionTopic(name, topic_id, tuple(parts)) for name, topic_id, parts in groups)
    return ctx, dataclasses.replace(req, topics=topics)


def _records_size(row: dict[str, Any], spliced: list[list[Any]]) -> int:
    records = row.get("records")
    if isinstance(records, int):  # an index into spliced (0 is one too)
        return sum(len(c) for c in spliced[records])
    return len(records) if records else 0


def cut_to_session(
    broker: Broker, ctx: Context | None, topics_out: list[dict[str, Any]], spliced: list[list[Any]]
) -> tuple[list[dict[str, Any]], int, int]:
    """The rows to send, the top-level error and the session id, once every partition has been read."""
    if ctx is None or isinstance(ctx, Sessionless):
        return topics_out, 0, 0
    if isinstance(ctx, SessionError):
        return [], ctx.error, 0
    rows = [(topic, row) for topic in topics_out for row in topic["partitions"]]
    outcomes = [
        (
            key,
            Outcome(
                _records_size(row, spliced),
                row.get("high_watermark", -1),
                row.get("log_start_offset", -1),
                row.get("error_code", 0),
                row.get("diverging_epoch") is not None,
                row.get("preferred_read_replica", -1),
            ),
        )
        for (key, _params), (_topic, row) in zip(ctx.partitions, rows, strict=True)
    ]
    answer: Answer = broker.fetch_sessions.answer(ctx, outcomes, now_ms())
    if answer.error:
        return [], answer.error, answer.session_id
    kept: list[dict[str, Any]] = []
    for (topic, row), include in zip(rows, answer.include, strict=True):
        if not include:
            continue
        if not kept or kept[-1]["source"] is not topic:
            kept.append({**topic, "partitions": [], "source": topic})
        kept[-1]["partitions"].append(row)
    for topic in kept:
        del topic["source"]
    return kept, 0, answer.session_id
