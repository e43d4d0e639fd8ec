"""Offset commit/fetch rules, persistence in __consumer_offsets, tombstones and retention."""

from __future__ import annotations

import asyncio

from epochlog.protocol.errors import Err
from epochlog.protocol.records import iter_records
from epochlog.server.groups import EMPTY, STABLE, GroupCoordinator, MemoryOffsetsStore, OffsetCommit
from epochlog.server.groups import records as rec

from .helpers import SESSION_MS, FakeClock, Wall, aio, join, make, settle, stable_group, sync

DAY_MS = 24 * 3600 * 1000


@aio
async def test_commit_and_fetch_with_leader_epoch_and_metadata() -> None:
    c, _, _ = await make()
    r = await stable_group(c)
    res = await c.commit_offsets(
        "g", 1, r.member_id, None, [OffsetCommit("t", 0, 42, 5, "meta"), OffsetCommit("t", 1, 7, -1, None)]
    )
    assert res == {("t", 0): Err.NONE, ("t", 1): Err.NONE}
    code, rows = c.fetch_offsets("g", [("t", 0), ("t", 1), ("t", 2)])
    assert code == Err.NONE
    assert [(o.topic, o.partition, o.offset, o.leader_epoch, o.metadata, o.error_code) for o in rows] == [
        ("t", 0, 42, 5, "meta", 0),
        ("t", 1, 7, -1, "", 0),
        ("t", 2, -1, -1, "", 0),
    ]
    _, every = c.fetch_offsets("g", None)
    assert [(o.partition, o.offset) for o in every] == [(0, 42), (1, 7)]
    assert c.fetch_offsets("unknown", None) == (Err.NONE, [])
    assert c.groups["g"].offsets[("t", 0)].commit_timestamp == 1_700_000_000_000


@aio
async def test_commit_validation() -> None:
    c, _, _ = await make()
    r = await stable_group(c)
    one = [OffsetCommit("t", 0, 1)]
    assert await c.commit_offsets("g", 9, r.member_id, None, one) == {("t", 0): Err.ILLEGAL_GENERATION}
    assert await c.commit_offsets("g", 1, "stranger", None, one) == {("t", 0): Err.UNKNOWN_MEMBER_ID}
    # generation -1 is not a free pass once the group has members
    assert await c.commit_offsets("g", -1, "", None, one) == {("t", 0): Err.UNKNOWN_MEMBER_ID}
    assert await c.commit_offsets("gone", 3, "m", None, one) == {("t", 0): Err.ILLEGAL_GENERATION}
    assert await c.commit_offsets("", -1, "", None, one) == {("t", 0): Err.INVALID_GROUP_ID}
    big = [OffsetCommit("t", 0, 1, -1, "x" * 5000)]
    assert await c.commit_offsets("g", 1, r.member_id, None, big) == {("t", 0): 12}  # OFFSET_METADATA_TOO_LARGE


@aio
async def test_commit_during_rebalance() -> None:
    c, _, _ = await make()
    a = await stable_group(c)
    tb = join(c, client_id="b")
    await settle()
    one = [OffsetCommit("t", 0, 5)]
    # PreparingRebalance: the generation is still valid and Kafka takes the commit (revocation commits).
    assert await c.commit_offsets("g", 1, a.member_id, None, one) == {("t", 0): Err.NONE}
    ta = join(c, member_id=a.member_id)
    await settle()
    assert tb.done() and ta.done()
    # CompletingRebalance: refused until the assignment is known.
    assert await c.commit_offsets("g", 2, a.member_id, None, one) == {("t", 0): Err.REBALANCE_IN_PROGRESS}


@aio
async def test_simple_commit_on_a_group_without_members() -> None:
    c, _, _ = await make()
    res = await c.commit_offsets("standalone", -1, "", None, [OffsetCommit("t", 3, 100, 2, "m")])
    assert res == {("t", 3): Err.NONE}
    g = c.groups["standalone"]
    assert g.state == EMPTY and g.protocol_type is None
    assert c.fetch_offsets("standalone", [("t", 3)])[1][0].offset == 100
    assert c.list_groups() == [("standalone", "", "Empty")]
    # an emptied consumer group takes simple commits too
    r = await stable_group(c)
    await c.leave_group("g", [(r.member_id, None)])
    await settle()
    assert await c.commit_offsets("g", -1, "", None, [OffsetCommit("t", 0, 1)]) == {("t", 0): Err.NONE}


