"""The answer of a forwardable admin request (topics, partitions, configs, reassignments, ACLs, SCRAM
credentials, client quotas) with one error on every item. A leaf: the handlers that refuse a request, the
forwarding that times out and a standby controller all build it, and none of them imports another for it."""

from __future__ import annotations

from typing import Any


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


def error_on_every_item(key: int, version: int, req: Any, code: int, message: str | None) -> dict[str, Any]:
    """A forwardable admin request's answer with ``code`` and ``message`` on each of its items (the broker's
    answer when the controller never decided or the principal may not ask, and a standby controller's
    NOT_CONTROLLER)."""
    if key == 19:
        rows = []
        for t in req.topics:
            _configs, row = creatable_topic(t)
            row.update(error_code=code, error_message=message)
            rows.append(row)
        return {"throttle_time": 0, "topics": rows}
    if key == 20:
        items = [(t.name, t.topic_id) for t in req.topics] if version >= 6 else [(n, None) for n in req.topic_names]
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
    if key == 45:
        responses = [
            {
                "name": t.name,
                "partitions": [
                    {"partition_index": p.partition_index, "error_code": code, "error_message": message}
                    for p in t.partitions
                ],
            }
            for t in req.topics
        ]
        return {"throttle_time": 0, "error_code": code, "error_message": message, "responses": responses}
    if key == 46:
        return {"throttle_time": 0, "error_code": code, "error_message": message, "topics": []}
    if key == 30:
        return {
            "throttle_time": 0,
            "results": [{"error_code": code, "error_message": message} for _ in req.creations],
        }
    if key == 31:
        matched: list[dict[str, Any]] = []
        rows = [{"error_code": code, "error_message": message, "matching_acls": matched} for _ in req.filters]
        return {"throttle_time": 0, "filter_results": rows}
    if key == 51:
        users = dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])
        rows = [{"user": u, "error_code": code, "error_message": message} for u in users]
        return {"throttle_time": 0, "results": rows}
    if key == 49:
        rows = [
            {
                "error_code": code,
                "error_message": message,
                "entity": [{"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity],
            }
            for entry in req.entries
        ]
        return {"throttle_time": 0, "entries": rows}
    raise ValueError(f"api {key} is not forwarded")
