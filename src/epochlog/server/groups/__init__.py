"""The classic consumer-group coordinator, as Kafka's GroupCoordinator behaves.

It runs on the broker's event loop and knows nothing of kio: the server translates requests to
these calls and the results (Kafka error codes as ints) back to responses. Membership (join, sync,
heartbeat, leave, rebalances, static members, the timers) is decided by the sans-IO core in
``epochlog.groups``; this package is its driver: it parks requests on futures until the core answers
them, writes the group records the core asks for, and brings the clock.

Files: ``coordinator.py`` (GroupCoordinator: lifecycle, timers, admin), ``membership.py`` (join, sync,
heartbeat, leave: the calls into the core), ``offsets.py`` (commit, fetch, delete, expiry), ``loading.py`` (replaying
``__consumer_offsets``), ``state.py`` (what those parts share), ``model.py`` (Group, Member, state names),
``results.py`` (what calls take and return), ``config.py`` (GroupConfig, Kafka's property names),
``records.py`` (the ``__consumer_offsets`` key/value formats), ``store.py`` (OffsetsStore and the
in-memory MemoryOffsetsStore), ``hashing.py`` (Java's String.hashCode, partition_for).

API (``GroupCoordinator(store, config, clock=time.monotonic, wall_clock=wall_seconds)``)::

    await start(run_background=True)   # serve requests, run the timers
    load_partition(p) / unload_partition(p)  # this broker gains / loses the leadership of
                                       # __consumer_offsets-p (a single node too): replay / drop its groups
    await stop()
    tick(now=None)                     # fire due timers; the background task calls it every 100 ms
    await join_group(group_id, member_id, group_instance_id, client_id, client_host,
                     session_timeout_ms, rebalance_timeout_ms, protocol_type,
                     protocols: list[(name, metadata)], require_known_member_id) -> JoinResult
        JoinResult(error_code, generation_id, protocol_type, protocol_name, leader, member_id,
                   members: [(member_id, group_instance_id, metadata)] for the leader only)
        require_known_member_id=True for JoinGroup v4+: a join without member id returns
        MEMBER_ID_REQUIRED (79) and the new id ``<client_id>-<uuid>``; the client joins again with it.
    await sync_group(group_id, generation_id, member_id, group_instance_id, protocol_type,
                     protocol_name, assignments: {member_id: bytes}) -> SyncResult
        SyncResult(error_code, protocol_type, protocol_name, assignment)
    heartbeat(group_id, generation_id, member_id, group_instance_id) -> error_code
    await leave_group(group_id, members: [(member_id | None, group_instance_id | None)])
        -> (error_code, [per-member error_code])
    await commit_offsets(group_id, generation_id, member_id, group_instance_id,
                         offsets: [OffsetCommit(topic, partition, offset, leader_epoch, metadata)])
        -> {(topic, partition): error_code}
    fetch_offsets(group_id, partitions: [(topic, partition)] | None)
        -> (error_code, [CommittedOffset(topic, partition, offset, leader_epoch, metadata, error_code)])
        offset -1, leader_epoch -1, metadata "" where the group has none; None = every partition.
    list_groups(states_filter: [str] | None) -> [(group_id, protocol_type, state)]
    describe_groups(group_ids) -> [dict with DescribeGroups' field names: error_code, group_id,
        group_state, protocol_type, protocol_data, members [member_id, group_instance_id, client_id,
        client_host, member_metadata, member_assignment], authorized_operations]
    await delete_groups(group_ids) -> [(group_id, error_code)]
    await expire_offsets(now_ms=None) -> number of offsets removed
    partition_for(group_id) -> int     # Kafka's abs(hashCode) % offsets.topic.num.partitions

Rules worth knowing (all Kafka's; the membership rules are in epochlog/groups/membership.py):

- Commit: generation -1 on an Empty group (no members) is a plain offset store and is accepted.
  Otherwise member and generation must match; CompletingRebalance answers 27; PreparingRebalance
  accepts the commit (consumers commit from their revocation callback at that point).
- Offsets become visible to fetch once the store has made them durable.
- Retention: offsets of an Empty consumer group expire offsets.retention.minutes after it became
  Empty; offsets of a group that only stores offsets expire by their commit time. An Empty group
  left with no offsets is removed (tombstone).
- Restart: groups come back from their last GroupMetadata record; a group with members resumes as
  Stable with the same generation and assignment, and members that do not heartbeat within their
  session are removed as usual.
- Before start(), calls answer COORDINATOR_LOAD_IN_PROGRESS (14); for a group whose partition this
  broker does not lead (or has not loaded), NOT_COORDINATOR (16).
"""

from epochlog.server.groups.config import GroupConfig
from epochlog.server.groups.coordinator import GroupCoordinator
from epochlog.server.groups.hashing import java_string_hash, partition_for
from epochlog.server.groups.model import COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE
from epochlog.server.groups.results import CommittedOffset, JoinResult, OffsetCommit, SyncResult
from epochlog.server.groups.store import MemoryOffsetsStore, OffsetsStore

__all__ = [
    "COMPLETING_REBALANCE",
    "DEAD",
    "EMPTY",
    "PREPARING_REBALANCE",
    "STABLE",
    "CommittedOffset",
    "GroupConfig",
    "GroupCoordinator",
    "JoinResult",
    "MemoryOffsetsStore",
    "OffsetCommit",
    "OffsetsStore",
    "SyncResult",
    "java_string_hash",
    "partition_for",
]
