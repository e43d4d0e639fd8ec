"""What each console page shows, read from the cluster as plain dicts ready for JSON.

Everything here blocks (librdkafka futures, the wire client's sockets); the web app calls it from worker
threads. A partition whose offsets cannot be read right now (its leader just died) is shown with None
rather than failing the whole page: a console is most needed while the cluster is failing over.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicPartition,
)

# confluent_kafka.admin re-exports these without __all__ or `as` aliases, so its stubs do not export them.
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    ConfigSource,
    OffsetSpec,
    ResourceType,
)

from epochlog.client.admin import EARLIEST_SPEC, LATEST_SPEC
from epochlog.client.groups import CONSUMER, GroupsClient, GroupsError, state_name, type_name
from epochlog.client.wire import WireError
from epochlog.console import share_groups
from epochlog.console.broker_metrics import EndpointError, MetricsEndpoints
from epochlog.console.lineage import LineageReader
from epochlog.console.log_dirs import describe_replicas
from epochlog.console.metadata import ClusterMetadata, MetadataClient, Partition
from epochlog.console.payload import consumer_group_fields, group_kind, show_bytes
from epochlog.console.quorum import QuorumClient
from epochlog.console.quotas import QuotaReader

if TYPE_CHECKING:
    from confluent_kafka._types import HeadersType

TP = tuple[str, int]
MAX_MESSAGES = 500
# How long a live refresh waits for offsets before showing what it has: a refresh is due every second.
LIVE_OFFSETS_TIMEOUT = 1.0
# A broker missing from Metadata whose metadata fetches reached the quorum this recently is alive: fenced.
ALIVE_FETCH_MS = 5_000


def lag(committed: int | None, end: int | None) -> int | None:
    """Kafka's consumer lag: end offset minus committed offset; unknown when either is (no commit yet
    counts as unknown, as kafka-consumer-groups.sh prints '-')."""
    if committed is None or end is None or committed < 0 or end < 0:
        return None
    return max(end - committed, 0)


def _config_source(source: object) -> str:
    # librdkafka hands the source over as a bare int; its enum's names are what kafka-configs.sh prints.
    if isinstance(source, int):
        try:
            return str(ConfigSource(source).name)
        except ValueError:
            pass
    return str(getattr(source, "name", source))


def _headers(headers: HeadersType | None, fmt: str) -> list[dict[str, Any]]:
    # A consumed message's headers are a list of (str, bytes | None); the stubs also allow what a producer
    # may be given (a dict, str values).
    pairs = headers.items() if isinstance(headers, dict) else (headers or [])
    return [{"key": k, "value": show_bytes(v.encode() if isinstance(v, str) else v, fmt)} for k, v in pairs]


def _partition_row(p: Partition) -> dict[str, Any]:
    return {
        "partition": p.partition,
        "leader": p.leader,
        "leader_epoch": p.leader_epoch,
        "replicas": list(p.replicas),
        "isr": list(p.isr),
        "offline_replicas": list(p.offline),
        "under_replicated": p.under_replicated,
        "offline": p.is_offline,
        "error": p.error,
    }


def overview_of(md: ClusterMetadata) -> dict[str, Any]:
    """The overview page from one metadata answer (pure, so tests can feed it crafted metadata)."""
    leaders: dict[int, int] = {b.node_id: 0 for b in md.brokers}
    replicas: dict[int, int] = {b.node_id: 0 for b in md.brokers}
    partitions = under = offline = 0
    for t in md.topics.values():
        for p in t.partitions:
            partitions += 1
            under += p.under_replicated
            offline += p.is_offline
            if p.leader >= 0:
                leaders[p.leader] = leaders.get(p.leader, 0) + 1
            for r in p.replicas:
                replicas[r] = replicas.get(r, 0) + 1
    return {
        "cluster_id": md.cluster_id,
        "controller_id": md.controller_id,
        "brokers": [
            {
                "node_id": b.node_id,
                "host": b.host,
                "port": b.port,
                "rack": b.rack,
                "leaders": leaders.get(b.node_id, 0),
                "replicas": replicas.get(b.node_id, 0),
            }
            for b in md.brokers
        ],
        "topics": len(md.topics),
        "partitions": partitions,
        "under_replicated_partitions": under,
        "offline_partitions": offline,
        # A broker that leads partitions but is missing from the broker list is down (or fenced) and the
        # controller has not moved leadership yet: shown so the page does not hide it.
        "unknown_leaders": sorted(n for n in leaders if n not in {b.node_id for b in md.brokers}),
    }


def broker_states(md: ClusterMetadata, quorum: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Every broker the cluster knows of and whether it is up (in Metadata, which lists unfenced brokers
    only) or fenced. A broker missing from Metadata is known from the replica lists and, given the
    controllers, from the quorum's observers; it is "fenced" when it still fetches the metadata log
    (alive, but the controller does not count it: it lost its session or is shutting down) and "fenced or
    down" when nothing says it is alive (pure, for tests)."""
    up = {b.node_id for b in md.brokers}
    observers = {o["node_id"]: o for o in (quorum or {}).get("observers", []) if "node_id" in o}
    voters = {v["node_id"] for v in (quorum or {}).get("voters", [])}
    known = set(up) | set(observers)
    for t in md.topics.values():
        for p in t.partitions:
            known.update(p.replicas)
    out = []
    for n in sorted(known):
        if n in up:
            out.append({"node_id": n, "state": "up"})
            continue
        o = observers.get(n)
        ago = o.get("caught_up_ms_ago") if o else None
        if n in voters and o is None and not any(n in p.replicas for t in md.topics.values() for p in t.partitions):
            continue  # a controller-only node
        alive = ago is not None and ago <= ALIVE_FETCH_MS
        out.append({"node_id": n, "state": "fenced" if alive else "fenced or down", "caught_up_ms_ago": ago})
    return out


