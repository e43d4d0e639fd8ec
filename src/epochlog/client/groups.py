"""Consumer groups seen from outside, for `epochlog groups` and the console: listing with each group's type,
describing classic and KIP-848 groups alike, committed and log offsets, altering, deleting.

confluent-kafka's AdminClient does what it can (ListGroups to every broker, DescribeGroups, OffsetFetch,
OffsetCommit, ListOffsets, DeleteGroups). A consumer-protocol group is described with ConsumerGroupDescribe
(API 69) over client/wire.py instead, as Kafka's admin client does: DescribeGroups calls it Dead, and
librdkafka's description has no member epochs, group epoch or target assignment. OffsetDelete (API 47) has
no AdminClient call either.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, ConsumerGroupType, KafkaException, TopicPartition

# confluent_kafka.admin re-exports these without __all__ or `as` aliases, so its stubs do not export them.
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from epochlog.client.admin import EARLIEST_SPEC, LATEST_SPEC
from epochlog.client.security import ClientSecurity, librdkafka_config
from epochlog.client.transactions import Cluster, TxnAdminError
from epochlog.client.wire import Connection, WireError
from epochlog.codes import Err

TP = tuple[str, int]
CLASSIC, CONSUMER, SHARE = "classic", "consumer", "share"
GROUP_TYPES = (CLASSIC, CONSUMER, SHARE)
# Kafka's group states as its tools print them (GroupState); librdkafka's enum lacks Assigning and Reconciling.
STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling")
_CK_STATES = {
    "PREPARING_REBALANCING": "PreparingRebalance",
    "COMPLETING_REBALANCING": "CompletingRebalance",
    "STABLE": "Stable",
    "DEAD": "Dead",
    "EMPTY": "Empty",
}
_CK_TYPES = {"CONSUMER": CONSUMER, "CLASSIC": CLASSIC}
_GROUP_ID_NOT_FOUND = int(Err.GROUP_ID_NOT_FOUND)
_RETRIABLE = {int(Err.COORDINATOR_LOAD_IN_PROGRESS), int(Err.COORDINATOR_NOT_AVAILABLE)}


class GroupsError(Exception):
    """The cluster refused, or could not be reached."""


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    type: str  # classic, consumer, share, or "" when the broker does not say (ListGroups before v5)
    state: str


@dataclass(frozen=True)
class Coordinator:
    id: int
    host: str
    port: int


@dataclass(frozen=True)
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TP, ...]
    # Consumer-protocol groups only (ConsumerGroupDescribe); None for a classic group's member.
    member_epoch: int | None = None
    target_assignment: tuple[TP, ...] | None = None


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    type: str
    state: str  # "Dead" for a group that does not exist
    assignor: str
    coordinator: Coordinator | None
    members: tuple[Member, ...] = ()
    group_epoch: int | None = None  # consumer-protocol groups only
    assignment_epoch: int | None = None
    error: str | None = field(default=None, compare=False)

    @property
    def exists(self) -> bool:
        return self.state != "Dead"


def state_name(state: object) -> str:
    """librdkafka's group state as Kafka names it."""
    name = str(getattr(state, "name", state))
    return _CK_STATES.get(name, name if name in STATES else "Unknown")


def type_name(t: object) -> str:
    name = str(getattr(t, "name", t))
    return _CK_TYPES.get(name, name.lower() if name.lower() in GROUP_TYPES else "")


def _tps(assignment: Any) -> tuple[TP, ...]:
    parts = getattr(assignment, "topic_partitions", None) or []
    return tuple(sorted((str(tp.topic), int(tp.partition)) for tp in parts))


def _error_name(e: BaseException) -> str:
    err = e.args[0] if e.args else None
    name = getattr(err, "name", None)
    return str(name()) if callable(name) else str(e)


def _error_code(e: BaseException) -> int | None:
    err = e.args[0] if e.args else None
    code = getattr(err, "code", None)
    return int(code()) if callable(code) else None


