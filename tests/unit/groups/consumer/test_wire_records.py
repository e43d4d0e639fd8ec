"""The KIP-848 group records as the broker keeps them in __consumer_offsets (server/groups/consumer_records.py):
every record and tombstone the core writes reads back as itself, keys carry our own versions (Kafka's key
versions with Kafka's values would be misread), and a group tombstone voids the group's earlier records."""

from __future__ import annotations

import pytest

from epochlog.groups.consumer.coordinator import ConsumerGroupCoordinator
from epochlog.groups.consumer.messages import HeartbeatRequest
from epochlog.groups.consumer.records import RECORD_TYPES, replay
from epochlog.server.groups import consumer_records as crec
from epochlog.server.groups import records as classic


def _records() -> list[object]:
    core = ConsumerGroupCoordinator("g", topics={"t": 4, "u": 2})
    out: list[object] = []
    for i, epoch in (("a", 0), ("b", 0)):
        req = HeartbeatRequest(
            "g", i, epoch, rack_id="r1", rebalance_timeout_ms=5000, subscribed_topic_names=("t", "u"), owned=frozenset()
        )
        out += core.heartbeat(0, req)[1]
    out += core.heartbeat(10, HeartbeatRequest("g", "b", -1))[1]  # leaves: tombstones
    return [e for e in out if isinstance(e, RECORD_TYPES)]


def test_every_record_reads_back_as_itself() -> None:
    records = _records()
    kinds = {type(r).__name__ for r in records}
    assert {"ConsumerGroupCurrentMemberAssignmentTombstone", "ConsumerGroupTargetAssignmentMember"} <= kinds
    decoded = []
    for r in records:
        kv = crec.encode(r)  # type: ignore[arg-type]
        assert kv is not None
        key, value = kv
        assert crec.is_consumer_key(key) and classic.decode_key(key) is None  # the classic loader skips them
        decoded.append(crec.decode(key, value))
    assert decoded == records
    g1 = replay("g", records, 0, 45_000)  # type: ignore[arg-type]
    g2 = replay("g", decoded, 0, 45_000)  # type: ignore[arg-type]
    assert (g1.group_epoch, g1.target, set(g1.members)) == (g2.group_epoch, g2.target, set(g2.members))


def test_group_tombstone_and_bad_bytes() -> None:
    key, value = crec.group_tombstone("g")
    assert crec.decode(key, value) == crec.GroupDeleted("g")
    assert crec.decode(classic.group_key("g"), b"x") is None  # not ours
    with pytest.raises(ValueError):
        crec.decode(key, b"\x00\x00{not json")