@aio
async def test_store_failure_does_not_expose_the_offset() -> None:
    c, _, store = await make()
    store.fail = OSError("disk full")
    res = await c.commit_offsets("g", -1, "", None, [OffsetCommit("t", 0, 1)])
    assert res == {("t", 0): Err.COORDINATOR_NOT_AVAILABLE}
    assert c.fetch_offsets("g", [("t", 0)])[1][0].offset == -1


@aio
async def test_records_go_to_the_groups_partition_in_kafkas_format() -> None:
    c, _, store = await make()
    await c.commit_offsets("g", -1, "", None, [OffsetCommit("t", 0, 42, 5, "meta")])
    p = c.partition_for("g")
    assert list(store.partitions) == [p]
    (r,) = [r for b in store.read_batches(p) for r in iter_records(b)]
    assert r.key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x00"
    assert r.value is not None and r.value[:2] == b"\x00\x03"
    v = rec.decode_offset_value(r.value)
    assert (v.offset, v.leader_epoch, v.metadata, v.commit_timestamp) == (42, 5, "meta", 1_700_000_000_000)


@aio
async def test_persistence_round_trip() -> None:
    c, clock, store = await make()
    r = await stable_group(c)
    await c.commit_offsets("g", 1, r.member_id, None, [OffsetCommit("t", 0, 10, 3, "a")])
    await c.commit_offsets("g", 1, r.member_id, None, [OffsetCommit("t", 0, 11, 4, "b")])  # last one wins
    await c.commit_offsets("solo", -1, "", None, [OffsetCommit("u", 2, 99)])
    await c.stop()

    c2, _, _ = await make(store=store, clock=FakeClock(clock.now + 5))
    o = c2.fetch_offsets("g", [("t", 0)])[1][0]
    assert (o.offset, o.leader_epoch, o.metadata) == (11, 4, "b")
    assert c2.fetch_offsets("solo", None)[1][0].offset == 99
    g = c2.groups["g"]
    # The group resumes where it was: same generation, leader and assignment, members still valid.
    assert (g.state, g.generation, g.protocol_type, g.protocol_name, g.leader) == (
        STABLE,
        1,
        "consumer",
        "range",
        r.member_id,
    )
    assert c2.heartbeat("g", 1, r.member_id, None) == Err.NONE
    s = await c2.sync_group("g", 1, r.member_id, None, None, None, {})
    assert s.assignment == b"assignment-1"
    d = c2.describe_groups(["g"])[0]
    assert d["members"][0]["member_metadata"] == b"sub-cli"


@aio
async def test_restored_member_that_never_returns_expires() -> None:
    c, clock, store = await make()
    await stable_group(c)
    c2, clock2, _ = await make(store=store, clock=FakeClock(clock.now))
    clock2.now += SESSION_MS / 1000 + 1
    c2.tick()
    await settle()
    assert c2.groups["g"].state == EMPTY and c2.groups["g"].generation == 2
    c3, _, _ = await make(store=store)
    assert c3.groups["g"].state == EMPTY and c3.groups["g"].generation == 2


@aio
async def test_delete_group_writes_tombstones() -> None:
    c, _, store = await make()
    r = await stable_group(c)
    await c.commit_offsets("g", 1, r.member_id, None, [OffsetCommit("t", 0, 1), OffsetCommit("t", 1, 2)])
    await c.commit_offsets("keep", -1, "", None, [OffsetCommit("t", 0, 3)])
    assert await c.delete_groups(["g", "nope"]) == [("g", Err.NON_EMPTY_GROUP), ("nope", Err.GROUP_ID_NOT_FOUND)]
    await c.leave_group("g", [(r.member_id, None)])
    await settle()
    assert await c.delete_groups(["g"]) == [("g", Err.NONE)]
    assert "g" not in c.groups and c.fetch_offsets("g", None) == (Err.NONE, [])
    c2, _, _ = await make(store=store)
    assert "g" not in c2.groups
    assert c2.fetch_offsets("keep", None)[1][0].offset == 3


