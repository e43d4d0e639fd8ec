"""The admin requests brokers forward to the active controller: topics and partitions, configs, leader
elections, reassignments, ACLs and SCRAM credentials. Each decides through the core and proposes its records;
controller_apis answers once they are committed."""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from epochlog.config_defs import group_bounds
from epochlog.controller.client_quotas import QuotaAlteration
from epochlog.controller.config_changes import ConfigChange, ConfigOp
from epochlog.controller.scram import ScramDeletion, ScramUpsertion
from epochlog.protocol.errors import Err
from epochlog.server.handlers.acls import binding_of, binding_row, filter_of
from epochlog.server.handlers.item_errors import creatable_topic
from epochlog.server.topic_configs import invalid_topic_configs
from epochlog.server.topics import validate_topic_name

if TYPE_CHECKING:
    from epochlog.server.cluster.controller_server import ControllerServer

log = logging.getLogger("epochlog.controller")

# Kafka's controller refuses an operation that would write more records than this (QuorumController's
# MAX_RECORDS_PER_USER_OP); here it bounds the partitions one CreateTopics or CreatePartitions may add, so a
# request for 2^31 partitions is an error rather than a stalled controller and a metadata batch too large to write.
MAX_RECORDS_PER_USER_OP = 10_000


def _too_large(row: dict[str, Any]) -> dict[str, Any]:
    return {
        **row,
        "error_code": Err.POLICY_VIOLATION,
        "error_message": "Unable to perform excessively large batch operation.",
    }


def topic_by_id(server: ControllerServer, topic_id: uuid.UUID | None) -> str | None:
    for t in server.core.topics.values():
        if t.topic_id == str(topic_id):
            return t.name
    return None


def create_topics(server: ControllerServer, req: Any) -> dict[str, Any]:
    out = []
    validate_only = bool(getattr(req, "validate_only", False))
    default = server.config.num_partitions
    asked = sum(
        len(t.assignments) if t.assignments else default if t.num_partitions == -1 else max(0, t.num_partitions)
        for t in req.topics
    )
    if asked > MAX_RECORDS_PER_USER_OP:
        return {"throttle_time": 0, "topics": [_too_large(creatable_topic(t)[1]) for t in req.topics]}
    for t in req.topics:
        configs, row = creatable_topic(t)
        assignments: dict[int, list[int]] = {}
        parts = int(t.num_partitions)
        rf = int(t.replication_factor)
        reason = validate_topic_name(t.name)
        bad = invalid_topic_configs(configs)
        live = sum(1 for b in server.core.brokers if server.core.alive(b))
        if parts == -1:
            parts = server.config.num_partitions  # as KRaft: the controller's num.partitions
        if rf == -1:
            rf = min(3, live) if live else 1
        code, msg = Err.NONE, None
        if reason:
            code, msg = Err.INVALID_TOPIC_EXCEPTION, reason
        elif t.name in server.core.topics:
            code, msg = Err.TOPIC_ALREADY_EXISTS, f"topic {t.name!r} already exists"
        elif t.assignments and (int(t.num_partitions) != -1 or int(t.replication_factor) != -1):
            which = "numPartitions" if int(t.num_partitions) != -1 else "replicationFactor"
            code, msg = (
                Err.INVALID_REQUEST,
                f"A manual partition assignment was specified, but {which} was not set to -1.",
            )
        elif t.assignments:
            assignments = {int(a.partition_index): [int(b) for b in a.broker_ids] for a in t.assignments}
            problem = server.core.assignment_problem(assignments)
            if bad:
                code, msg = Err.INVALID_CONFIG, bad
            elif problem:
                code, msg = Err(problem[0]), problem[1]
            else:
                parts, rf = len(assignments), len(assignments[0])
        elif bad:
            code, msg = Err.INVALID_CONFIG, bad
        elif parts < 1:
            code, msg = Err.INVALID_PARTITIONS, f"number of partitions must be at least 1, got {parts}"
        elif rf < 1 or rf > live:
            code, msg = (
                Err.INVALID_REPLICATION_FACTOR,
                (
                    f"replication factor {rf} is larger than the {live} available brokers"
                    if rf > live
                    else f"replication factor must be at least 1, got {rf}"
                ),
            )
        if code:
            row.update(error_code=code, error_message=msg)
            out.append(row)
            continue
        topic_id = uuid.uuid4()
        if not validate_only:
            unclean = configs.get("unclean.leader.election.enable", str(server.config.unclean_leader_election_enable))
            allow = unclean.lower() == "true"
            if t.assignments:
                server.core.create_topic_assigned(t.name, dict(assignments), allow, str(topic_id), configs)
            else:
                server.core.create_topic(t.name, parts, rf, allow, str(topic_id), configs)
            log.info("created topic %s (%s): %d partitions, replication factor %d", t.name, topic_id, parts, rf)
        row.update(error_code=Err.NONE, topic_id=topic_id, num_partitions=parts, replication_factor=rf)
        out.append(row)
    server.persist()
    return {"throttle_time": 0, "topics": out}


