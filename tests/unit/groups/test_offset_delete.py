"""OffsetDelete (KIP-496) in the coordinator: Kafka's group and per-partition rules, and tombstones that
outlive a restart."""

from __future__ import annotations

import asyncio
import struct

from epochlog.protocol.consumer_protocol import subscribed_topics
from epochlog.protocol.errors import Err
from epochlog.server.groups import GroupCoordinator, JoinResult, OffsetCommit

from .helpers import aio, join, make, settle, sync


def subscription(*topics: str, version: int = 1) -> bytes:
    """A ConsumerProtocolSubscription as clients write it (later versions only append fields)."""
    body = struct.pack(">hi", version, len(topics))
    body += b"".join(struct.pack(">h", len(t)) + t.encode() for t in topics)
    return body + struct.pack(">i", -1) + (b"\x00\x00\x00\x00" if version >= 1 else b"")


async def stable_consumer(
    c: GroupCoordinator, group: str = "g", topics: tuple[str, ...] = ("t",), protocol_type: str = "consumer"
) -> JoinResult:
    t = asyncio.ensure_future(
        c.join_group(
            group,
            "",
            None,
            "cli",
            "/127.0.0.1",
            10_000,
            30_000,
            protocol_type,
            [("range", subscription(*topics))],
            False,
        )
    )
    await settle()
    r = t.result()
    s = await c.sync_group(
        group, r.generation_id, r.member_id, None, protocol_type, r.protocol_name, {r.member_id: b""}
    )
    assert s.error_code == 0
    return r


def test_subscribed_topics_reads_the_version_0_prefix_of_any_version() -> None:
    assert subscribed_topics(subscription("a", "b", version=0)) == {"a", "b"}
    assert subscribed_topics(subscription("a", version=3) + b"\x00" * 9) == {"a"}
    assert subscribed_topics(b"\x00\x00\x7f\xff\xff\xff") is None  # an array longer than the bytes
    assert subscribed_topics(b"sub-cli") is None


@aio
async def test_an_empty_group_loses_the_named_offsets_and_keeps_the_rest_across_a_restart() -> None:
    c, _, store = await make()
    commits = [OffsetCommit("t", 0, 5), OffsetCommit("t", 1, 6), OffsetCommit("u", 0, 7)]
    assert set((await c.commit_offsets("s", -1, "", None, commits)).values()) == {Err.NONE}
    code, res = await c.delete_offsets("s", [("t", 0), ("u", 0), ("t", 9)])
    assert code == Err.NONE
    assert res == {("t", 0): Err.NONE, ("u", 0): Err.NONE, ("t", 9): Err.NONE}  # none committed: nothing to do
    assert [(o.topic, o.partition) for o in c.fetch_offsets("s", None)[1]] == [("t", 1)]
    again, _, _ = await make(store=store)
    assert [(o.topic, o.partition, o.offset) for o in again.fetch_offsets("s", None)[1]] == [("t", 1, 6)]


@aio
async def test_a_stable_consumer_group_keeps_the_offsets_of_topics_it_subscribes_to() -> None:
    c, _, _ = await make()
    r = await stable_consumer(c, topics=("t",))
    await c.commit_offsets(
        "g", r.generation_id, r.member_id, None, [OffsetCommit("t", 0, 1), OffsetCommit("old", 0, 2)]
    )
    code, res = await c.delete_offsets("g", [("t", 0), ("old", 0)])
    assert code == Err.NONE
    assert res == {("t", 0): Err.GROUP_SUBSCRIBED_TO_TOPIC, ("old", 0): Err.NONE}
    assert [(o.topic, o.offset) for o in c.fetch_offsets("g", None)[1]] == [("t", 1)]


@aio
async def test_group_level_errors() -> None:
    c, _, _ = await make()
    assert await c.delete_offsets("nobody", [("t", 0)]) == (Err.GROUP_ID_NOT_FOUND, {})
    assert await c.delete_offsets("", [("t", 0)]) == (Err.INVALID_GROUP_ID, {})
    # A group with members whose protocol is not "consumer": its subscriptions cannot be known.
    await stable_consumer(c, "conn", protocol_type="connect")
    assert await c.delete_offsets("conn", [("t", 0)]) == (Err.NON_EMPTY_GROUP, {})


@aio
async def test_a_consumer_group_whose_subscriptions_do_not_parse_counts_as_subscribed_to_everything() -> None:
    c, _, _ = await make()
    t = join(c, "odd", protocols=[("range", b"not a subscription")])
    await settle()
    r = t.result()
    s = sync(c, r, {r.member_id: b""}, "odd")
    await settle()
    assert s.result().error_code == 0
    await c.commit_offsets("odd", r.generation_id, r.member_id, None, [OffsetCommit("x", 0, 1)])
    assert await c.delete_offsets("odd", [("x", 0)]) == (Err.NONE, {("x", 0): Err.GROUP_SUBSCRIBED_TO_TOPIC})
