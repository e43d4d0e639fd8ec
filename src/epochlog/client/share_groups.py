"""KIP-932 share groups seen from outside, for `epochlog share-groups`: listing (ListGroups v5 with the share
type, to every broker), describing (ShareGroupDescribe), share-partition start offsets (DescribeShareGroupOffsets)
and changing them (AlterShareGroupOffsets, DeleteShareGroupOffsets), all over client/wire.py, since
confluent-kafka's AdminClient has none of these for share groups. Deleting a group and reading log offsets
go through client/groups.py's GroupsClient, whose connections this client shares.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from epochlog.client.groups import SHARE, Coordinator, GroupDescription, GroupListing, GroupsClient, GroupsError, Member
from epochlog.client.transactions import TxnAdminError
from epochlog.client.wire import WireError
from epochlog.codes import Err

TP = tuple[str, int]


@dataclass(frozen=True)
class StartOffset:
    """A share-partition's start offset (-1: the group never consumed it), the leader epoch that wrote it
    and the records from it to the high watermark not yet acknowledged (-1: unknown)."""

    start_offset: int
    leader_epoch: int
    lag: int


def _name(code: int) -> str:
    try:
        return Err(code).name
    except ValueError:
        return f"error {code}"


class ShareGroupsClient:
    def __init__(self, groups: GroupsClient) -> None:
        self.groups = groups

    def _call(self, group_id: str | None, req: Any, what: str) -> Any:
        wire = self.groups._wire()
        try:
            conn = wire.bootstrap if group_id is None else wire.to(wire.coordinator(group_id))
            return conn.request(req)
        except (WireError, TxnAdminError) as e:
            raise GroupsError(f"cannot {what}: {e}") from e

    def list_groups(self) -> list[GroupListing]:
        """Every share group of the cluster (each broker lists those it coordinates), sorted."""
        from kio.schema.list_groups.v5.request import ListGroupsRequest

        wire = self.groups._wire()
        try:
            wire.metadata([])
            out = []
            for node in sorted(wire.brokers):
                resp = wire.to(node).request(ListGroupsRequest(states_filter=(), types_filter=(SHARE,)))
                if int(resp.error_code):
                    raise GroupsError(f"cannot list groups: {_name(int(resp.error_code))}")
                out += [GroupListing(str(g.group_id), SHARE, str(g.group_state)) for g in resp.groups]
        except (WireError, TxnAdminError) as e:
            raise GroupsError(f"cannot list groups: {e}") from e
        return sorted(out, key=lambda g: g.group_id)

    def describe(self, group_id: str) -> GroupDescription:
        """The group with its members (member_epoch) and epochs; state Dead when it does not exist."""
        from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest

        req = ShareGroupDescribeRequest(group_ids=(group_id,), include_authorized_operations=False)  # type: ignore[arg-type]
        (g,) = self._call(group_id, req, f"describe group {group_id}").groups
        wire = self.groups._wire()
        node = wire.coordinator(group_id)
        host, port = wire.brokers.get(node, ("", -1))
        coordinator = Coordinator(node, host, port)
        code = int(g.error_code)
        if code == Err.GROUP_ID_NOT_FOUND:
            return GroupDescription(group_id, SHARE, "Dead", "", coordinator)
        if code:
            raise GroupsError(f"cannot describe group {group_id}: {_name(code)}")
        members = tuple(
            Member(
                str(m.member_id),
                None,
                str(m.client_id),
                str(m.client_host),
                tuple(sorted((str(t.topic_name), int(p)) for t in m.assignment.topic_partitions for p in t.partitions)),
                int(m.member_epoch),
            )
            for m in g.members
        )
        return GroupDescription(
            group_id, SHARE, str(g.group_state), str(g.assignor_name), coordinator, members,
            int(g.group_epoch), int(g.assignment_epoch),
        )  # fmt: skip

    def start_offsets(self, group_id: str) -> dict[TP, StartOffset]:
        """Every share-partition the group has a start offset for."""
        from kio.schema.describe_share_group_offsets.v1.request import (
            DescribeShareGroupOffsetsRequest,
            DescribeShareGroupOffsetsRequestGroup,
        )

        req = DescribeShareGroupOffsetsRequest(
            groups=(DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=None),)  # type: ignore[arg-type]
        )
        (g,) = self._call(group_id, req, f"describe the offsets of group {group_id}").groups
        if int(g.error_code):
            raise GroupsError(f"cannot describe the offsets of group {group_id}: {_name(int(g.error_code))}")
        return {
            (str(t.topic_name), int(p.partition_index)): StartOffset(
                int(p.start_offset), int(p.leader_epoch), int(p.lag)
            )
            for t in g.topics
            for p in t.partitions
            if not int(p.error_code)
        }

    def alter_offsets(self, group_id: str, offsets: Mapping[TP, int]) -> None:
        """Set the start offsets (the group must have no members); raises GroupsError naming what failed."""
        from kio.schema.alter_share_group_offsets.v0.request import (
            AlterShareGroupOffsetsRequest,
            AlterShareGroupOffsetsRequestPartition,
            AlterShareGroupOffsetsRequestTopic,
        )

        by_topic: dict[str, list[AlterShareGroupOffsetsRequestPartition]] = {}
        for (t, p), o in sorted(offsets.items()):
            by_topic.setdefault(t, []).append(AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o))  # type: ignore[arg-type]
        topics = tuple(
            AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=tuple(ps))  # type: ignore[arg-type]
            for t, ps in by_topic.items()
        )
        req = AlterShareGroupOffsetsRequest(group_id=group_id, topics=topics)  # type: ignore[arg-type]
        resp = self._call(group_id, req, f"alter the offsets of group {group_id}")
        if int(resp.error_code):
            raise GroupsError(_name(int(resp.error_code)))
        failed = [
            f"{t.topic_name}-{p.partition_index}: {_name(int(p.error_code))}"
            for t in resp.responses
            for p in t.partitions
            if int(p.error_code)
        ]
        if failed:
            raise GroupsError(f"the coordinator refused: {'; '.join(failed)}")

    def delete_offsets(self, group_id: str, topics: Iterable[str]) -> tuple[str | None, dict[str, str | None]]:
        """(the group's error name or None, each topic's error name or None)."""
        from kio.schema.delete_share_group_offsets.v0.request import (
            DeleteShareGroupOffsetsRequest,
            DeleteShareGroupOffsetsRequestTopic,
        )

        req = DeleteShareGroupOffsetsRequest(
            group_id=group_id,  # type: ignore[arg-type]
            topics=tuple(DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in dict.fromkeys(topics)),  # type: ignore[arg-type]
        )
        resp = self._call(group_id, req, f"delete the offsets of group {group_id}")
        rows = {str(t.topic_name): (_name(int(t.error_code)) if int(t.error_code) else None) for t in resp.responses}
        top = int(resp.error_code)
        return (_name(top) if top else None), rows