def delete_topics(server: ControllerServer, req: Any, version: int) -> dict[str, Any]:
    out = []
    items = (
        [(t.name or topic_by_id(server, t.topic_id), t.topic_id) for t in req.topics]
        if version >= 6
        else [(n, None) for n in req.topic_names]
    )
    for name, topic_id in items:
        row: dict[str, Any] = {"name": name, "topic_id": topic_id, "error_message": None}
        t = server.core.topics.get(name) if name else None
        if not server.config.delete_topic_enable:
            # As Kafka's controller: TOPIC_DELETION_DISABLED from v3, INVALID_REQUEST before.
            code = Err.TOPIC_DELETION_DISABLED if version >= 3 else Err.INVALID_REQUEST
            row.update(error_code=code, error_message="topic deletion is disabled (delete.topic.enable=false)")
        elif t is None:
            row["error_code"] = Err.UNKNOWN_TOPIC_OR_PARTITION if topic_id is None else Err.UNKNOWN_TOPIC_ID
        else:
            assert name is not None  # a topic was found by it
            row.update(error_code=Err.NONE, topic_id=uuid.UUID(t.topic_id) if t.topic_id else None)
            server.core.delete_topic(name)
            log.info("deleted topic %s", name)
        out.append(row)
    server.persist()
    return {"throttle_time": 0, "responses": out}


def create_partitions(server: ControllerServer, req: Any) -> dict[str, Any]:
    out = []
    existing = {t.name: len(server.core.topics[t.name].partitions) for t in req.topics if t.name in server.core.topics}
    if sum(max(0, t.count - existing.get(t.name, t.count)) for t in req.topics) > MAX_RECORDS_PER_USER_OP:
        rows = [_too_large({"name": t.name}) for t in req.topics]
        return {"throttle_time": 0, "results": rows}
    for t in req.topics:
        row: dict[str, Any] = {"name": t.name, "error_message": None, "error_code": Err.NONE}
        if t.name not in server.core.topics:
            row.update(error_code=Err.UNKNOWN_TOPIC_OR_PARTITION, error_message=f"topic {t.name!r} does not exist")
        else:
            wanted = None if t.assignments is None else [list(a.broker_ids) for a in t.assignments]
            refusal = server.core.add_partitions(t.name, int(t.count), wanted, bool(req.validate_only))
            if refusal is not None:
                row.update(error_code=refusal.error_code, error_message=refusal.message)
        out.append(row)
    server.persist()
    return {"throttle_time": 0, "results": out}


def alter_configs(server: ControllerServer, req: Any, incremental: bool) -> dict[str, Any]:
    """AlterConfigs (replace a resource's dynamic set) and IncrementalAlterConfigs (KIP-339)."""
    changes = [
        ConfigChange(
            int(r.resource_type),
            r.resource_name,
            tuple(ConfigOp(c.name, c.value, int(c.config_operation) if incremental else 0) for c in r.configs),
        )
        for r in req.resources
    ]
    validate_only = bool(req.validate_only)
    outcomes = server.core.alter_configs(changes, incremental, validate_only, group_bounds(server.config.raw))
    rows = []
    for change, outcome in zip(changes, outcomes, strict=True):
        rows.append(
            {
                "error_code": outcome.error_code,
                "error_message": outcome.message,
                "resource_type": change.resource_type,
                "resource_name": change.resource_name,
            }
        )
        if outcome.records and not validate_only:
            log.info(
                "configs of %s %r: %s",
                {2: "topic", 32: "group"}.get(change.resource_type, "broker"),
                change.resource_name,
                ", ".join(f"{r.name}={'(deleted)' if r.value is None else r.value}" for r in outcome.records),
            )
    server.persist()
    return {"throttle_time": 0, "responses": rows}


def elect_leaders(server: ControllerServer, req: Any, version: int) -> dict[str, Any]:
    election_type = int(getattr(req, "election_type", 0))
    wanted: list[tuple[str, list[int]]] = []
    if req.topic_partitions is None:
        wanted = [(t.name, sorted(t.partitions)) for t in server.core.topics.values()]
    else:
        wanted = [(tp.topic, [int(p) for p in tp.partitions]) for tp in req.topic_partitions]
    results = []
    for name, parts in wanted:
        rows = []
        t = server.core.topics.get(name)
        for p in parts:
            code, msg = Err.NONE, None
            if t is None or p not in t.partitions:
                code, msg = Err.UNKNOWN_TOPIC_OR_PARTITION, "no such partition"
            else:
                st = t.partitions[p]
                if election_type == 0:
                    pref = st.replicas[0]
                    if st.leader == pref:
                        code, msg = Err.ELECTION_NOT_NEEDED, "the preferred replica already leads"
                    elif not server.core.elect_leader(name, p, pref):
                        code, msg = (
                            Err.PREFERRED_LEADER_NOT_AVAILABLE,
                            f"replica {pref} is not in the ISR or not live",
                        )
                else:
                    if st.leader >= 0 and server.core.alive(st.leader):
                        code, msg = Err.ELECTION_NOT_NEEDED, "the partition has a live leader"
                    elif not server.core.elect_leader(name, p, unclean=True):
                        code, msg = Err.ELIGIBLE_LEADERS_NOT_AVAILABLE, "no live replica"
            rows.append({"partition_id": p, "error_code": code, "error_message": msg})
        results.append({"topic": name, "partition_result": rows})
    server.persist()
    return {"throttle_time": 0, "error_code": Err.NONE, "replica_election_results": results}


