"""Join, sync, heartbeat, leave and the timers of the classic group protocol, on a fake clock."""

from __future__ import annotations

from epochlog.protocol.errors import Err
from epochlog.server.groups import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE

from .helpers import REBALANCE_MS, SESSION_MS, aio, join, join_one, make, settle, stable_group, sync


@aio
async def test_single_member_join_sync_heartbeat() -> None:
    c, _, _ = await make()
    r = await join_one(c, client_id="app")
    assert r.error_code == Err.NONE
    assert r.member_id.startswith("app-") and len(r.member_id) == len("app-") + 36
    assert (r.generation_id, r.protocol_type, r.protocol_name, r.leader) == (1, "consumer", "range", r.member_id)
    assert r.members == [(r.member_id, None, b"sub-app")]
    assert c.groups["g"].state == COMPLETING_REBALANCE
    assert c.heartbeat("g", 1, r.member_id, None) == Err.NONE  # allowed between join and sync
    s = sync(c, r, {r.member_id: b"p0,p1"})
    await settle()
    assert s.result().error_code == Err.NONE and s.result().assignment == b"p0,p1"
    assert s.result().protocol_name == "range"
    assert c.groups["g"].state == STABLE
    assert c.heartbeat("g", 1, r.member_id, None) == Err.NONE
    assert c.heartbeat("g", 0, r.member_id, None) == Err.ILLEGAL_GENERATION
    assert c.heartbeat("g", 1, "nobody", None) == Err.UNKNOWN_MEMBER_ID
    assert c.heartbeat("other", 1, r.member_id, None) == Err.UNKNOWN_MEMBER_ID


@aio
async def test_two_members_rebalance() -> None:
    c, _, _ = await make()
    a = await stable_group(c)
    tb = join(c, client_id="b")
    await settle()
    assert not tb.done() and c.groups["g"].state == PREPARING_REBALANCE
    # The first member learns of the rebalance from its heartbeat, and rejoins.
    assert c.heartbeat("g", 1, a.member_id, None) == Err.REBALANCE_IN_PROGRESS
    ta = join(c, member_id=a.member_id)
    await settle()
    ra, rb = ta.result(), tb.result()
    assert ra.error_code == rb.error_code == Err.NONE
    assert ra.generation_id == rb.generation_id == 2
    assert ra.leader == rb.leader == a.member_id  # the first joiner keeps leading
    assert {m for m, _, _ in ra.members} == {a.member_id, rb.member_id} and rb.members == []
    # The follower's sync waits for the leader's.
    sb = sync(c, rb)
    await settle()
    assert not sb.done()
    sa = sync(c, ra, {ra.member_id: b"A", rb.member_id: b"B"})
    await settle()
    assert (sa.result().error_code, sa.result().assignment) == (Err.NONE, b"A")
    assert (sb.result().error_code, sb.result().assignment) == (Err.NONE, b"B")
    assert c.groups["g"].state == STABLE
    # The old generation is refused now.
    assert c.heartbeat("g", 1, a.member_id, None) == Err.ILLEGAL_GENERATION


@aio
async def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    c, clock, _ = await make()
    a = await stable_group(c)
    tb = join(c, client_id="b")
    await settle()
    clock.now += REBALANCE_MS / 1000 - 1
    c.tick()
    assert not tb.done()
    clock.now += 1
    c.tick()
    await settle()
    rb = tb.result()
    assert rb.error_code == Err.NONE and rb.generation_id == 2 and rb.leader == rb.member_id
    assert list(c.groups["g"].members) == [rb.member_id]
    assert c.heartbeat("g", 1, a.member_id, None) == Err.UNKNOWN_MEMBER_ID


@aio
async def test_session_timeout_removes_member() -> None:
    c, clock, _ = await make()
    r = await stable_group(c)
    clock.now += SESSION_MS / 1000 - 0.5
    assert c.heartbeat("g", 1, r.member_id, None) == Err.NONE  # resets the session
    clock.now += SESSION_MS / 1000 - 0.5
    c.tick()
    assert r.member_id in c.groups["g"].members
    clock.now += 1
    c.tick()
    await settle()
    g = c.groups["g"]
    assert not g.members and g.state == EMPTY and g.generation == 2
    assert c.heartbeat("g", 1, r.member_id, None) == Err.UNKNOWN_MEMBER_ID


@aio
async def test_session_expiry_of_one_member_rebalances_the_other() -> None:
    c, clock, _ = await make()
    a = await stable_group(c)
    tb = join(c, client_id="b")
    ta = join(c, member_id=a.member_id)
    await settle()
    ra, rb = ta.result(), tb.result()
    sa, sb = sync(c, ra, {}), sync(c, rb)
    await settle()
    assert sa.result().error_code == sb.result().error_code == Err.NONE
    clock.now += SESSION_MS / 1000 - 1
    assert c.heartbeat("g", 2, rb.member_id, None) == Err.NONE
    clock.now += 2
    c.tick()
    assert list(c.groups["g"].members) == [rb.member_id]
    assert c.heartbeat("g", 2, rb.member_id, None) == Err.REBALANCE_IN_PROGRESS
    t = join(c, member_id=rb.member_id)
    await settle()
    assert t.result().generation_id == 3 and t.result().leader == rb.member_id


