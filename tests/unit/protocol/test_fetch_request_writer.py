"""The follower's hand-packed Fetch v12 request is byte for byte what kio's encoder writes."""

from __future__ import annotations

import importlib
from datetime import timedelta

import pytest
from kio.index import load_request_schema

from epochlog.client.wire import encode_request
from epochlog.protocol.fetch_request_writer import ReplicaFetchPartition, encode_replica_fetch

PARTS = {
    "orders": [ReplicaFetchPartition(0, 7, 123_456_789_012, 6, 100, 1 << 20), ReplicaFetchPartition(3, 0, 0, -1, 0, 5)],
    "ünïcode": [ReplicaFetchPartition(1, 2, 9, 2, -1, 1 << 20)],
}


@pytest.mark.parametrize("topics", [["orders"], ["orders", "ünïcode"], []])
def test_matches_kio(topics: list[str]) -> None:
    mod = importlib.import_module(load_request_schema(1, 12).__module__)
    req = load_request_schema(1, 12)(
        replica_id=2,
        max_wait=timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=10 << 20,
        topics=tuple(
            mod.FetchTopic(
                topic=t,
                partitions=tuple(
                    mod.FetchPartition(
                        partition=p.partition,
                        current_leader_epoch=p.current_leader_epoch,
                        fetch_offset=p.fetch_offset,
                        last_fetched_epoch=p.last_fetched_epoch,
                        log_start_offset=p.log_start_offset,
                        partition_max_bytes=p.partition_max_bytes,
                    )
                    for p in PARTS[t]
                ),
            )
            for t in topics
        ),
        forgotten_topics_data=(),
    )
    expected = encode_request(req, 41, "broker-2")
    got = encode_replica_fetch(41, "broker-2", 2, 500, 1, 10 << 20, [(t, PARTS[t]) for t in topics])
    assert got == expected