@aio
async def test_replay_applies_tombstones_and_last_value_wins() -> None:
    store = MemoryOffsetsStore(4)
    c, _, _ = await make(store=store)
    await c.commit_offsets("s", -1, "", None, [OffsetCommit("t", 0, 1), OffsetCommit("t", 1, 2)])
    await c.commit_offsets("s", -1, "", None, [OffsetCommit("t", 0, 5)])
    from epochlog.protocol.records import build_batch

    await store.append(c.partition_for("s"), build_batch([(rec.offset_key("s", "t", 1), None)]))
    c2, _, _ = await make(store=store)
    assert [(o.partition, o.offset) for o in c2.fetch_offsets("s", None)[1]] == [(0, 5)]


@aio
async def test_offsets_of_a_standalone_group_expire_by_commit_time() -> None:
    wall = Wall()
    c, _, store = await make(wall=wall, offsets_retention_ms=DAY_MS)
    await c.commit_offsets("s", -1, "", None, [OffsetCommit("t", 0, 1)])
    wall.now += 3600
    await c.commit_offsets("s", -1, "", None, [OffsetCommit("t", 1, 1)])
    wall.now += 24 * 3600 - 3600
    assert await c.expire_offsets() == 1
    assert [o.partition for o in c.fetch_offsets("s", None)[1]] == [1]
    wall.now += 3600
    assert await c.expire_offsets() == 1
    assert "s" not in c.groups  # nothing left: the group is gone, with a tombstone
    c2, _, _ = await make(store=store)
    assert "s" not in c2.groups


@aio
async def test_consumer_group_offsets_expire_only_once_empty_for_the_retention() -> None:
    wall = Wall()
    c, _, _ = await make(wall=wall, offsets_retention_ms=DAY_MS)
    r = await stable_group(c)
    await c.commit_offsets("g", 1, r.member_id, None, [OffsetCommit("t", 0, 1)])
    wall.now += 3 * 24 * 3600
    c.heartbeat("g", 1, r.member_id, None)
    assert await c.expire_offsets() == 0  # old, but the group still has a member
    await c.leave_group("g", [(r.member_id, None)])
    await settle()
    wall.now += 24 * 3600 - 1
    assert await c.expire_offsets() == 0  # Empty, but not yet for a whole retention period
    wall.now += 1
    assert await c.expire_offsets() == 1 and "g" not in c.groups


@aio
async def test_load_in_progress_before_start() -> None:
    from epochlog.server.groups import GroupConfig, GroupCoordinator

    c = GroupCoordinator(MemoryOffsetsStore(1), GroupConfig(offsets_topic_num_partitions=1))
    assert c.heartbeat("g", 1, "m", None) == Err.COORDINATOR_LOAD_IN_PROGRESS
    assert c.fetch_offsets("g", None) == (Err.COORDINATOR_LOAD_IN_PROGRESS, [])
    r = await c.join_group("g", "", None, "c", "h", SESSION_MS, SESSION_MS, "consumer", [("r", b"")], True)
    assert r.error_code == Err.COORDINATOR_LOAD_IN_PROGRESS
    assert await c.commit_offsets("g", -1, "", None, [OffsetCommit("t", 0, 1)]) == {
        ("t", 0): Err.COORDINATOR_LOAD_IN_PROGRESS
    }


@aio
async def test_sync_assignment_is_persisted_before_members_get_it() -> None:
    c, _, store = await make()
    t = join(c)
    await settle()
    r = t.result()
    store.fail = OSError("no log")
    s = sync(c, r, {r.member_id: b"x"})
    await settle()
    assert s.result().error_code == Err.REBALANCE_IN_PROGRESS
    store.fail = None