@aio
async def test_leave_triggers_rebalance() -> None:
    c, _, _ = await make()
    a = await stable_group(c)
    tb = join(c, client_id="b")
    ta = join(c, member_id=a.member_id)
    await settle()
    ra, rb = ta.result(), tb.result()
    sync(c, ra, {})
    sync(c, rb)
    await settle()
    code, per_member = await c.leave_group("g", [(ra.member_id, None), ("ghost", None)])
    assert (code, per_member) == (Err.NONE, [Err.NONE, Err.UNKNOWN_MEMBER_ID])
    g = c.groups["g"]
    assert g.state == PREPARING_REBALANCE and g.leader == rb.member_id
    assert c.heartbeat("g", 2, rb.member_id, None) == Err.REBALANCE_IN_PROGRESS
    t = join(c, member_id=rb.member_id, client_id="b")
    await settle()
    assert t.result().generation_id == 3 and t.result().members == [(rb.member_id, None, b"sub-b")]
    assert await c.leave_group("nope", [("x", None)]) == (Err.NONE, [Err.UNKNOWN_MEMBER_ID])


@aio
async def test_last_member_leaving_empties_the_group() -> None:
    c, _, _ = await make()
    r = await stable_group(c)
    await c.leave_group("g", [(r.member_id, None)])
    await settle()
    g = c.groups["g"]
    assert g.state == EMPTY and g.generation == 2 and g.leader is None


@aio
async def test_member_id_required_flow() -> None:
    c, _, _ = await make()
    first = join(c, client_id="v4", require_known=True)
    await settle()
    r0 = first.result()
    assert r0.error_code == Err.MEMBER_ID_REQUIRED and r0.member_id.startswith("v4-")
    assert not c.groups["g"].members and r0.member_id in c.groups["g"].pending
    second = join(c, member_id=r0.member_id, client_id="v4", require_known=True)
    await settle()
    r1 = second.result()
    assert r1.error_code == Err.NONE and r1.member_id == r0.member_id and r1.generation_id == 1
    # A made-up member id is refused.
    bad = join(c, member_id="v4-made-up", require_known=True)
    await settle()
    assert bad.result().error_code == Err.UNKNOWN_MEMBER_ID


@aio
async def test_pending_member_that_never_returns_does_not_block_the_rebalance() -> None:
    c, clock, _ = await make()
    a = await stable_group(c)
    ghost = join(c, client_id="ghost", require_known=True)
    await settle()
    assert ghost.result().error_code == Err.MEMBER_ID_REQUIRED
    # A pending id alone does not rebalance; a real rejoin completes without waiting for the ghost
    # once its pending id lapses.
    ta = join(c, member_id=a.member_id, protocols=[("range", b"changed")])
    await settle()
    assert not ta.done()
    clock.now += SESSION_MS / 1000
    c.tick()
    await settle()
    assert ta.result().error_code == Err.NONE and ta.result().generation_id == 2


@aio
async def test_inconsistent_protocols() -> None:
    c, _, _ = await make()
    await stable_group(c)
    t = join(c, client_id="b", protocols=[("roundrobin", b"")])
    await settle()
    assert t.result().error_code == Err.INCONSISTENT_GROUP_PROTOCOL
    t = asyncio_join_with_type(c, "connect")
    await settle()
    assert t.result().error_code == Err.INCONSISTENT_GROUP_PROTOCOL
    t = join(c, group="h", protocols=[])
    await settle()
    assert t.result().error_code == Err.INCONSISTENT_GROUP_PROTOCOL


def asyncio_join_with_type(c, protocol_type: str):  # type: ignore[no-untyped-def]
    import asyncio

    return asyncio.ensure_future(
        c.join_group("g", "", None, "x", "h", SESSION_MS, REBALANCE_MS, protocol_type, [("range", b"")], False)
    )


@aio
async def test_protocol_chosen_by_votes() -> None:
    c, _, _ = await make()
    ta = join(c, client_id="a", protocols=[("range", b"a1"), ("sticky", b"a2")])
    await settle()
    ra = ta.result()
    assert ra.protocol_name == "range"
    sync(c, ra, {})
    await settle()
    tb = join(c, client_id="b", protocols=[("sticky", b"b2"), ("range", b"b1")])
    tc = join(c, client_id="c", protocols=[("sticky", b"c2"), ("cooperative", b"")])
    ta = join(c, member_id=ra.member_id, protocols=[("range", b"a1"), ("sticky", b"a2")])
    await settle()
    r = ta.result()
    # Only "sticky" is supported by all three, so it wins whatever the votes.
    assert r.protocol_name == "sticky" and tb.result().protocol_name == "sticky"
    assert sorted(md for _, _, md in r.members) == [b"a2", b"b2", b"c2"]
    assert tc.result().error_code == Err.NONE


