"""A coordinator that takes over a __consumer_offsets partition rebuilds its KIP-848 groups from the records the
one before it wrote, in Kafka's record types with topics named by id, mapping the ids back to names with the
cluster's metadata (server/groups: consumer_groups.py, loading.py)."""

from __future__ import annotations

import uuid

from epochlog.groups.consumer.messages import HeartbeatRequest
from epochlog.protocol.records import iter_records
from epochlog.server.groups import GroupCoordinator

from ..helpers import Wall, aio, make

IDS = {"t": uuid.UUID(int=1), "u": uuid.UUID(int=2)}


@aio
async def test_a_new_coordinator_rebuilds_the_group_from_kafkas_records() -> None:
    c, clock, store = await make()
    c.topic_counts = lambda: {"t": 4, "u": 2}
    c.topic_ids = lambda: IDS
    for member in ("a", "b"):
        req = HeartbeatRequest(
            "g", member, 0, rebalance_timeout_ms=5000, subscribed_topic_names=("t", "u"), owned=frozenset()
        )
        assert (await c.consumer_heartbeat(req)).error_code == 0
    before = c.consumer_groups["g"].group
    assert sum(len(p) for p in before.target.values()) == 6

    p = c.partition_for("g")
    types = {int.from_bytes(r.key[:2], "big") for b in store.read_batches(p) for r in iter_records(b) if r.key}
    assert types == {3, 4, 5, 6, 7, 8}  # Kafka's ConsumerGroup* record types, nothing of ours

    other = GroupCoordinator(store, c.config, clock=clock, wall_clock=Wall())
    await other.start(run_background=False)
    other.topic_counts, other.topic_ids = c.topic_counts, c.topic_ids
    other.load_partition(p)
    after = other.consumer_groups["g"].group
    assert (after.group_epoch, after.assignment_epoch, after.target) == (
        before.group_epoch,
        before.assignment_epoch,
        before.target,
    )
    assert {m: (x.member_epoch, x.assigned) for m, x in after.members.items()} == {
        m: (x.member_epoch, x.assigned) for m, x in before.members.items()
    }

    # DeleteGroups of the emptied group leaves nothing to load.
    for member in ("a", "b"):
        await c.consumer_heartbeat(HeartbeatRequest("g", member, -1))
    assert await c.delete_consumer_group("g") == 0
    third = GroupCoordinator(store, c.config, clock=clock, wall_clock=Wall())
    await third.start(run_background=False)
    third.topic_counts, third.topic_ids = c.topic_counts, c.topic_ids
    third.load_partition(p)
    assert "g" not in third.consumer_groups