class GroupsClient:
    """One AdminClient and, when a consumer group or OffsetDelete needs it, wire connections to the brokers."""

    def __init__(
        self,
        bootstrap: str,
        timeout: float = 10.0,
        admin: AdminClient | None = None,
        security: ClientSecurity | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.timeout = timeout
        self.security = security
        conf: dict[str, str | int | float | bool] = {
            "bootstrap.servers": bootstrap,
            "socket.timeout.ms": int(timeout * 1000),
        }
        conf.update(librdkafka_config(security) if security else {})
        self.admin = admin or AdminClient(conf)
        self._cluster: _GroupsCluster | None = None

    def close(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None

    def __enter__(self) -> GroupsClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _wire(self) -> _GroupsCluster:
        if self._cluster is None:
            try:
                self._cluster = _GroupsCluster(self.bootstrap, self.timeout, self.security)
            except WireError as e:
                raise GroupsError(f"cannot reach {self.bootstrap}: {e}") from e
        return self._cluster

    # -- listing -------------------------------------------------------------------------------------------
    def list_groups(self, types: Iterable[str] = (), states: Iterable[str] = ()) -> list[GroupListing]:
        """Every group of the wanted types (all when none) and states (compared case-insensitively), sorted.
        The types go to the brokers (ListGroups v5); the states are matched here, so that a consumer
        group's Assigning and Reconciling, which librdkafka cannot name, are matched too."""
        kwargs: dict[str, Any] = {"request_timeout": self.timeout}
        wanted_types = {t.lower() for t in types}
        ck_types = {ConsumerGroupType[t.upper()] for t in wanted_types if t.upper() in ConsumerGroupType.__members__}
        if wanted_types and not ck_types:
            return []  # only types librdkafka cannot ask for (share): such groups are not consumer groups
        if ck_types:
            kwargs["types"] = ck_types
        try:
            res = self.admin.list_consumer_groups(**kwargs).result()
        except KafkaException as e:
            raise GroupsError(f"cannot list groups: {e}") from e
        if res.errors:
            # As Kafka's admin client: a broker that did not answer means the list is incomplete.
            raise GroupsError(f"cannot list groups: {'; '.join(str(e) for e in res.errors)}")
        out = []
        for g in res.valid:
            gtype, state = type_name(g.type), state_name(g.state)
            if gtype == CONSUMER and state == "Unknown":
                state = self.describe(g.group_id, CONSUMER).state
            out.append(GroupListing(str(g.group_id), gtype, state))
        wanted_states = {s.lower() for s in states}
        return sorted(
            (g for g in out if not wanted_states or g.state.lower() in wanted_states), key=lambda g: g.group_id
        )

    def group_type(self, group_id: str) -> str:
        """The group's type from ListGroups, or "" for a group no broker lists."""
        for g in self.list_groups():
            if g.group_id == group_id:
                return g.type
        return ""

    # -- describing ----------------------------------------------------------------------------------------
    def describe(self, group_id: str, group_type: str | None = None) -> GroupDescription:
        """A consumer-protocol group through ConsumerGroupDescribe, any other through DescribeGroups."""
        gtype = self.group_type(group_id) if group_type is None else group_type
        if gtype == CONSUMER:
            return self._describe_consumer(group_id)
        return self._describe_classic(group_id, gtype or CLASSIC)

    def _describe_classic(self, group_id: str, gtype: str) -> GroupDescription:
        try:
            d = self.admin.describe_consumer_groups([group_id], request_timeout=self.timeout)[group_id].result()
        except KafkaException as e:
            if _error_code(e) == _GROUP_ID_NOT_FOUND:  # DescribeGroups v6 (KIP-1043) instead of Dead
                return GroupDescription(group_id, gtype, "Dead", "", None)
            raise GroupsError(f"cannot describe group {group_id}: {_error_name(e)}") from e
        c = d.coordinator
        members = tuple(
            Member(str(m.member_id), m.group_instance_id, str(m.client_id), str(m.host), _tps(m.assignment))
            for m in d.members
        )
        coordinator = None if c is None else Coordinator(int(c.id), str(c.host), int(c.port))
        return GroupDescription(
            group_id, gtype, state_name(d.state), str(d.partition_assignor or ""), coordinator, members
        )

    def _describe_consumer(self, group_id: str) -> GroupDescription:
        from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest

        wire = self._wire()
        node = wire.coordinator(group_id)
        req = ConsumerGroupDescribeRequest(group_ids=(group_id,), include_authorized_operations=False)  # type: ignore[arg-type]
        try:
            (g,) = wire.to(node).request(req).groups
        except (WireError, TxnAdminError) as e:
            raise GroupsError(f"cannot describe group {group_id}: {e}") from e
        host, port = wire.brokers.get(node, ("", -1))
        coordinator = Coordinator(node, host, port)
        code = int(g.error_code)
        if code == _GROUP_ID_NOT_FOUND:
            return GroupDescription(group_id, CONSUMER, "Dead", "", coordinator)
        if code:
            raise GroupsError(f"cannot describe group {group_id}: {_err_name(code)}")

        def parts(a: Any) -> tuple[TP, ...]:
            return tuple(sorted((str(t.topic_name), int(p)) for t in a.topic_partitions for p in t.partitions))

        members = tuple(
            Member(
                str(m.member_id),
                m.instance_id,
                str(m.client_id),
                str(m.client_host),
                parts(m.assignment),
                int(m.member_epoch),
                parts(m.target_assignment),
            )
            for m in g.members
        )
        return GroupDescription(
            group_id,
            CONSUMER,
            str(g.group_state),
            str(g.assignor_name),
            coordinator,
            members,
            int(g.group_epoch),
            int(g.assignment_epoch),
        )

    # -- offsets -------------------------------------------------------------------------------------------
    def committed(self, group_id: str) -> dict[TP, int]:
        """The group's committed offsets (partitions without one are left out)."""
        req = [ConsumerGroupTopicPartitions(group_id)]
        try:
            res = self.admin.list_consumer_group_offsets(req, request_timeout=self.timeout)[group_id].result()
        except KafkaException as e:
            raise GroupsError(f"cannot fetch the offsets of group {group_id}: {_error_name(e)}") from e
        return {
            (str(tp.topic), int(tp.partition)): int(tp.offset)
            for tp in res.topic_partitions
            if tp.error is None and tp.offset >= 0
        }

    def log_offsets(self, tps: Iterable[TP], spec: str | int) -> dict[TP, int | None]:
        """Each partition's "earliest" or "latest" offset, or the first at or after a timestamp in ms
        (-1 when no record is that late); None where it cannot be read now."""
        wanted = sorted(set(tps))
        if not wanted:
            return {}
        os: OffsetSpec
        if spec == "earliest":
            os = EARLIEST_SPEC
        elif spec == "latest":
            os = LATEST_SPEC
        else:
            os = OffsetSpec.for_timestamp(int(spec))
        req = {TopicPartition(t, p): os for t, p in wanted}
        out: dict[TP, int | None] = dict.fromkeys(wanted)
        try:
            futures = self.admin.list_offsets(req, request_timeout=self.timeout)
        except KafkaException:
            return out
        for ctp, fut in futures.items():
            try:
                out[(ctp.topic, ctp.partition)] = int(fut.result().offset)
            except KafkaException:
                pass
        return out

    def partitions(self, topics: Iterable[str]) -> list[TP]:
        """Every partition of the named topics; an unknown topic is an error."""
        out: list[TP] = []
        for name in topics:
            md = self.admin.list_topics(topic=name, timeout=self.timeout)
            t = md.topics.get(name)
            if t is None or t.error is not None or not t.partitions:
                raise GroupsError(f"topic {name!r} does not exist")
            out += [(name, p) for p in sorted(t.partitions)]
        return out

    def alter_offsets(self, group_id: str, offsets: Mapping[TP, int]) -> None:
        tps = [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        try:
            res = self.admin.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group_id, tps)], request_timeout=self.timeout
            )[group_id].result()
        except KafkaException as e:
            raise GroupsError(f"cannot commit the offsets of group {group_id}: {_error_name(e)}") from e
        failed = [f"{tp.topic}-{tp.partition}: {tp.error}" for tp in res.topic_partitions if tp.error is not None]
        if failed:
            raise GroupsError(f"the coordinator refused: {'; '.join(failed)}")

    # -- deleting ------------------------------------------------------------------------------------------
    def delete_groups(self, group_ids: list[str]) -> dict[str, str | None]:
        """Each group's error name, or None where it was deleted."""
        out: dict[str, str | None] = {}
        for gid, fut in self.admin.delete_consumer_groups(group_ids, request_timeout=self.timeout).items():
            try:
                fut.result()
                out[gid] = None
            except KafkaException as e:
                out[gid] = _error_name(e)
        return out

    def delete_offsets(self, group_id: str, tps: Iterable[TP]) -> tuple[str | None, dict[TP, str | None]]:
        """OffsetDelete at the group's coordinator: (the group's error name or None, each partition's)."""
        from kio.schema.offset_delete.v0.request import (
            OffsetDeleteRequest,
            OffsetDeleteRequestPartition,
            OffsetDeleteRequestTopic,
        )

        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(set(tps)):
            by_topic.setdefault(t, []).append(p)
        topics = tuple(
            OffsetDeleteRequestTopic(
                name=t,  # type: ignore[arg-type]
                partitions=tuple(OffsetDeleteRequestPartition(partition_index=p) for p in ps),  # type: ignore[arg-type]
            )
            for t, ps in by_topic.items()
        )
        wire = self._wire()
        try:
            resp = wire.to(wire.coordinator(group_id)).request(OffsetDeleteRequest(group_id=group_id, topics=topics))  # type: ignore[arg-type]
        except (WireError, TxnAdminError) as e:
            raise GroupsError(f"cannot delete the offsets of group {group_id}: {e}") from e
        rows: dict[TP, str | None] = {}
        for t in resp.topics:
            for p in t.partitions:
                code = int(p.error_code)
                rows[(str(t.name), int(p.partition_index))] = _err_name(code) if code else None
        top = int(resp.error_code)
        return (_err_name(top) if top else None), rows


