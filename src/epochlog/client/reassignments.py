"""Partition reassignment from the client side, for `epochlog reassign-partitions`: kafka-reassign-partitions.sh's
JSON files, its replica placement for --generate (rack-unaware here; the command hands in the rack-aware
one, controller/placement.py, when the brokers have racks), and the three requests it sends
(Metadata for the current assignment, AlterPartitionReassignments, ListPartitionReassignments).

The JSON format (the tool's, version 1):
  topics to move:  {"version": 1, "topics": [{"topic": "foo"}]}
  reassignment:    {"version": 1, "partitions": [{"topic": "foo", "partition": 0, "replicas": [1, 2],
                                                  "log_dirs": ["any", "any"]}]}
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32

from epochlog.client.epochs import connect_first, metadata_request
from epochlog.client.wire import Connection, WireError

__all__ = ["ReassignError", "WireError"]

Assignment = dict[tuple[str, int], list[int]]


class ReassignError(Exception):
    """Bad input or a refusal by the cluster; the message says which."""


@dataclass(frozen=True)
class Ongoing:
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


# -- JSON ---------------------------------------------------------------------------------------
def parse_topics_to_move(text: str) -> list[str]:
    try:
        doc = json.loads(text)
        topics = [str(t["topic"]) for t in doc["topics"]]
    except (ValueError, KeyError, TypeError) as e:
        example = '{"topics": [{"topic": "foo"}], "version": 1}'
        raise ReassignError(f"topics-to-move JSON must look like {example}: {e}") from None
    if not topics:
        raise ReassignError("the topics-to-move JSON names no topic")
    if len(set(topics)) != len(topics):
        raise ReassignError("the topics-to-move JSON names a topic more than once")
    return topics


def parse_reassignment(text: str) -> Assignment:
    """The partitions of a reassignment JSON file, checked as the tool checks them: no partition twice,
    no broker twice in one replica list, an empty list refused, log_dirs (if given) one per replica and
    only "any" (there is one log directory per replica here, moves between directories are not offered)."""
    try:
        doc = json.loads(text)
        rows = doc["partitions"]
        out: Assignment = {}
        for row in rows:
            key = (str(row["topic"]), int(row["partition"]))
            replicas = [int(b) for b in row["replicas"]]
            dirs = row.get("log_dirs")
            if key in out:
                raise ReassignError(f"partition {key[0]}-{key[1]} appears more than once")
            if not replicas:
                raise ReassignError(f"partition {key[0]}-{key[1]} has an empty replica list")
            if len(set(replicas)) != len(replicas):
                raise ReassignError(f"partition {key[0]}-{key[1]} names a broker more than once: {replicas}")
            if dirs is not None and (len(dirs) != len(replicas) or any(d != "any" for d in dirs)):
                raise ReassignError(f'partition {key[0]}-{key[1]}: log_dirs must be "any", one per replica')
            out[key] = replicas
    except (ValueError, KeyError, TypeError) as e:
        raise ReassignError(f"reassignment JSON is not in kafka-reassign-partitions.sh's format: {e}") from None
    if not out:
        raise ReassignError("the reassignment JSON names no partition")
    return out


def format_assignment(assignment: Assignment) -> str:
    rows = [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())
    ]
    return json.dumps({"version": 1, "partitions": rows}, separators=(",", ":"))


# -- --generate -----------------------------------------------------------------------------------
def place_replicas(
    partitions: int, rf: int, brokers: list[int], start: int | None = None, shift: int | None = None
) -> list[list[int]]:
    """Kafka's rack-unaware placement: the first replicas go round-robin from a start broker, and the
    followers sit at a distance from the first that grows by one every full round, so the replicas of
    a broker's partitions spread over all the others. ``start``/``shift`` default to random, as in Kafka."""
    n = len(brokers)
    if rf < 1:
        raise ReassignError("replication factor must be at least 1")
    if rf > n:
        raise ReassignError(f"replication factor {rf} is larger than the {n} brokers in --broker-list")
    ordered = sorted(brokers)
    start = random.randrange(n) if start is None else start
    shift = random.randrange(n) if shift is None else shift
    out = []
    for p in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [ordered[first]]
        for j in range(rf - 1):
            distance = 1 + (shift + j) % (n - 1)
            replicas.append(ordered[(first + distance) % n])
        out.append(replicas)
    return out


# (partitions, replication factor) -> each partition's replica list, over the brokers the caller chose.
Placer = Callable[[int, int], list[list[int]]]


