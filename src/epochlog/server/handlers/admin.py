"""CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders and the configs APIs (Describe, Alter,
IncrementalAlter)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import TYPE_CHECKING, Any

from epochlog.protocol.codec import RequestHeader, decode_body
from epochlog.protocol.errors import Err
from epochlog.server.topic_configs import (
    ConfigEntry,
    broker_config_entries,
    default_broker_config_entries,
    effective_topic_config_entries,
)

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker

log = logging.getLogger("epochlog.admin")

FORWARD_RETRY_S = 0.25

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4


def creatable_topic(t: Any) -> tuple[dict[str, str], dict[str, Any]]:
    """One CreateTopics entry: its configs, and its answer row before the outcome is known."""
    configs = {c.name: c.value for c in t.configs if c.value is not None}
    row: dict[str, Any] = {
        "name": t.name,
        "error_message": None,
        "num_partitions": -1,
        "replication_factor": -1,
        "configs": None,
    }
    return configs, row


# Topic changes are the controller's: a broker forwards them and answers once its own metadata shows the
# outcome, so the client's next request sees it (Kafka's forwarding, KIP-590).


def handle_create_topics(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = decode_body(frame, header)
    names = None if getattr(req, "validate_only", False) else [t.name for t in req.topics]
    return _forward(broker, header, req, names, True)


def handle_delete_topics(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = decode_body(frame, header)
    names = [t.name for t in req.topics if t.name] if header.api_version >= 6 else list(req.topic_names)
    return _forward(broker, header, req, names, False)


def handle_create_partitions(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    return _forward(broker, header, decode_body(frame, header), None, True)


def handle_elect_leaders(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    return _forward(broker, header, decode_body(frame, header), None, True)


def handle_describe_configs(broker: Broker, header: RequestHeader, frame: memoryview) -> dict[str, Any]:
    req = decode_body(frame, header)
    synonyms = bool(getattr(req, "include_synonyms", False))
    docs = bool(getattr(req, "include_documentation", False))
    dynamic = broker.dynamic_broker_configs()
    results = []
    for r in req.resources:
        row: dict[str, Any] = {
            "resource_type": r.resource_type,
            "resource_name": r.resource_name,
            "error_code": Err.NONE,
            "error_message": None,
            "configs": [],
        }
        keys = set(r.configuration_keys) if r.configuration_keys else None
        entries: list[ConfigEntry] = []
        if r.resource_type == RESOURCE_TOPIC:
            info = broker.image.topics.get(r.resource_name)
            if info is None:
                row.update(
                    error_code=Err.UNKNOWN_TOPIC_OR_PARTITION, error_message=f"topic {r.resource_name!r} does not exist"
                )
            else:
                entries = effective_topic_config_entries(broker.config, info.configs, dynamic)
        elif r.resource_type == RESOURCE_BROKER:
            if r.resource_name == "":
                entries = default_broker_config_entries(dynamic)
            elif r.resource_name == str(broker.config.node_id):
                entries = broker_config_entries(broker.config, dynamic)
            else:
                row.update(
                    error_code=Err.INVALID_REQUEST,
                    error_message=f"Unexpected broker id, expected {broker.config.node_id} or empty string, "
                    f"but received {r.resource_name}",
                )
        else:
            row.update(error_code=Err.INVALID_REQUEST, error_message=f"resource type {r.resource_type} unsupported")
        row["configs"] = [_describe_row(e, synonyms, docs) for e in entries if keys is None or e.name in keys]
        results.append(row)
    return {"throttle_time": 0, "results": results}


def _describe_row(e: ConfigEntry, synonyms: bool, docs: bool) -> dict[str, Any]:
    return {
        "name": e.name,
        "value": e.value,
        "read_only": e.read_only,
        "config_source": e.source,
        "is_sensitive": False,
        "synonyms": [{"name": n, "value": v, "source": src} for n, v, src in e.synonyms] if synonyms else [],
        "config_type": e.config_type,
        "documentation": e.doc if docs else None,
    }


def _config_ops(header: RequestHeader, req: Any) -> list[tuple[tuple[int, str], list[tuple[str, int, str | None]]]]:
    """(resource, [(name, op, value)]) of an AlterConfigs (op SET) or IncrementalAlterConfigs request."""
    incremental = header.api_key == 44
    return [
        (
            (int(r.resource_type), r.resource_name),
            [(c.name, int(c.config_operation) if incremental else 0, c.value) for c in r.configs],
        )
        for r in req.resources
    ]


def _config_view(broker: Broker, resource: tuple[int, str]) -> dict[str, str] | None:
    rtype, name = resource
    if rtype == RESOURCE_TOPIC:
        info = broker.image.topics.get(name)
        return dict(info.configs) if info is not None else None
    return dict(broker.image.cluster.broker_configs.get(name, {}))


def _expected(
    before: dict[str, str], ops: list[tuple[str, int, str | None]], incremental: bool
) -> dict[str, str] | None:
    """What the resource's dynamic configs become, if this broker can tell (APPEND/SUBTRACT: it cannot)."""
    out = dict(before) if incremental else {}
    for name, op, value in ops:
        if op == 1:
            out.pop(name, None)
        elif op == 0 and value is not None:
            out[name] = value.strip()
        else:
            return None
    return out


