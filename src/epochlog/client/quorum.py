"""The metadata quorum as a client sees it: which controller leads, as DescribeQuorum (KIP-595) tells it.
Here, below the CLI, so that the local cluster harness, the demo and the CLI ask the same way."""

from __future__ import annotations

from kio.schema.describe_quorum.v2.request import DescribeQuorumRequest, PartitionData, TopicData
from kio.schema.types import TopicName
from kio.static.primitive import i32

from epochlog.client.wire import Connection, WireError

METADATA_TOPIC = "__cluster_metadata"


def describe_quorum_request() -> DescribeQuorumRequest:
    """DescribeQuorum v2 for the metadata partition."""
    return DescribeQuorumRequest(
        topics=(TopicData(topic_name=TopicName(METADATA_TOPIC), partitions=(PartitionData(partition_index=i32(0)),)),)
    )


def leader_of(ports: list[int], host: str = "127.0.0.1") -> int:
    """The quorum leader's node id as any of these controllers knows it (-1: none knows)."""
    req = describe_quorum_request()
    for port in ports:
        try:
            with Connection(host, port, client_id="epochlog-metadata-quorum", timeout=2) as conn:
                row = conn.request(req).topics[0].partitions[0]
        except (WireError, OSError, ValueError, IndexError):
            continue
        if int(row.leader_id) >= 0:
            return int(row.leader_id)
    return -1
