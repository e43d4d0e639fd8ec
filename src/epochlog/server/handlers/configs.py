"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

DescribeConfigs is answered from this broker's metadata image (its view of every config's layers); the
two alter APIs are the controller's to decide, so the broker forwards them (a broker's own configs only
through that broker, as Kafka's brokers insist) and answers once its own metadata shows the outcome.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from epochlog.config_defs import (
    GROUP_CONFIGS,
    RESOURCE_BROKER,
    RESOURCE_GROUP,
    RESOURCE_TOPIC,
    ConfigSource,
    group_bounds,
    group_default,
)
from epochlog.protocol.codec import RequestHeader, decode_body
from epochlog.protocol.errors import Err
from epochlog.security.acl import Operation
from epochlog.server import authz
from epochlog.server.handlers.forwarding import answer_field, forward
from epochlog.server.topic_configs import (
    ConfigEntry,
    broker_config_entries,
    default_broker_config_entries,
    effective_topic_config_entries,
)

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker


def config_denied(broker: Broker, header: RequestHeader, op: Operation, rtype: int, name: str) -> Err | None:
    """The error for a config resource the principal may not ``op`` (DESCRIBE_CONFIGS, ALTER_CONFIGS):
    a topic's on the topic, a group's on the group, anything else (brokers, loggers) on the cluster."""
    if not authz.enabled(broker):
        return None
    if rtype == RESOURCE_TOPIC:
        return None if authz.topic_allowed(broker, header, op, name) else Err.TOPIC_AUTHORIZATION_FAILED
    if rtype == RESOURCE_GROUP:
        return None if authz.group_allowed(broker, header, op, name) else Err.GROUP_AUTHORIZATION_FAILED
    return None if authz.cluster_allowed(broker, header, op) else Err.CLUSTER_AUTHORIZATION_FAILED


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
        denied = config_denied(broker, header, Operation.DESCRIBE_CONFIGS, int(r.resource_type), r.resource_name)
        if denied is not None:
            # Before the existence check: nothing about the resource, not even whether it exists.
            row["error_code"] = denied
        elif r.resource_type == RESOURCE_TOPIC:
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
        elif r.resource_type == RESOURCE_GROUP:
            if not r.resource_name:
                row.update(error_code=Err.INVALID_REQUEST, error_message="Default group resources are not allowed.")
            else:
                own = broker.image.cluster.group_configs.get(r.resource_name)
                entries = group_config_entries(broker.config.raw, own)
        else:
            row.update(error_code=Err.INVALID_REQUEST, error_message=f"resource type {r.resource_type} unsupported")
        row["configs"] = [_describe_row(e, synonyms, docs) for e in entries if keys is None or e.name in keys]
        results.append(row)
    return {"throttle_time": 0, "results": results}


def group_config_entries(broker_raw: dict[str, str], dynamic: dict[str, str] | None) -> list[ConfigEntry]:
    """Every group config (Kafka describes them all, for any group name): the group's own value, else the
    broker setting it overrides (a group that does not exist yet has only those)."""
    bounds = group_bounds(broker_raw)
    rows = []
    for name, d in GROUP_CONFIGS.items():
        own = (dynamic or {}).get(name)
        if own is not None:
            value, src = own, int(ConfigSource.DYNAMIC_GROUP_CONFIG)
        else:
            value, src = group_default(name, bounds), int(ConfigSource.DEFAULT_CONFIG)
        rows.append(ConfigEntry(name, value, src, config_type=int(d.type), doc=d.doc, synonyms=((name, value, src),)))
    return rows


def _describe_row(e: ConfigEntry, synonyms: bool, docs: bool) -> dict[str, Any]:
    return {
        "name": e.name,
        "value": e.value,
        "read_only": e.read_only,
        "config_source": e.source,
        "is_sensitive": e.sensitive,
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
    if rtype == RESOURCE_GROUP:
        return dict(broker.image.cluster.group_configs.get(name, {}))
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
    refused: dict[int, tuple[Err, str | None]] = {}
    for i, r in enumerate(req.resources):
        denied = config_denied(broker, header, Operation.ALTER_CONFIGS, int(r.resource_type), r.resource_name)
        if denied is not None:
            refused[i] = (denied, None)
        elif (msg := _wrong_broker(broker, r)) is not None:
            refused[i] = (Err.INVALID_REQUEST, msg)
    forwarded = [r for i, r in enumerate(req.resources) if i not in refused]
    # Taken before the controller decides: what "changed" means while waiting for this broker's metadata.
    before = {res: _config_view(broker, res) for res, _ops in _config_ops(header, req)}
    answers: list[Any] = []
    if forwarded:
        sub = dataclasses.replace(req, resources=tuple(forwarded))
        resp = await forward(broker, header, sub, None, True)
        answers = list(answer_field(resp, "responses") or ())
    rows: list[dict[str, Any]] = []
    from_controller = iter(answers)
    for i, r in enumerate(req.resources):
        if i in refused:
            code, message = int(refused[i][0]), refused[i][1]
        else:
            got = next(from_controller, None)
            if got is None:
                code, message = int(Err.UNKNOWN_SERVER_ERROR), "the controller returned fewer results than expected"
            else:
                code, message = int(answer_field(got, "error_code") or 0), answer_field(got, "error_message")
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
