"""The driver of KIP-932 share groups: one ``ShareGroupCoordinator`` (the sans-IO core, epochlog.groups.share)
per share group this broker coordinates, as consumer_groups.py drives the KIP-848 groups.

The same duties as that driver, and the same writes: every record a heartbeat returns joins the group's
queue in ``__consumer_offsets`` (``_write``, shared with the consumer groups, since a group id has one type)
and the heartbeat is answered once it is durable; a failed write rebuilds the group from the log. ``WakeAt``
arms the timer; ``tick`` removes members whose session lapsed. ``MemberGone`` (a member left or was fenced)
goes to ``share_member_gone``, which the broker points at its share-partition leaders (server/share/): they
release what the member holds. Only the leaders on this broker hear it; elsewhere the member's acquisition
locks run out (``group.share.record.lock.duration.ms``).

A group id belongs to one type: a share heartbeat for a classic or consumer group, and a consumer heartbeat
for a share group, answer GROUP_ID_NOT_FOUND, as Kafka does. DeleteGroups deletes an empty share group (a
ShareGroupMetadata tombstone) and then its share-partition state (``share_group_deleted``), so a new group
of that name starts at ``share.auto.offset.reset``.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from epochlog.config_defs import SHARE_HEARTBEAT_INTERVAL, SHARE_SESSION_TIMEOUT
from epochlog.groups.consumer.messages import HeartbeatRequest, HeartbeatResponse
from epochlog.groups.share.coordinator import ShareGroupCoordinator
from epochlog.groups.share.group_records import GroupRecord
from epochlog.groups.share.messages import (
    GroupEffect,
    MemberGone,
    Note,
    ShareGroupDescription,
    ShareHeartbeatRequest,
    ShareHeartbeatResponse,
    WakeAt,
)
from epochlog.groups.share.model import ShareGroupConfig
from epochlog.protocol.errors import Err
from epochlog.server.groups import share_records as srec
from epochlog.server.groups.consumer_groups import ConsumerGroups

log = logging.getLogger("epochlog.groups")

_KeyValue = tuple[bytes, bytes | None]


def _no_one(_group_id: str, _member_id: str) -> None:
    pass


async def _nothing_kept(_group_id: str) -> int:
    return Err.NONE


def _no_configs(_group_id: str) -> Mapping[str, str]:
    return {}


class ShareGroups(ConsumerGroups):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        c = self.config
        self.share_config = ShareGroupConfig(
            session_timeout_ms=c.share_session_timeout_ms,
            heartbeat_interval_ms=c.share_heartbeat_interval_ms,
            max_size=c.share_max_size,
        )
        self.share_groups: dict[str, ShareGroupCoordinator] = {}
        # The broker's share-partition leaders release a departed member's records (server/share/).
        self.share_member_gone: Callable[[str, str], None] = _no_one
        # The broker's share coordinator forgets a deleted group's share-partition states (server/share/).
        self.share_group_deleted: Callable[[str], Awaitable[int]] = _nothing_kept
        # A group's own configs (share.session.timeout.ms, share.heartbeat.interval.ms) from the metadata image.
        self.group_configs: Callable[[str], Mapping[str, str]] = _no_configs

    # -- ShareGroupHeartbeat ------------------------------------------------------------------
    async def share_heartbeat(self, req: ShareHeartbeatRequest) -> ShareHeartbeatResponse:
        gid = req.group_id
        if err := self._unavailable(gid):
            return ShareHeartbeatResponse(err, None, req.member_id)
        if not gid:
            return ShareHeartbeatResponse(Err.INVALID_REQUEST, "GroupId can't be empty.", req.member_id)
        core = self.share_groups.get(gid)
        created = core is None
        if core is None:
            if self._is_classic(gid) or gid in self.consumer_groups or gid in self.groups:
                return ShareHeartbeatResponse(Err.GROUP_ID_NOT_FOUND, f"Group {gid} is not a share group.")
            if req.member_epoch != 0:
                return ShareHeartbeatResponse(Err.GROUP_ID_NOT_FOUND, f"Share group {gid} not found.")
            core = ShareGroupCoordinator(gid, self.share_config, self.topic_counts())
        # A group config changed since the last heartbeat binds this one on (the next session deadline, the
        # interval this answer gives).
        core.config = self._share_config_of(gid)
        resp, effects = core.heartbeat(self._mono_ms(), req)
        records = self._share_records(effects)
        if created:
            if not records:
                return resp
            self.share_groups[gid] = core
        self._carry_out_share(effects)
        if records:
            ok = await self._write(gid, records)
            if err := self._unavailable(gid):
                return ShareHeartbeatResponse(err, None, req.member_id)
            if not ok:
                return ShareHeartbeatResponse(Err.COORDINATOR_NOT_AVAILABLE, "the group's records were not written")
        return resp

    async def consumer_heartbeat(self, req: HeartbeatRequest) -> HeartbeatResponse:
        if req.group_id in self.share_groups:
            return HeartbeatResponse(
                Err.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group.", req.member_id
            )
        return await super().consumer_heartbeat(req)

    def _share_config_of(self, gid: str) -> ShareGroupConfig:
        own = self.group_configs(gid)
        c = self.share_config
        for name, field in (
            (SHARE_SESSION_TIMEOUT, "session_timeout_ms"),
            (SHARE_HEARTBEAT_INTERVAL, "heartbeat_interval_ms"),
        ):
            raw = own.get(name, "").strip()
            if raw.isdigit():  # the controller validated it
                c = dataclasses.replace(c, **{field: int(raw)})
        return c

    # -- effects and timers -------------------------------------------------------------------
    def _share_records(self, effects: Iterable[GroupEffect]) -> list[_KeyValue]:
        records = [e for e in effects if not isinstance(e, WakeAt | MemberGone | Note)]
        if not records:
            return []
        topic_ids = self.topic_ids()
        return [srec.encode(r, topic_ids) for r in records]

    def _carry_out_share(self, effects: Iterable[GroupEffect]) -> None:
        for e in effects:
            if isinstance(e, Note):
                log.info("share group %s: %s", e.group_id, e.text)
            elif isinstance(e, WakeAt):
                self._arm_consumer_wake(e.at_ms)
            elif isinstance(e, MemberGone):
                try:
                    self.share_member_gone(e.group_id, e.member_id)
                except Exception:
                    log.exception("share group %s: releasing the records of %s failed", e.group_id, e.member_id)

    def tick(self, now: float | None = None) -> None:
        super().tick(now)
        now_ms = self._mono_ms() if now is None else round(now * 1000)
        for gid, core in list(self.share_groups.items()):
            due = min((m.session_deadline_ms for m in core.group.members.values()), default=None)
            if due is None or due > now_ms:
                continue
            effects = core.tick(now_ms)
            self._carry_out_share(effects)
            records = self._share_records(effects)
            if records:
                self._write(gid, records)

    def consumer_topics_changed(self) -> None:
        super().consumer_topics_changed()
        if not self.share_groups:
            return
        topics = dict(self.topic_counts())
        for gid, core in list(self.share_groups.items()):
            if core.topics == topics:
                continue
            records = self._share_records(core.topics_changed(topics))
            if records:
                self._write(gid, records)

    # -- admin --------------------------------------------------------------------------------
    def share_describe(self, group_id: str) -> tuple[int, str | None, ShareGroupDescription | None]:
        if err := self._unavailable(group_id):
            return err, None, None
        core = self.share_groups.get(group_id)
        if core is None:
            if group_id in self.groups or group_id in self.consumer_groups:
                return Err.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.", None
            return Err.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
        return Err.NONE, None, core.describe()

    async def delete_share_group(self, gid: str) -> int:
        """DeleteGroups of a share group: only an empty one (NON_EMPTY_GROUP otherwise, as Kafka)."""
        core = self.share_groups[gid]
        if core.group.members:
            return Err.NON_EMPTY_GROUP
        del self.share_groups[gid]
        if not await self._write(gid, srec.group_tombstones(gid)):
            return Err.COORDINATOR_NOT_AVAILABLE
        log.info("share group %s deleted", gid)
        return await self.share_group_deleted(gid)

    def list_share_groups(self) -> list[tuple[str, str]]:
        return [(gid, core.describe().state) for gid, core in self.share_groups.items()]

    def share_member_known(self, group_id: str, member_id: str) -> bool | None:
        """Whether the member is in the share group; None when the group is not coordinated here."""
        core = self.share_groups.get(group_id)
        return None if core is None else member_id in core.group.members

    # -- loading ------------------------------------------------------------------------------
    def _replay_share_record(
        self, key: bytes, value: bytes | None, into: dict[str, list[GroupRecord]], topic_names: Mapping[uuid.UUID, str]
    ) -> None:
        r = srec.decode(key, value, topic_names)
        if isinstance(r, srec.ShareGroupDeleted):
            into.pop(r.group_id, None)
        elif r is not None:
            into.setdefault(r.group_id, []).append(r)

    def _build_share_groups(self, loaded: dict[str, list[GroupRecord]]) -> None:
        now = self._mono_ms()
        for gid, records in loaded.items():
            core = ShareGroupCoordinator.from_records(gid, records, now, self.share_config, self.topic_counts())
            self.share_groups[gid] = core
            due = min((m.session_deadline_ms for m in core.group.members.values()), default=None)
            if due is not None:
                self._arm_consumer_wake(due)

    def _drop_share_groups(self, p: int) -> None:
        for gid in [g for g in self.share_groups if self.partition_for(g) == p]:
            del self.share_groups[gid]

    def _reload_consumer_group(self, gid: str) -> None:
        if gid not in self.share_groups:
            super()._reload_consumer_group(gid)
            return
        p = self.partition_for(gid)
        self.share_groups.pop(gid, None)
        if p not in self.owned:
            return
        loaded: dict[str, list[GroupRecord]] = {}
        topic_names = self._topic_names()
        try:
            for key, value in self._partition_records(p):
                if srec.is_share_key(key):
                    self._replay_share_record(key, value, loaded, topic_names)
        except Exception:
            log.exception("share group %s: cannot reread __consumer_offsets-%d", gid, p)
            return
        if gid in loaded:
            self._build_share_groups({gid: loaded[gid]})
