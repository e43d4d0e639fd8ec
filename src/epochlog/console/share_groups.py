"""Share groups (KIP-932) in the console: listed beside the consumer groups, and a group's page from
ShareGroupDescribe (members with their epochs and the partitions each is assigned; several members may share
one) and DescribeShareGroupOffsets (each share-partition's start offset, and its lag: records from it to the
high watermark not yet acknowledged). librdkafka's AdminClient knows neither call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from epochlog.client.groups import SHARE, GroupsClient, GroupsError
from epochlog.client.share_groups import ShareGroupsClient

TP = tuple[str, int]


def listed(groups: GroupsClient) -> tuple[list[dict[str, Any]], list[str]]:
    """The share groups as the groups list shows them, and what went wrong asking."""
    try:
        found = ShareGroupsClient(groups).list_groups()
    except GroupsError as e:
        return [], [str(e)]
    return [{"group_id": g.group_id, "state": g.state, "type": SHARE, "simple": False} for g in found], []


Ends = Callable[[list[TP]], dict[TP, int | None]]


def page(groups: GroupsClient, group_id: str, ends_of: Ends) -> dict[str, Any] | None:
    """The group's page if ``group_id`` is a share group, else None (it is some other kind, or none)."""
    client = ShareGroupsClient(groups)
    try:
        d = client.describe(group_id)
    except GroupsError:
        return None
    if not d.exists:
        return None
    starts = client.start_offsets(group_id)
    holders: dict[TP, list[str]] = {}
    for m in d.members:
        for tp in m.assignment:
            holders.setdefault(tp, []).append(m.member_id)
    tps = sorted(set(starts) | set(holders))
    ends = ends_of(tps)
    rows = []
    for tp in tps:
        s = starts.get(tp)
        start = s.start_offset if s is not None and s.start_offset >= 0 else None
        lag = s.lag if s is not None and s.lag >= 0 else None
        rows.append(
            {
                "topic": tp[0],
                "partition": tp[1],
                "committed_offset": start,  # a share group's place: the start offset of its share-partition
                "end_offset": ends.get(tp),
                "lag": lag,
                "member_id": ", ".join(sorted(holders.get(tp, []))) or None,
            }
        )
    known = [r["lag"] for r in rows if r["lag"] is not None]
    return {
        "group_id": group_id,
        "type": SHARE,
        "state": d.state,
        "protocol": d.assignor,
        "coordinator": None if d.coordinator is None else d.coordinator.id,
        "group_epoch": d.group_epoch,
        "assignment_epoch": d.assignment_epoch,
        "members": [
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "host": m.host,
                "group_instance_id": None,
                "member_epoch": m.member_epoch,
                "assignment": [{"topic": t, "partition": p} for t, p in m.assignment],
            }
            for m in d.members
        ],
        "partitions": rows,
        "total_lag": sum(known) if known else None,
    }
