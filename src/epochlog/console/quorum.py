"""The metadata quorum's state for the overview: DescribeQuorum (KIP-595) asked of a controller.

Brokers' Metadata cannot tell the quorum's active controller (its controller id is a live broker that takes
admin requests), so the console asks the controllers themselves when given their addresses
(`--bootstrap-controller`, as kafka-metadata-quorum.sh takes them). The fields are those of
`epochlog metadata-quorum describe`.
"""

from __future__ import annotations

from typing import Any

from kio.schema.describe_quorum.v2.request import DescribeQuorumRequest, PartitionData, TopicData
from kio.schema.types import TopicName
from kio.static.primitive import i32

from epochlog.client.epochs import parse_bootstrap
from epochlog.client.quorum import METADATA_TOPIC
from epochlog.client.wire import Connection, ConnectionPool, WireError


def quorum_view(row: Any, now_ms: int) -> dict[str, Any]:
    """From the metadata partition's DescribeQuorum row: the leader, its epoch and high watermark, and each
    voter's and observer's lag behind the leader's log end (pure, so it can be tested on crafted rows)."""
    leader = int(row.leader_id)
    leader_end = next((int(v.log_end_offset) for v in row.current_voters if int(v.replica_id) == leader), -1)

    def replica(r: Any, role: str) -> dict[str, Any]:
        caught_up = int(r.last_caught_up_timestamp)
        return {
            "node_id": int(r.replica_id),
            "role": role,
            "log_end_offset": int(r.log_end_offset),
            "lag": max(leader_end - int(r.log_end_offset), 0) if leader_end >= 0 else None,
            # The controller's clock may run a little ahead of ours: never "-1 ms ago".
            "caught_up_ms_ago": max(now_ms - caught_up, 0) if caught_up >= 0 else None,
        }

    voters = sorted(row.current_voters, key=lambda v: (int(v.replica_id) != leader, int(v.replica_id)))
    return {
        "leader_id": leader,
        "leader_epoch": int(row.leader_epoch),
        "high_watermark": int(row.high_watermark),
        "voters": [replica(v, "leader" if int(v.replica_id) == leader else "follower") for v in voters],
        "observers": [replica(o, "observer") for o in sorted(row.observers, key=lambda o: int(o.replica_id))],
    }


class QuorumClient:
    def __init__(self, bootstrap_controllers: str, timeout: float = 2.0) -> None:
        self.addrs = parse_bootstrap(bootstrap_controllers)
        self.timeout = timeout
        self._pool = ConnectionPool(timeout, client_id="epochlog-console")

    def _conn(self, addr: tuple[str, int]) -> Connection:
        return self._pool.get(addr)

    def describe(self, now_ms: int) -> dict[str, Any]:
        req = DescribeQuorumRequest(
            topics=(
                TopicData(topic_name=TopicName(METADATA_TOPIC), partitions=(PartitionData(partition_index=i32(0)),)),
            )
        )
        errors = []
        # Any controller answers for the quorum; one that was killed refuses at once on loopback.
        for addr in self.addrs:
            try:
                resp = self._conn(addr).request(req)
            except WireError as e:
                errors.append(str(e))
                continue
            if int(resp.error_code):
                errors.append(f"{addr[0]}:{addr[1]}: DescribeQuorum error {int(resp.error_code)}")
                continue
            row = resp.topics[0].partitions[0]
            if int(row.error_code) or int(row.leader_id) < 0:
                errors.append(f"{addr[0]}:{addr[1]}: no quorum leader known (error {int(row.error_code)})")
                continue
            return {**quorum_view(row, now_ms), "asked": f"{addr[0]}:{addr[1]}"}
        raise WireError("no controller answered DescribeQuorum: " + "; ".join(errors))

    def close(self) -> None:
        self._pool.close()