def alter_reassignments(server: ControllerServer, req: Any) -> dict[str, Any]:
    """AlterPartitionReassignments (KIP-455): each partition is started, redirected or cancelled on
    its own; the core decides and records, and completes each once its target replicas are in sync."""
    allow_rf = bool(getattr(req, "allow_replication_factor_change", True))
    responses: list[dict[str, Any]] = []

    def answer() -> dict[str, Any]:
        return {
            "throttle_time": 0,
            "allow_replication_factor_change": allow_rf,
            "error_code": Err.NONE,
            "error_message": None,
            "responses": responses,
        }

    if sum(len(t.partitions) for t in req.topics) > MAX_RECORDS_PER_USER_OP:
        # One record per partition at least: bounded like CreateTopics and CreatePartitions.
        for t in req.topics:
            rows = [_too_large({"partition_index": p.partition_index}) for p in t.partitions]
            responses.append({"name": t.name, "partitions": rows})
        return answer()
    for t in req.topics:
        rows = []
        for p in t.partitions:
            target = None if p.replicas is None else [int(b) for b in p.replicas]
            code, msg = server.core.alter_reassignment(t.name, int(p.partition_index), target, allow_rf)
            if not code:
                log.info(
                    "%s-%d: %s",
                    t.name,
                    p.partition_index,
                    "reassignment cancelled" if target is None else f"reassigning to {target}",
                )
            rows.append({"partition_index": p.partition_index, "error_code": code, "error_message": msg})
        responses.append({"name": t.name, "partitions": rows})
    server.persist()
    return answer()


def list_reassignments(server: ControllerServer, req: Any) -> dict[str, Any]:
    wanted = None if req.topics is None else [(t.name, [int(p) for p in t.partition_indexes]) for t in req.topics]
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for name, p, st in server.core.reassigning(wanted):
        by_topic.setdefault(name, []).append(
            {
                "partition_index": p,
                "replicas": list(st.replicas),
                "adding_replicas": list(st.adding),
                "removing_replicas": list(st.removing),
            }
        )
    topics = [{"name": n, "partitions": rows} for n, rows in by_topic.items()]
    return {"throttle_time": 0, "error_code": Err.NONE, "error_message": None, "topics": topics}


def create_acls(server: ControllerServer, req: Any) -> dict[str, Any]:
    outcomes = server.core.create_acls([binding_of(c) for c in req.creations], MAX_RECORDS_PER_USER_OP)
    server.persist()
    rows = [{"error_code": o.error_code, "error_message": o.message} for o in outcomes]
    return {"throttle_time": 0, "results": rows}


def delete_acls(server: ControllerServer, req: Any) -> dict[str, Any]:
    outcomes = server.core.delete_acls([filter_of(f) for f in req.filters], MAX_RECORDS_PER_USER_OP)
    server.persist()
    rows = [
        {
            "error_code": o.error_code,
            "error_message": o.message,
            "matching_acls": [binding_row(b) for b in o.matched],
        }
        for o in outcomes
    ]
    return {"throttle_time": 0, "filter_results": rows}


def alter_scram(server: ControllerServer, req: Any) -> dict[str, Any]:
    outcomes = server.core.alter_scram(
        [ScramDeletion(d.name, int(d.mechanism)) for d in req.deletions],
        [
            ScramUpsertion(u.name, int(u.mechanism), int(u.iterations), bytes(u.salt), bytes(u.salted_password))
            for u in req.upsertions
        ],
    )
    server.persist()
    rows = [{"user": o.user, "error_code": o.error_code, "error_message": o.message} for o in outcomes]
    return {"throttle_time": 0, "results": rows}


def alter_client_quotas(server: ControllerServer, req: Any) -> dict[str, Any]:
    alterations = [
        QuotaAlteration(
            tuple((str(e.entity_type), e.entity_name) for e in entry.entity),
            tuple((str(op.key), None if op.remove else float(op.value)) for op in entry.ops),
        )
        for entry in req.entries
    ]
    outcomes = server.core.alter_client_quotas(alterations, bool(req.validate_only))
    server.persist()
    rows = [
        {
            "error_code": o.error_code,
            "error_message": o.message,
            "entity": [{"entity_type": t, "entity_name": n} for t, n in o.entity],
        }
        for o in outcomes
    ]
    return {"throttle_time": 0, "entries": rows}