class GroupActiveError(Exception):
    """An offset reset was asked for a group that has members."""


class ClusterReader:
    def __init__(
        self,
        bootstrap: str,
        timeout: float = 5.0,
        bootstrap_controllers: str | None = None,
        endpoints: MetricsEndpoints | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.quorum = QuorumClient(bootstrap_controllers) if bootstrap_controllers else None
        self.timeout = timeout
        self.endpoints = endpoints or MetricsEndpoints()
        self.metadata = MetadataClient(bootstrap, timeout)
        self.lineage = LineageReader(timeout, self.endpoints)
        # Scrapes of several brokers' endpoints at once: one stopped broker must not hold up the others.
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="console-scrape")
        self.admin = AdminClient(
            {"bootstrap.servers": bootstrap, "socket.timeout.ms": int(timeout * 1000), "client.id": "epochlog-console"}
        )
        # ConsumerGroupDescribe for KIP-848 groups (member and group epochs librdkafka does not show).
        self.group_client = GroupsClient(bootstrap, timeout, admin=self.admin)
        self.quota_reader = QuotaReader(self.metadata, self.lineage.conn, self.endpoints, self._pool)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.metadata.close()
        self.lineage.close()
        self.group_client.close()
        if self.quorum is not None:
            self.quorum.close()

    # -- offsets -----------------------------------------------------------------------------------------

    def _ask_offsets(self, tps: list[TP], spec: OffsetSpec, level: IsolationLevel, timeout: float) -> dict[Any, Any]:
        if not tps:
            return {}
        req = {TopicPartition(t, p): spec for t, p in tps}
        return dict(self.admin.list_offsets(req, isolation_level=level, request_timeout=timeout))

    @staticmethod
    def _collect(futs: dict[Any, Any], deadline: float) -> dict[TP, int | None]:
        out: dict[TP, int | None] = {}
        for ctp, fut in futs.items():
            try:
                off = fut.result(timeout=max(deadline - time.monotonic(), 0.0)).offset
            except Exception:  # KafkaException, or no answer by the deadline (a dead leader)
                off = None
            # librdkafka answers -1001 with no error right after a leader moves: no answer, not an offset.
            out[(ctp.topic, ctp.partition)] = off if off is not None and off >= 0 else None
        return out

    def _list_offsets(self, tps: list[TP], spec: OffsetSpec, level: IsolationLevel) -> dict[TP, int | None]:
        futs = self._ask_offsets(tps, spec, level, self.timeout)
        return self._collect(futs, time.monotonic() + self.timeout)

    def offsets(self, tps: list[TP], timeout: float | None = None) -> dict[TP, dict[str, int | None]]:
        """Log start (earliest), high watermark (latest, read_uncommitted) and last stable offset (latest,
        read_committed) per partition, as ListOffsets reports them to any client.

        The three lists are asked at once and waited for up to `timeout` in all: while a dead leader is
        still in the metadata its partitions get no answer, and the live pages must not stall on them."""
        t = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + t
        f_start = self._ask_offsets(tps, EARLIEST_SPEC, IsolationLevel.READ_UNCOMMITTED, t)
        f_hw = self._ask_offsets(tps, LATEST_SPEC, IsolationLevel.READ_UNCOMMITTED, t)
        f_lso = self._ask_offsets(tps, LATEST_SPEC, IsolationLevel.READ_COMMITTED, t)
        start, hw, lso = (self._collect(f, deadline) for f in (f_start, f_hw, f_lso))
        return {
            tp: {"log_start_offset": start.get(tp), "high_watermark": hw.get(tp), "last_stable_offset": lso.get(tp)}
            for tp in tps
        }

    # -- pages -------------------------------------------------------------------------------------------

    def overview(self) -> dict[str, Any]:
        md = self.metadata.fetch()
        out = overview_of(md)
        if self.quorum is not None:
            # The quorum is asked only when the controllers' addresses were given; its failure is shown
            # on the page without hiding what the brokers said.
            try:
                out["quorum"] = self.quorum.describe(int(time.time() * 1000))
            except Exception as e:
                out["quorum"] = {"error": f"{type(e).__name__}: {e}"}
        quorum = out.get("quorum")
        out["broker_states"] = broker_states(md, quorum if quorum and "error" not in quorum else None)
        out["throughput"] = self.throughput(md)
        return out

    def throughput(self, md: ClusterMetadata) -> dict[str, Any]:
        """Counters the browser turns into rates (the console's server keeps no history): each broker's
        bytes in and out and records in, from its Prometheus metrics when the console knows where they
        are; otherwise records only, from the high watermarks (records appended, credited to the leader)."""
        urls = {b.node_id: self.endpoints.base_url(b.node_id, b.host) for b in md.brokers}
        if self.endpoints.configured:
            futs = {n: self._pool.submit(self.endpoints.throughput, u) for n, u in urls.items() if u is not None}
            brokers: dict[str, Any] = {}
            topics: dict[str, dict[str, float]] = {}
            for n, f in futs.items():
                try:
                    got = f.result()
                except EndpointError as e:
                    brokers[str(n)] = {"error": str(e)}
                    continue
                brokers[str(n)] = {k: v for k, v in got.items() if k != "topics"}
                for t, counters in got["topics"].items():
                    acc = topics.setdefault(t, dict.fromkeys(counters, 0.0))
                    for k, v in counters.items():
                        acc[k] += v
            return {"source": "metrics", "brokers": brokers, "topics": topics}
        tps = [(t.name, p.partition) for t in md.topics.values() for p in t.partitions if not t.internal]
        latest = LATEST_SPEC
        hws = self._collect(
            self._ask_offsets(tps, latest, IsolationLevel.READ_UNCOMMITTED, LIVE_OFFSETS_TIMEOUT),
            time.monotonic() + LIVE_OFFSETS_TIMEOUT,
        )
        leader = {(t.name, p.partition): p.leader for t in md.topics.values() for p in t.partitions}
        by_broker: dict[str, dict[str, float]] = {str(b.node_id): {"messages_in": 0.0} for b in md.brokers}
        by_topic: dict[str, dict[str, float]] = {}
        missing = sum(1 for hw in hws.values() if hw is None)
        for (t, p), hw in hws.items():
            if hw is None:
                continue  # no answer this time: the browser skips a sample whose sum went down
            by_topic.setdefault(t, {"messages_in": 0.0})["messages_in"] += hw
            b = str(leader.get((t, p), -1))
            if b in by_broker:
                by_broker[b]["messages_in"] += hw
        # A sum with partitions missing would read as a drop then a burst: the browser skips such samples.
        return {"source": "offsets", "brokers": by_broker, "topics": by_topic, "partial": missing > 0}

    def quotas(self) -> dict[str, Any]:
        return self.quota_reader.view()

    def topics(self) -> dict[str, Any]:
        md = self.metadata.fetch()
        rows = []
        for t in sorted(md.topics.values(), key=lambda t: t.name):
            rows.append(
                {
                    "name": t.name,
                    "internal": t.internal,
                    "partitions": len(t.partitions),
                    "replication_factor": max((len(p.replicas) for p in t.partitions), default=0),
                    "under_replicated": sum(p.under_replicated for p in t.partitions),
                    "offline": sum(p.is_offline for p in t.partitions),
                    "error": t.error,
                }
            )
        return {"topics": rows}

    def topic(self, name: str, with_configs: bool = True, offsets_timeout: float | None = None) -> dict[str, Any]:
        md = self.metadata.fetch([name])
        t = md.topics.get(name)
        if t is None or (t.error != 0 and not t.partitions):
            return {"name": name, "error": t.error if t else 3, "partitions": [], "configs": []}
        offs = self.offsets([(name, p.partition) for p in t.partitions], offsets_timeout)
        sizes = self.replica_sizes(md, name)
        parts = [
            {**_partition_row(p), **offs[(name, p.partition)], "size": sizes.get((p.partition, p.leader))}
            for p in t.partitions
        ]
        return {
            "name": name,
            "error": t.error,
            "internal": t.internal,
            "partitions": parts,
            "configs": self.topic_configs(name) if with_configs else None,
        }

    def replica_sizes(self, md: ClusterMetadata, topic: str) -> dict[tuple[int, int], int]:
        """{(partition, broker): bytes on disk} from DescribeLogDirs to every broker; brokers that do not
        answer (down) are left out."""
        t = md.topics[topic]
        out: dict[tuple[int, int], int] = {}
        for b in md.brokers:
            try:
                held = describe_replicas(
                    self.lineage.conn((b.host, b.port)), topic, [p.partition for p in t.partitions]
                )
            except WireError:
                continue
            for p, rd in held.items():
                out[(p, b.node_id)] = rd.size
        return out

    def partition(self, name: str, partition: int, offsets_timeout: float | None = None) -> dict[str, Any]:
        """One partition in depth: its state, offsets, and every replica's leader-epoch lineage."""
        md = self.metadata.fetch([name])
        t = md.topics.get(name)
        part = next((p for p in t.partitions if p.partition == partition), None) if t else None
        if part is None:
            return {"topic": name, "partition": partition, "error": f"no partition {name}-{partition} in the metadata"}
        offs = self.offsets([(name, partition)], offsets_timeout)[(name, partition)]
        brokers = {b.node_id: (b.host, b.port) for b in md.brokers}
        lineage = self.lineage.lineages(
            brokers, name, partition, part.leader, part.leader_epoch, list(part.replicas), offs["log_start_offset"] or 0
        )
        return {"topic": name, **_partition_row(part), **offs, "lineage": lineage["replicas"]}

    def topic_configs(self, name: str) -> list[dict[str, Any]]:
        res = ConfigResource(ResourceType.TOPIC, name)
        try:
            entries = self.admin.describe_configs([res], request_timeout=self.timeout)[res].result()
        except KafkaException:
            return []
        return [
            {
                "name": e.name,
                "value": None if e.is_sensitive else e.value,
                "source": _config_source(e.source),
                "is_default": bool(e.is_default),
            }
            for e in sorted(entries.values(), key=lambda e: e.name)
        ]

    def groups(self) -> dict[str, Any]:
        res = self.admin.list_consumer_groups(request_timeout=self.timeout).result()
        rows = [
            {
                "group_id": g.group_id,
                "state": state_name(g.state),
                "type": group_kind(type_name(g.type), g.is_simple_consumer_group),
                "simple": g.is_simple_consumer_group,
            }
            for g in res.valid
        ]
        errors = [str(e) for e in res.errors]
        shares, problems = share_groups.listed(self.group_client)
        seen = {r["group_id"] for r in rows}
        rows += [r for r in shares if r["group_id"] not in seen]
        return {"groups": sorted(rows, key=lambda r: r["group_id"]), "errors": errors + problems}

    def reset_offsets(self, group_id: str, topic: str, partition: int | None, to: str) -> dict[str, Any]:
        """Set a group's committed offsets on one topic (one partition, or all) to earliest, latest or an
        offset, as `kafka-consumer-groups.sh --reset-offsets --execute` does: only while the group has no
        members, since an active member's next commit would overwrite the reset."""
        desc = self.admin.describe_consumer_groups([group_id], request_timeout=self.timeout)[group_id].result()
        state = getattr(desc.state, "name", str(desc.state))
        if desc.members:
            raise GroupActiveError(f"group {group_id} has {len(desc.members)} members (state {state}): stop them first")
        md = self.metadata.fetch([topic])
        t = md.topics.get(topic)
        if t is None or not t.partitions:
            raise ValueError(f"no topic {topic}")
        parts = [p.partition for p in t.partitions]
        if partition is not None:
            if partition not in parts:
                raise ValueError(f"no partition {topic}-{partition}")
            parts = [partition]
        tps = [(topic, p) for p in parts]
        if to in ("earliest", "latest"):
            spec = EARLIEST_SPEC if to == "earliest" else LATEST_SPEC
            found = self._list_offsets(tps, spec, IsolationLevel.READ_UNCOMMITTED)
            missing = [f"{t}-{p}" for (t, p), o in found.items() if o is None]
            if missing:
                raise ValueError(f"no {to} offset for {', '.join(missing)} right now")
            targets = {tp: int(o) for tp, o in found.items() if o is not None}
        else:
            offset = int(to)
            if offset < 0:
                raise ValueError("an offset is >= 0")
            targets = {tp: offset for tp in tps}
        req = [
            ConsumerGroupTopicPartitions(group_id, [TopicPartition(t, p, o) for (t, p), o in sorted(targets.items())])
        ]
        res = self.admin.alter_consumer_group_offsets(req, request_timeout=self.timeout)[group_id].result()
        failed = [f"{tp.topic}-{tp.partition}: {tp.error}" for tp in res.topic_partitions if tp.error is not None]
        if failed:
            raise ValueError("the coordinator refused: " + "; ".join(failed))
        return {
            "group_id": group_id,
            "reset": [{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(targets.items())],
        }

    def group(self, group_id: str) -> dict[str, Any]:
        def latest(tps: list[TP]) -> dict[TP, int | None]:
            return self._list_offsets(tps, LATEST_SPEC, IsolationLevel.READ_UNCOMMITTED)

        shared = share_groups.page(self.group_client, group_id, latest)
        if shared is not None:
            return shared
        desc = self.admin.describe_consumer_groups([group_id], request_timeout=self.timeout)[group_id].result()
        req = [ConsumerGroupTopicPartitions(group_id)]
        committed_res = self.admin.list_consumer_group_offsets(req, request_timeout=self.timeout)[group_id].result()
        committed: dict[TP, int] = {
            (tp.topic, tp.partition): tp.offset for tp in committed_res.topic_partitions if tp.error is None
        }
        assigned: dict[TP, str] = {}
        members = []
        for m in desc.members:
            parts = [(tp.topic, tp.partition) for tp in (m.assignment.topic_partitions if m.assignment else [])]
            for tp in parts:
                assigned[tp] = m.member_id
            members.append(
                {
                    "member_id": m.member_id,
                    "client_id": m.client_id,
                    "host": m.host,
                    "group_instance_id": m.group_instance_id,
                    "assignment": [{"topic": t, "partition": p} for t, p in sorted(parts)],
                }
            )
        tps = sorted(set(committed) | set(assigned))
        ends = self._list_offsets(tps, LATEST_SPEC, IsolationLevel.READ_UNCOMMITTED)
        rows = [
            {
                "topic": t,
                "partition": p,
                "committed_offset": committed.get((t, p)),
                "end_offset": ends.get((t, p)),
                "lag": lag(committed.get((t, p)), ends.get((t, p))),
                "member_id": assigned.get((t, p)),
            }
            for t, p in tps
        ]
        known = [x["lag"] for x in rows if x["lag"] is not None]
        coord = desc.coordinator
        out: dict[str, Any] = {
            "group_id": group_id,
            "type": group_kind(type_name(desc.type), desc.is_simple_consumer_group),
            "state": state_name(desc.state),
            "protocol": desc.partition_assignor,
            "coordinator": None if coord is None else coord.id,
            "members": members,
            "partitions": rows,
            "total_lag": sum(known) if known else None,
        }
        if out["type"] == CONSUMER:
            try:
                out |= consumer_group_fields(self.group_client.describe(group_id, CONSUMER))
            except GroupsError:
                pass  # the page still shows what DescribeGroups-by-librdkafka told
        return out

    def messages(
        self,
        topic: str,
        partition: int,
        offset: int | None = None,
        timestamp_ms: int | None = None,
        limit: int = 50,
        fmt: str = "text",
        wait: float = 3.0,
    ) -> dict[str, Any]:
        """Up to `limit` records from an offset, or from the first record at or after a timestamp. The
        console reads with an assigned partition and never joins or commits for a group."""
        limit = max(1, min(limit, MAX_MESSAGES))
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "epochlog-console",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
                "client.id": "epochlog-console",
            }
        )
        try:
            start = offset if offset is not None else -2  # OFFSET_BEGINNING
            if timestamp_ms is not None:
                (found,) = consumer.offsets_for_times([TopicPartition(topic, partition, timestamp_ms)], self.timeout)
                if found.offset < 0:  # no record at or after that time
                    return {"topic": topic, "partition": partition, "start": None, "messages": []}
                start = found.offset
            consumer.assign([TopicPartition(topic, partition, start)])
            out: list[dict[str, Any]] = []
            deadline = time.monotonic() + wait
            while len(out) < limit and time.monotonic() < deadline:
                batch = consumer.consume(min(limit - len(out), 100), timeout=0.2)
                eof = False
                for m in batch:
                    err = m.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            eof = True
                            continue
                        raise KafkaException(err)
                    ts_type, ts = m.timestamp()
                    out.append(
                        {
                            "offset": m.offset(),
                            "timestamp": ts if ts_type else None,
                            "leader_epoch": m.leader_epoch(),
                            "key": show_bytes(m.key(), fmt),
                            "value": show_bytes(m.value(), fmt),
                            "headers": _headers(m.headers(), fmt),
                        }
                    )
                if eof:
                    break
            return {"topic": topic, "partition": partition, "start": start, "messages": out[:limit]}
        finally:
            consumer.close()