def handle_alter_configs(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    """AlterConfigs and IncrementalAlterConfigs: the controller decides (validates, records); the answer
    waits until this broker's metadata shows the change, so a DescribeConfigs sent next sees it."""
    req = decode_body(frame, header)
    return _alter_configs(broker, header, req)


def _wrong_broker(broker: Broker, r: Any) -> str | None:
    """As Kafka's brokers: a broker's own configs are altered through that broker (clients send them there);
    only the cluster-wide default (empty name) may go through any broker."""
    if int(r.resource_type) != RESOURCE_BROKER or not r.resource_name:
        return None
    if not r.resource_name.isdigit():
        return f"Node id must be an integer, but it is: {r.resource_name}"
    if int(r.resource_name) != broker.config.node_id:
        return f"Unexpected broker id, expected {broker.config.node_id}, but received {r.resource_name}"
    return None


async def _alter_configs(broker: Broker, header: RequestHeader, req: Any) -> Any:
    refused = {i: msg for i, r in enumerate(req.resources) if (msg := _wrong_broker(broker, r)) is not None}
    forwarded = [r for i, r in enumerate(req.resources) if i not in refused]
    # Taken before the controller decides: what "changed" means while waiting for this broker's metadata.
    before = {res: _config_view(broker, res) for res, _ops in _config_ops(header, req)}
    answers: list[Any] = []
    if forwarded:
        sub = dataclasses.replace(req, resources=tuple(forwarded))
        resp = await _forward(broker, header, sub, None, True)
        answers = list(_get(resp, "responses") or ())
    rows: list[dict[str, Any]] = []
    from_controller = iter(answers)
    for i, r in enumerate(req.resources):
        if i in refused:
            code, message = int(Err.INVALID_REQUEST), refused[i]
        else:
            got = next(from_controller, None)
            if got is None:
                code, message = int(Err.UNKNOWN_SERVER_ERROR), "the controller returned fewer results than expected"
            else:
                code, message = int(_get(got, "error_code") or 0), _get(got, "error_message")
        rows.append(
            {
                "error_code": code,
                "error_message": message,
                "resource_type": r.resource_type,
                "resource_name": r.resource_name,
            }
        )
    out = {"throttle_time": 0, "responses": rows}
    if getattr(req, "validate_only", False) or not forwarded:
        return out
    await _wait_for_configs(broker, header, req, rows, before)
    return out


async def _wait_for_configs(
    broker: Broker,
    header: RequestHeader,
    req: Any,
    rows: list[dict[str, Any]],
    before: dict[tuple[int, str], dict[str, str] | None],
) -> None:
    """Until this broker's metadata shows what the controller accepted (bounded)."""
    wanted = _config_ops(header, req)
    ok = {(int(r["resource_type"]), r["resource_name"]) for r in rows if r["error_code"] == 0}
    waits = []
    for res, ops in wanted:
        old = before.get(res)
        if res not in ok or old is None:
            continue
        old_norm = {k: v.strip() for k, v in old.items()}
        expected = _expected(old_norm, ops, header.api_key == 44)
        if expected is not None and expected == old_norm:
            continue  # nothing changes: nothing to wait for
        waits.append((res, old, expected))

    def shown() -> bool:
        for res, old, expected in waits:
            now = _config_view(broker, res)
            now_norm = {k: v.strip() for k, v in (now or {}).items()}
            if now == old and now_norm != expected:
                return False
        return True

    if waits:
        await broker.wait_for_metadata(shown)


async def _forward(broker: Broker, header: RequestHeader, req: Any, names: list[str] | None, present: bool) -> Any:
    from epochlog.server.cluster.peer import PeerBadResponse, PeerError

    # As Kafka's forwarding does: keep trying the controller for request.timeout.ms (a controller
    # restart takes a moment), then answer REQUEST_TIMED_OUT on every item rather than drop the client.
    # An answer that cannot be read is not retried (the controller may have acted on the request):
    # UNKNOWN_SERVER_ERROR, as Kafka answers when it cannot parse the controller's response.
    deadline = time.monotonic() + broker.config.request_timeout_ms / 1000
    while True:
        try:
            resp = await broker.forward(req, timeout=max(deadline - time.monotonic(), 0.001))
            break
        except PeerBadResponse as e:
            log.warning("api %d forwarded to the controller: unreadable answer: %s", header.api_key, e)
            return unanswered(header, req, Err.UNKNOWN_SERVER_ERROR, f"unreadable answer from the controller: {e}")
        except PeerError as e:
            if time.monotonic() + FORWARD_RETRY_S >= deadline:
                log.warning("api %d forwarded to the controller failed: %s", header.api_key, e)
                return unanswered(header, req, Err.REQUEST_TIMED_OUT, f"the controller is not reachable: {e}")
            await asyncio.sleep(FORWARD_RETRY_S)
    names = _done_by_controller(resp, names) if names else names
    if names:
        # Answer once this broker's metadata shows the change, so the client's next request works.
        await broker.wait_for_topics(names, present)
    return resp


def _done_by_controller(resp: Any, names: list[str]) -> list[str]:
    """The names the controller answered without an error: a topic it refused never appears (or goes), and
    waiting for it held the answer for the full wait (found by the protocol fuzzer)."""
    rows = _get(resp, "topics")
    if rows is None:
        rows = _get(resp, "responses")
    if rows is None:
        return names
    ok = {_get(r, "name") for r in rows if int(_get(r, "error_code") or 0) == 0}
    return [n for n in names if n in ok]


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def unanswered(header: RequestHeader, req: Any, code: Err, message: str) -> dict[str, Any]:
    """The answer to a forwarded admin request that the controller never decided: `code` on every item."""
    key = header.api_key
    if key == 19:
        rows = []
        for t in req.topics:
            _configs, row = creatable_topic(t)
            row.update(error_code=code, error_message=message)
            rows.append(row)
        return {"throttle_time": 0, "topics": rows}
    if key == 20:
        items = (
            [(t.name, t.topic_id) for t in req.topics]
            if header.api_version >= 6
            else [(n, None) for n in req.topic_names]
        )
        rows = [{"name": n, "topic_id": tid, "error_code": code, "error_message": message} for n, tid in items]
        return {"throttle_time": 0, "responses": rows}
    if key == 37:
        rows = [{"name": t.name, "error_code": code, "error_message": message} for t in req.topics]
        return {"throttle_time": 0, "results": rows}
    if key == 43:
        results = [
            {
                "topic": tp.topic,
                "partition_result": [
                    {"partition_id": p, "error_code": code, "error_message": message} for p in tp.partitions
                ],
            }
            for tp in req.topic_partitions or []
        ]
        return {"throttle_time": 0, "error_code": code, "replica_election_results": results}
    if key in (33, 44):
        rows = [
            {
                "error_code": code,
                "error_message": message,
                "resource_type": r.resource_type,
                "resource_name": r.resource_name,
            }
            for r in req.resources
        ]
        return {"throttle_time": 0, "responses": rows}
    raise ValueError(f"api {key} is not forwarded")
