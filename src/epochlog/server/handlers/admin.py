"""CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders and the partition reassignment APIs (the
configs APIs: handlers/configs.py)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from epochlog.protocol.codec import RequestHeader, decode_body
from epochlog.protocol.errors import Err
from epochlog.security.acl import Operation
from epochlog.server import authz
from epochlog.server.handlers import mutation_quota
from epochlog.server.handlers.forwarding import answer_field, forward
from epochlog.server.handlers.item_errors import error_on_every_item

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker



# Topic changes are the controller's: a broker forwards them and answers once its own metadata shows the
# outcome, so the client's next request sees it (Kafka's forwarding, KIP-590).


# The controller here does not know who asked: the broker checks before forwarding, answers the items the
# principal may not touch itself (Kafka's ControllerApis answers) and forwards only the rest.
DENIED_MESSAGE = "Authorization failed."


def _may_on_topics(broker: Broker, header: RequestHeader, op: Operation, names: list[str]) -> set[str]:
    """The names the principal may not ``op``: Cluster ``op`` allows every topic, else Topic ``op`` each."""
    if not authz.enabled(broker) or authz.cluster_allowed(broker, header, op):
        return set()
    return authz.denied_topics(broker, header, op, names)


def handle_create_topics(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = decode_body(frame, header)
    refused = _may_on_topics(broker, header, Operation.CREATE, [t.name for t in req.topics])
    answered: list[dict[str, Any]] = []
    if refused:
        not_forwarded = dataclasses.replace(req, topics=tuple(t for t in req.topics if t.name in refused))
        code = Err.TOPIC_AUTHORIZATION_FAILED
        answered = error_on_every_item(19, header.api_version, not_forwarded, code, DENIED_MESSAGE)["topics"]
        req = dataclasses.replace(req, topics=tuple(t for t in req.topics if t.name not in refused))
    names = None if getattr(req, "validate_only", False) else [t.name for t in req.topics]
    if refused and not req.topics:
        return {"throttle_time": 0, "topics": answered}
    return _forward_checked(broker, header, req, names, True, "topics", answered)


def handle_delete_topics(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = decode_body(frame, header)
    answered: list[dict[str, Any]] = []
    if authz.enabled(broker) and not authz.cluster_allowed(broker, header, Operation.DELETE):
        req, answered = _delete_topics_checked(broker, header, req)
        if answered and not (req.topics if header.api_version >= 6 else req.topic_names):
            return {"throttle_time": 0, "responses": answered}
    names = [t.name for t in req.topics if t.name] if header.api_version >= 6 else list(req.topic_names)
    return _forward_checked(broker, header, req, names, False, "responses", answered)


def _delete_topics_checked(broker: Broker, header: RequestHeader, req: Any) -> tuple[Any, list[dict[str, Any]]]:
    """The request without the topics the principal may not delete, and their answers. Asked by id, a
    topic it may not even describe is answered without its name (the id must not reveal it); an unknown id
    goes to the controller, which answers UNKNOWN_TOPIC_ID."""
    answered: list[dict[str, Any]] = []
    code = Err.TOPIC_AUTHORIZATION_FAILED
    if header.api_version < 6:
        refused = authz.denied_topics(broker, header, Operation.DELETE, req.topic_names)
        answered = [{"name": n, "error_code": code, "error_message": DENIED_MESSAGE} for n in refused]
        return dataclasses.replace(req, topic_names=tuple(n for n in req.topic_names if n not in refused)), answered
    kept = []
    for t in req.topics:
        name = t.name
        by_id = not name and t.topic_id is not None
        if by_id:
            name = broker.topic_name_for_id(t.topic_id)
            if name is None:
                kept.append(t)
                continue
        if authz.topic_allowed(broker, header, Operation.DELETE, name):
            kept.append(t)
            continue
        shown = name if not by_id or authz.topic_allowed(broker, header, Operation.DESCRIBE, name) else None
        answered.append(
            {"name": shown, "topic_id": t.topic_id, "error_code": code, "error_message": DENIED_MESSAGE}
        )
    return dataclasses.replace(req, topics=tuple(kept)), answered


def handle_create_partitions(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = decode_body(frame, header)
    answered: list[dict[str, Any]] = []
    refused = authz.denied_topics(broker, header, Operation.ALTER, [t.name for t in req.topics])
    if refused:
        code = Err.TOPIC_AUTHORIZATION_FAILED
        names = [t.name for t in req.topics]
        answered = [{"name": n, "error_code": code, "error_message": None} for n in names if n in refused]
        req = dataclasses.replace(req, topics=tuple(t for t in req.topics if t.name not in refused))
        if not req.topics:
            return {"throttle_time": 0, "results": answered}
    return _forward_checked(broker, header, req, None, True, "results", answered)


def _cluster_refused(broker: Broker, header: RequestHeader, req: Any, op: Operation) -> dict[str, Any] | None:
    if authz.cluster_allowed(broker, header, op):
        return None
    return error_on_every_item(
        header.api_key, header.api_version, req, Err.CLUSTER_AUTHORIZATION_FAILED, DENIED_MESSAGE
    )


def handle_elect_leaders(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = decode_body(frame, header)
    return _cluster_refused(broker, header, req, Operation.ALTER) or forward(broker, header, req, None, True)


def handle_alter_partition_reassignments(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = decode_body(frame, header)
    return _cluster_refused(broker, header, req, Operation.ALTER) or forward(broker, header, req, None, True)


def handle_list_partition_reassignments(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    # The controller's answer, not this broker's image: a reassignment it just started or completed may not
    # have reached this broker yet, and `--verify` right after `--execute` must see it.
    req = decode_body(frame, header)
    return _cluster_refused(broker, header, req, Operation.DESCRIBE) or forward(broker, header, req, None, True)


async def _forward_checked(
    broker: Broker,
    header: RequestHeader,
    req: Any,
    names: list[str] | None,
    present: bool,
    rows_key: str,
    answered: list[dict[str, Any]],
) -> Any:
    """Forward, then add the rows the broker answered itself (refused before forwarding, by authorization or
    by the client's controller_mutation_rate)."""
    held = mutation_quota.hold(broker, header, req)
    if held is not None:
        req, answered = held.req, answered + held.refused
        if names is not None:
            names = [n for n in names if n in held.counts]
        if not mutation_quota.has_items(held, header):
            return {"throttle_time": mutation_quota.settle(broker, header, held, []), rows_key: answered}
    resp = await forward(broker, header, req, names, present)
    if header.api_key == 19 and authz.enabled(broker):
        resp = _hide_created_configs(broker, header, resp)
    throttle = 0
    if held is not None:
        throttle = mutation_quota.settle(broker, header, held, list(answer_field(resp, rows_key) or ()))
    if not answered and not throttle:
        return resp
    rows = list(answer_field(resp, rows_key) or ()) + answered
    return {"throttle_time": max(answer_field(resp, "throttle_time") or 0, throttle), rows_key: rows}


def _hide_created_configs(broker: Broker, header: RequestHeader, resp: Any) -> Any:
    """As Kafka: a created topic's configs are shown only to a principal that may describe them."""
    rows = answer_field(resp, "topics")
    if not rows:
        return resp
    out = []
    for r in rows:
        name = answer_field(r, "name")
        if name is not None and not authz.topic_allowed(broker, header, Operation.DESCRIBE_CONFIGS, name):
            r = _with(r, configs=None, topic_config_error_code=Err.TOPIC_AUTHORIZATION_FAILED)
        out.append(r)
    return {"throttle_time": answer_field(resp, "throttle_time") or 0, "topics": out}


def _with(row: Any, **changes: Any) -> Any:
    if isinstance(row, dict):
        return {**row, **changes}
    if dataclasses.is_dataclass(row) and not isinstance(row, type):
        fields = {f.name for f in dataclasses.fields(row)}
        return dataclasses.replace(row, **{k: v for k, v in changes.items() if k in fields})
    return row