@aio
async def test_sync_errors() -> None:
    c, _, _ = await make()
    r = await join_one(c)
    assert (await c.sync_group("g", 7, r.member_id, None, None, None, {})).error_code == Err.ILLEGAL_GENERATION
    assert (await c.sync_group("g", 1, "who", None, None, None, {})).error_code == Err.UNKNOWN_MEMBER_ID
    assert (await c.sync_group("zz", 1, r.member_id, None, None, None, {})).error_code == Err.UNKNOWN_MEMBER_ID
    bad = await c.sync_group("g", 1, r.member_id, None, "consumer", "roundrobin", {})
    assert bad.error_code == Err.INCONSISTENT_GROUP_PROTOCOL


@aio
async def test_join_during_completing_rebalance_resets_parked_syncs() -> None:
    c, _, _ = await make()
    a = await stable_group(c)
    tb = join(c, client_id="b")
    ta = join(c, member_id=a.member_id)
    await settle()
    rb = tb.result()
    sb = sync(c, rb)  # follower parks; the leader has not synced yet
    await settle()
    tc = join(c, client_id="c")
    await settle()
    assert sb.result().error_code == Err.REBALANCE_IN_PROGRESS
    assert c.groups["g"].state == PREPARING_REBALANCE
    assert ta.result().generation_id == 2 and not tc.done()


@aio
async def test_follower_rejoin_without_changes_in_stable_group_keeps_generation() -> None:
    c, _, _ = await make()
    a = await stable_group(c)
    tb = join(c, client_id="b")
    ta = join(c, member_id=a.member_id)
    await settle()
    rb = tb.result()
    sync(c, ta.result(), {rb.member_id: b"B"})
    sync(c, rb)
    await settle()
    again = join(c, member_id=rb.member_id, client_id="b")
    await settle()
    assert again.result().generation_id == 2 and c.groups["g"].state == STABLE


@aio
async def test_initial_rebalance_delay() -> None:
    c, clock, _ = await make(group_initial_rebalance_delay_ms=3000)
    ta = join(c, client_id="a")
    await settle()
    clock.now += 2
    c.tick()
    tb = join(c, client_id="b")  # arrives inside the delay: extends it by another delay
    await settle()
    clock.now += 1.5
    c.tick()
    await settle()
    assert not ta.done()
    clock.now += 3
    c.tick()
    await settle()
    ra, rb = ta.result(), tb.result()
    assert ra.generation_id == rb.generation_id == 1 and len(ra.members) == 2


@aio
async def test_session_timeout_bounds() -> None:
    c, _, _ = await make()
    t = join(c, session_ms=10)
    await settle()
    assert t.result().error_code == Err.INVALID_SESSION_TIMEOUT


@aio
async def test_static_member_restart_keeps_assignment_without_rebalance() -> None:
    c, _, _ = await make()
    ta = join(c, client_id="a", instance="i-a")
    await settle()
    ra = ta.result()
    tb = join(c, client_id="b", instance="i-b")
    await settle()
    ta = join(c, member_id=ra.member_id, client_id="a", instance="i-a")
    await settle()
    ra, rb = ta.result(), tb.result()
    sync(c, ra, {ra.member_id: b"A", rb.member_id: b"B"})
    sync(c, rb)
    await settle()
    assert c.groups["g"].state == STABLE
    # b restarts and joins with no member id: it gets a new id, the same generation, no rebalance.
    tb2 = join(c, client_id="b", instance="i-b")
    await settle()
    rb2 = tb2.result()
    assert rb2.error_code == Err.NONE and rb2.member_id != rb.member_id and rb2.generation_id == 2
    assert c.groups["g"].state == STABLE
    s = sync(c, rb2)
    await settle()
    assert s.result().assignment == b"B"
    assert c.heartbeat("g", 2, rb.member_id, "i-b") == 82  # the old incarnation is fenced
    _, per = await c.leave_group("g", [(None, "i-b")])
    assert per == [Err.NONE] and c.groups["g"].state == PREPARING_REBALANCE


@aio
async def test_list_and_describe_groups() -> None:
    c, _, _ = await make()
    r = await stable_group(c)
    await join_one(c, group="other")
    assert sorted(c.list_groups()) == [("g", "consumer", "Stable"), ("other", "consumer", "CompletingRebalance")]
    assert c.list_groups(["stable"]) == [("g", "consumer", "Stable")]
    d, other, missing = c.describe_groups(["g", "other", "missing"])
    assert (d["group_state"], d["protocol_type"], d["protocol_data"]) == ("Stable", "consumer", "range")
    assert d["members"] == [
        {
            "member_id": r.member_id,
            "group_instance_id": None,
            "client_id": "cli",
            "client_host": "/127.0.0.1",
            "member_metadata": b"sub-cli",
            "member_assignment": b"assignment-1",
        }
    ]
    # Like Kafka, no protocol and no member metadata unless Stable.
    assert other["protocol_data"] == "" and other["members"][0]["member_metadata"] == b""
    assert (missing["error_code"], missing["group_state"], missing["members"]) == (0, "Dead", [])