def generate(current: Assignment, topics: list[str], brokers: list[int], placer: Placer | None = None) -> Assignment:
    """A proposed assignment of ``topics`` over ``brokers``, keeping each topic's replication factor;
    ``placer`` places (default: rack-unaware over ``brokers``)."""
    if len(set(brokers)) != len(brokers):
        raise ReassignError(f"--broker-list names a broker more than once: {brokers}")
    proposed: Assignment = {}
    for topic in topics:
        parts = sorted(p for t, p in current if t == topic)
        if not parts:
            raise ReassignError(f"topic {topic} does not exist")
        rf = len(current[(topic, parts[0])])
        placed = placer(len(parts), rf) if placer else place_replicas(len(parts), rf, brokers)
        for p, replicas in zip(parts, placed, strict=True):
            proposed[(topic, p)] = replicas
    return proposed


# -- requests ---------------------------------------------------------------------------------------
def _connect(bootstrap: str, timeout: float) -> Connection:
    return connect_first(bootstrap, timeout, "epochlog-reassign-partitions")


def current_assignment(bootstrap: str, topics: list[str] | None, timeout: float = 15.0) -> tuple[Assignment, list[int]]:
    """(replicas of every partition of ``topics`` (all topics if None), the live broker ids) from Metadata."""
    req = metadata_request(topics, version=12)
    with _connect(bootstrap, timeout) as conn:
        resp = conn.request(req)
    out: Assignment = {}
    for t in resp.topics:
        if int(t.error_code) == 0:
            for p in t.partitions:
                out[(str(t.name), int(p.partition_index))] = [int(b) for b in p.replica_nodes]
    return out, sorted(int(b.node_id) for b in resp.brokers)


def broker_racks(bootstrap: str, timeout: float = 15.0) -> dict[int, str | None]:
    """Each live broker's rack (None without one), from Metadata."""
    with _connect(bootstrap, timeout) as conn:
        resp = conn.request(metadata_request([], version=12))
    return {int(b.node_id): (str(b.rack) if b.rack else None) for b in resp.brokers}


def alter(bootstrap: str, targets: dict[tuple[str, int], list[int] | None], timeout: float = 30.0) -> dict[str, str]:
    """AlterPartitionReassignments: start (a replica list) or cancel (None) each partition.
    Returns the partitions refused, as {"topic-p": "ERROR_NAME: message"}."""
    from kio.schema.alter_partition_reassignments.v0.request import (
        AlterPartitionReassignmentsRequest,
        ReassignablePartition,
        ReassignableTopic,
    )

    by_topic: dict[str, list[Any]] = {}
    for (t, p), replicas in sorted(targets.items()):
        by_topic.setdefault(t, []).append(
            ReassignablePartition(
                partition_index=i32(p),
                replicas=None if replicas is None else tuple(BrokerId(r) for r in replicas),
            )
        )
    req = AlterPartitionReassignmentsRequest(
        timeout=_ms(timeout),
        topics=tuple(ReassignableTopic(name=TopicName(t), partitions=tuple(ps)) for t, ps in by_topic.items()),
    )
    with _connect(bootstrap, timeout) as conn:
        resp = conn.request(req)
    if int(resp.error_code):
        raise ReassignError(f"{_name(resp.error_code)}: {resp.error_message or 'refused'}")
    failed = {}
    for t in resp.responses:
        for p in t.partitions:
            if int(p.error_code):
                failed[f"{t.name}-{p.partition_index}"] = f"{_name(p.error_code)}: {p.error_message or ''}".rstrip(": ")
    return failed


def ongoing(bootstrap: str, timeout: float = 15.0) -> dict[tuple[str, int], Ongoing]:
    """ListPartitionReassignments over every topic."""
    from kio.schema.list_partition_reassignments.v0.request import ListPartitionReassignmentsRequest

    with _connect(bootstrap, timeout) as conn:
        resp = conn.request(ListPartitionReassignmentsRequest(timeout=_ms(timeout), topics=None))
    if int(resp.error_code):
        raise ReassignError(f"{_name(resp.error_code)}: {resp.error_message or 'refused'}")
    return {
        (str(t.name), int(p.partition_index)): Ongoing(
            tuple(int(b) for b in p.replicas),
            tuple(int(b) for b in p.adding_replicas),
            tuple(int(b) for b in p.removing_replicas),
        )
        for t in resp.topics
        for p in t.partitions
    }


def _ms(seconds: float) -> Any:
    from datetime import timedelta

    return timedelta(milliseconds=int(seconds * 1000))


def _name(code: Any) -> str:
    return str(getattr(code, "name", code)).upper()