def _err_name(code: int) -> str:
    try:
        return Err(code).name
    except ValueError:
        return f"error {code}"


class _GroupsCluster(Cluster):
    """The wire connections: the bootstrap broker for FindCoordinator and Metadata, the coordinator for the rest."""

    def __init__(self, bootstrap: str, timeout: float, security: ClientSecurity | None) -> None:
        self.security = security  # before the base class opens the bootstrap connection
        super().__init__(bootstrap, timeout)

    def _open(self, host: str, port: int) -> Connection:
        return Connection(host, port, timeout=self.timeout, client_id="epochlog-groups", security=self.security)

    def coordinator(self, group_id: str) -> int:
        from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest

        deadline = time.monotonic() + self.timeout
        while True:
            try:
                resp = self.bootstrap.request(FindCoordinatorRequest(key=group_id, key_type=0))  # type: ignore[arg-type]
            except WireError as e:
                raise GroupsError(f"cannot find the coordinator of group {group_id}: {e}") from e
            code = int(resp.error_code)
            if code == 0:
                return int(resp.node_id)
            # __consumer_offsets is being created, or its leader is loading it
            if code not in _RETRIABLE or time.monotonic() > deadline:
                raise GroupsError(f"cannot find the coordinator of group {group_id}: {_err_name(code)}")
            time.sleep(0.2)