@aio
async def test_a_coordinator_serves_only_the_partitions_it_leads() -> None:
    """Partitions load when this broker gains their leadership and unload when it loses it, on a single node
    as in a cluster (there is no mode that serves every partition): a group of a partition not loaded here
    gets NOT_COORDINATOR, and a parked join is sent away the same way."""
    c, clock, store = await make()
    r = await stable_group(c)
    assert await c.commit_offsets("g", 1, r.member_id, None, [OffsetCommit("t", 0, 42)]) == {("t", 0): Err.NONE}
    p = c.partition_for("g")

    other = GroupCoordinator(store, c.config, clock=clock, wall_clock=Wall())
    await other.start(run_background=False)
    one = [OffsetCommit("t", 0, 1)]
    assert other.fetch_offsets("g", None) == (Err.NOT_COORDINATOR, [])
    assert await other.commit_offsets("g", -1, "", None, one) == {("t", 0): Err.NOT_COORDINATOR}
    assert other.heartbeat("g", 1, r.member_id, None) == Err.NOT_COORDINATOR

    other.load_partition(p)  # this broker now leads the group's partition: it has every commit
    code, rows = other.fetch_offsets("g", None)
    assert code == Err.NONE and [(o.partition, o.offset) for o in rows] == [(0, 42)]
    assert other.heartbeat("g", 1, r.member_id, None) == Err.NONE  # members carry over
    other.load_partition((p + 1) % store.num_partitions)
    assert "g" in other.groups

    parked = join(other, client_id="newcomer")
    await settle()
    other.unload_partition(p)
    assert "g" not in other.groups and other.fetch_offsets("g", None)[0] == Err.NOT_COORDINATOR
    assert (await parked).error_code == Err.NOT_COORDINATOR


class HeldStore(MemoryOffsetsStore):
    """An offsets store whose next append, once in the log, waits until released, as a leader's write
    waits for the ISR (LogOffsetsStore)."""

    def __init__(self, num_partitions: int) -> None:
        super().__init__(num_partitions)
        self.hold: asyncio.Event | None = None

    async def append(self, partition: int, batch: bytes) -> None:
        hold, self.hold = self.hold, None
        await super().append(partition, batch)
        if hold is not None:
            await hold.wait()


@aio
async def test_an_offset_committed_again_while_its_expiry_waits_is_kept() -> None:
    wall = Wall()
    store = HeldStore(4)
    c, _, _ = await make(store=store, wall=wall, offsets_retention_ms=DAY_MS)
    await c.commit_offsets("s", -1, "", None, [OffsetCommit("t", 0, 1)])
    wall.now += 24 * 3600
    release = store.hold = asyncio.Event()
    expiry = asyncio.ensure_future(c.expire_offsets())
    await settle()
    assert await c.commit_offsets("s", -1, "", None, [OffsetCommit("t", 0, 2)]) == {("t", 0): Err.NONE}
    release.set()
    await expiry
    assert "s" in c.groups
    assert [(o.partition, o.offset) for o in c.fetch_offsets("s", None)[1]] == [(0, 2)]
    c2, _, _ = await make(store=store)  # and the log agrees: the new commit follows the tombstone
    assert [(o.partition, o.offset) for o in c2.fetch_offsets("s", None)[1]] == [(0, 2)]


@aio
async def test_a_join_while_a_group_deletion_waits_starts_a_new_group() -> None:
    store = HeldStore(4)
    c, _, _ = await make(store=store)
    await c.commit_offsets("s", -1, "", None, [OffsetCommit("t", 0, 1)])
    release = store.hold = asyncio.Event()
    deletion = asyncio.ensure_future(c.delete_groups(["s"]))
    await settle()
    joined = join(c, "s")
    await settle()
    release.set()
    assert await deletion == [("s", Err.NONE)]
    await settle()
    assert joined.done() and joined.result().error_code == Err.NONE
    g = c.groups["s"]
    assert g.state != "Dead" and list(g.members) == [joined.result().member_id] and not g.offsets


@aio
async def test_a_commit_that_waits_across_a_group_deletion_does_not_bring_the_dead_group_back() -> None:
    store = HeldStore(4)
    c, _, _ = await make(store=store)
    await c.commit_offsets("s", -1, "", None, [OffsetCommit("t", 0, 1)])
    release = store.hold = asyncio.Event()
    commit = asyncio.ensure_future(c.commit_offsets("s", -1, "", None, [OffsetCommit("t", 0, 2)]))
    await settle()
    assert await c.delete_groups(["s"]) == [("s", Err.NONE)]
    release.set()
    await commit  # its record precedes the tombstones in the log: the deletion wins
    assert "s" not in c.groups
    assert await c.commit_offsets("s", -1, "", None, [OffsetCommit("t", 0, 3)]) == {("t", 0): Err.NONE}
    assert [(o.partition, o.offset) for o in c.fetch_offsets("s", None)[1]] == [(0, 3)]
