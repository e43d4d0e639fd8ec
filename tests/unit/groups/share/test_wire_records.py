"""The share groups' records as the broker keeps them: the group records in __consumer_offsets
(server/groups/share_records.py) and the share coordinator's in __share_group_state (server/share/state_log.py).
Every record the cores write reads back as itself and replays to the same group and share-partition state; the
group records' keys are Kafka's ShareGroup* record types (test_kafka_group_records.py has their bytes), which
neither the classic loader nor the KIP-848 loader takes for theirs."""

from __future__ import annotations

import uuid

import pytest

from epochlog.groups.share.coordinator import ShareGroupCoordinator
from epochlog.groups.share.group_records import replay
from epochlog.groups.share.messages import AckBatch, ShareHeartbeatRequest, StateWrite
from epochlog.groups.share.model import ACCEPT, SharePartitionConfig
from epochlog.groups.share.partition import SharePartition
from epochlog.groups.share.records import ShareStateStore
from epochlog.server.groups import consumer_records as crec
from epochlog.server.groups import records as classic
from epochlog.server.groups import share_records as srec
from epochlog.server.share import state_log

IDS = {"t": uuid.UUID(int=7)}


def test_group_records_read_back_as_themselves() -> None:
    core = ShareGroupCoordinator("g", topics={"t": 2})
    out: list[object] = []
    for member in ("a", "b"):
        out += core.heartbeat(0, ShareHeartbeatRequest("g", member, 0, subscribed_topic_names=("t",)))[1]
    out += core.heartbeat(10, ShareHeartbeatRequest("g", "b", -1))[1]
    records = [r for r in out if type(r).__module__.endswith("group_records")]
    assert {"ShareGroupCurrentMemberAssignmentTombstone", "ShareGroupTargetAssignmentMember"} <= {
        type(r).__name__ for r in records
    }
    decoded = []
    for r in records:
        key, value = srec.encode(r, IDS)  # type: ignore[arg-type]
        assert 9 <= int.from_bytes(key[:2], "big") <= 14
        assert srec.is_share_key(key) and not crec.is_consumer_key(key) and classic.decode_key(key) is None
        decoded.append(srec.decode(key, value, {v: k for k, v in IDS.items()}))
    assert decoded == records
    g1, g2 = replay("g", records, 0, 45_000), replay("g", decoded, 0, 45_000)  # type: ignore[arg-type]
    assert (
        (g1.group_epoch, g1.target, set(g1.members)) == (g2.group_epoch, g2.target, set(g2.members)) != (0, {}, set())
    )
    key, value = srec.group_tombstones("g")[-1]
    assert srec.decode(key, value, {}) == srec.ShareGroupDeleted("g")
    with pytest.raises(ValueError):
        srec.decode(key, b"\x00\x00", {})


def test_state_records_rebuild_the_share_partition() -> None:
    config = SharePartitionConfig(record_lock_duration_ms=1000, delivery_count_limit=3)
    sp, effects = SharePartition.create(config, 0, 0, None, leader_epoch=1)
    _got, more = sp.acquire(0, "m", [(0, 9)], 100, 10)
    code, more2 = sp.acknowledge(1, "m", [AckBatch(0, 4, (ACCEPT,))])
    assert code == 0
    store = ShareStateStore(updates_per_snapshot=2)
    log: list[tuple[bytes, bytes]] = []
    key = ("g", "topic-id", 0)
    for w in [e for e in effects + more + more2 if isinstance(e, StateWrite)]:
        code, recs = store.write(key, w.leader_epoch, w.state_epoch, w.start_offset, w.batches)
        assert code == 0
        log += [state_log.encode(r) for r in recs]
    decoded = [state_log.decode(k, v) for k, v in log]
    assert ShareStateStore.from_records([r for r in decoded if r is not None]).states == store.states
    rebuilt, _ = SharePartition.from_state(config, store.states[key], leader_epoch=2)
    assert rebuilt.start_offset == 5 and rebuilt.next_fetch_offset() == 5  # accepted stay accepted
    assert state_log.decode(b"\x00\x02xx", b"") is None  # another kind of key


def test_a_deleted_share_partition_stays_deleted_on_replay() -> None:
    store = ShareStateStore()
    kept, gone = ("g", "t", 0), ("g", "t", 1)
    log: list[tuple[bytes | None, bytes | None]] = []
    for key in (kept, gone):
        log += [state_log.encode(r) for r in store.initialize(key, 1, 10)[1]]
    log += state_log.tombstones(gone)
    log += [state_log.encode(r) for r in store.write(kept, 0, 1, 12, ())[1]]
    replayed = ShareStateStore()
    state_log.load(replayed, log)
    assert set(replayed.states) == {kept} and replayed.states[kept].start_offset == 12
