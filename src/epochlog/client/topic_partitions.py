"""DescribeTopicPartitions (API 75, KIP-966) from the client side, and the lines kafka-topics.sh 4.x prints
for `--describe`. No client library we use speaks API 75 (confluent-kafka and kafka-python do not), so it
goes through client/wire.py, page by page with the response's cursor. A broker that does not offer it
(ApiVersions says) gets None, and the caller describes through Metadata, printing `Elr: N/A` as Kafka does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.describe_topic_partitions.v0.request import (
    Cursor,
    DescribeTopicPartitionsRequest,
    TopicRequest,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32

from epochlog.client.wire import Connection

if TYPE_CHECKING:
    from epochlog.client.security import ClientSecurity

API_KEY = 75
MAX_PAGES = 10_000  # a broker whose cursor never ends would otherwise keep us here forever


@dataclass
class PartitionRow:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    elr: list[int] | None  # None: the broker did not say (no API 75)
    last_known_elr: list[int] | None
    offline: list[int] = field(default_factory=list)


@dataclass
class TopicRow:
    name: str
    topic_id: str
    error_code: int
    partitions: list[PartitionRow]


def offers(conn: Connection, api_key: int = API_KEY) -> bool:
    resp = conn.request(ApiVersionsRequest(client_software_name="epochlog", client_software_version="1"))
    return any(int(k.api_key) == api_key and int(k.min_version) <= 0 <= int(k.max_version) for k in resp.api_keys)


def describe(
    host: str,
    port: int,
    topics: list[str] | None = None,
    limit: int = 2000,
    timeout: float = 10.0,
    security: ClientSecurity | None = None,
) -> list[TopicRow] | None:
    """Every partition of ``topics`` (all topics when None), following the cursor over pages of at most
    ``limit`` partitions; None if the broker does not offer API 75."""
    with Connection(host, port, timeout, "epochlog-topics", security) as conn:
        if not offers(conn):
            return None
        rows: dict[str, TopicRow] = {}
        cursor: Cursor | None = None
        asked = tuple(TopicRequest(name=TopicName(t)) for t in topics or ())
        for _ in range(MAX_PAGES):
            req = DescribeTopicPartitionsRequest(topics=asked, response_partition_limit=i32(limit), cursor=cursor)
            resp = conn.request(req)
            for t in resp.topics:
                row = rows.setdefault(str(t.name), TopicRow(str(t.name), str(t.topic_id or ""), int(t.error_code), []))
                row.partitions.extend(_partition(p) for p in t.partitions)
            if resp.next_cursor is None:
                break
            cursor = Cursor(topic_name=resp.next_cursor.topic_name, partition_index=resp.next_cursor.partition_index)
        return list(rows.values())


def _partition(p: object) -> PartitionRow:
    def ids(v: object) -> list[int] | None:
        return None if v is None else [int(x) for x in v]  # type: ignore[attr-defined]

    return PartitionRow(
        int(p.partition_index),  # type: ignore[attr-defined]
        int(p.leader_id),  # type: ignore[attr-defined]
        int(p.leader_epoch),  # type: ignore[attr-defined]
        ids(p.replica_nodes) or [],  # type: ignore[attr-defined]
        ids(p.isr_nodes) or [],  # type: ignore[attr-defined]
        ids(p.eligible_leader_replicas),  # type: ignore[attr-defined]
        ids(p.last_known_elr),  # type: ignore[attr-defined]
        ids(p.offline_replicas) or [],  # type: ignore[attr-defined]
    )


def _ids(v: list[int] | None) -> str:
    return "N/A" if v is None else ",".join(map(str, v))


def topic_line(row: TopicRow, configs: dict[str, str]) -> str:
    """kafka-topics.sh's topic line: id (unless the zero id), partition count, replication factor, and the
    configs set on the topic."""
    rf = len(row.partitions[0].replicas) if row.partitions else 0
    parts = [f"Topic: {row.name}"]
    if row.topic_id and row.topic_id != "00000000-0000-0000-0000-000000000000":
        parts.append(f"TopicId: {row.topic_id}")
    parts += [
        f"PartitionCount: {len(row.partitions)}",
        f"ReplicationFactor: {rf}",
        "Configs: " + ",".join(f"{k}={v}" for k, v in sorted(configs.items())),
    ]
    return "\t".join(parts)


def partition_line(topic: str, p: PartitionRow) -> str:
    """kafka-topics.sh 4.x's partition line, tab-separated and indented by one tab as it prints it."""
    leader = str(p.leader) if p.leader >= 0 else "none"
    return (
        f"\tTopic: {topic}\tPartition: {p.partition}\tLeader: {leader}\tReplicas: {_ids(p.replicas)}"
        f"\tIsr: {_ids(p.isr)}\tElr: {_ids(p.elr)}\tLastKnownElr: {_ids(p.last_known_elr)}"
    )
