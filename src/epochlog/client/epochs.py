"""Epoch-aware position validation (KIP-320) for readers that keep their own offsets.

A saved position is (next offset, leader epoch that offset was read or looked up in). Before reading from it
again we ask the partition's current leader for the end offset of that epoch (OffsetsForLeaderEpoch). If the
leader's log ends that epoch below our position, the records between its answer and our position were
truncated away (an unclean election, or a leader that lost unflushed data) and possibly replaced by other
records at the same offsets: the answer is the first offset known to diverge.

This catches what an offset-only reader cannot: after a truncation the log can grow back past the saved
offset, and then nothing is out of range even though records were lost.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from epochlog.client.security import ClientSecurity
from epochlog.client.wire import Connection, ConnectionPool, WireError
from epochlog.codes import Err
from epochlog.protocol.codec import request_class

log = logging.getLogger("epochlog.client.epochs")

TopicPartition = tuple[str, int]

# The errors a retry after a metadata refresh can clear.
_RETRIABLE = {Err.LEADER_NOT_AVAILABLE, Err.NOT_LEADER_OR_FOLLOWER, Err.FENCED_LEADER_EPOCH, Err.UNKNOWN_LEADER_EPOCH}

METADATA_VERSION = 9  # first flexible version; Kafka >= 2.4 and epochlog serve it


def metadata_request(topics: Iterable[str] | None, version: int = METADATA_VERSION) -> Any:
    """A Metadata request for the named topics (every topic when None), creating none and asking for no
    authorized operations; the fields each version has (topic ids from v10, no cluster operations from v11)."""
    cls = request_class(3, version)
    topic_cls = __import__(cls.__module__, fromlist=["MetadataRequestTopic"]).MetadataRequestTopic
    by_id = {"topic_id": None} if "topic_id" in {f.name for f in dataclasses.fields(topic_cls)} else {}
    fields: dict[str, Any] = {
        "topics": None if topics is None else tuple(topic_cls(name=t, **by_id) for t in topics),
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }
    if "include_cluster_authorized_operations" in {f.name for f in dataclasses.fields(cls)}:
        fields["include_cluster_authorized_operations"] = False
    return cls(**fields)
OFFSET_FOR_LEADER_EPOCH_VERSION = 4  # flexible, carries CurrentLeaderEpoch (KIP-320)


@dataclass(frozen=True, slots=True)
class Position:
    """The next offset to read and the leader epoch it belongs to (-1: unknown, so not validated)."""

    offset: int
    epoch: int = -1


@dataclass(frozen=True, slots=True)
class EpochEnd:
    """The leader's answer: the largest epoch <= the one asked for, and where that epoch ends."""

    error: int
    leader_epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class Truncation:
    """A saved position the current leader no longer has. divergence_offset is None when the leader knows
    no epoch at or below ours (its history starts later), so the exact point cannot be found."""

    topic: str
    partition: int
    position: Position
    divergence_offset: int | None
    leader_epoch: int

    def describe(self) -> str:
        where = "unknown" if self.divergence_offset is None else str(self.divergence_offset)
        return (
            f"{self.topic}-{self.partition}: position {self.position.offset} (epoch {self.position.epoch}) "
            f"diverges at offset {where} (leader answered epoch {self.leader_epoch})"
        )


@dataclass
class ValidationReport:
    truncations: list[Truncation] = field(default_factory=list)
    # Positions that could not be checked: unknown epoch, topic gone, or the broker lacks the API.
    unchecked: dict[TopicPartition, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.truncations


def divergence(position: Position, answer: EpochEnd) -> Truncation | None:
    """Decide truncation from one OffsetsForLeaderEpoch answer; the same rule as Kafka's consumer.

    Pure, so it can be tested against crafted answers without a cluster. Returns a Truncation with an
    empty topic; the caller fills in the partition.
    """
    if position.epoch < 0:
        return None
    if answer.leader_epoch < 0 or answer.end_offset < 0:
        return Truncation("", -1, position, None, answer.leader_epoch)
    if answer.end_offset < position.offset:
        return Truncation("", -1, position, answer.end_offset, answer.leader_epoch)
    return None


@dataclass(frozen=True, slots=True)
class PartitionLeader:
    leader_id: int
    leader_epoch: int
    error: int = Err.NONE


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    out = []
    for item in bootstrap.split(","):
        item = item.strip()
        if not item:
            continue
        if "://" in item:
            item = item.split("://", 1)[1]
        host, _, port = item.rpartition(":")
        out.append((host.strip("[]") or "127.0.0.1", int(port)))
    if not out:
        raise ValueError(f"no broker address in bootstrap servers {bootstrap!r}")
    return out


def connect_first(
    bootstrap: str, timeout: float, client_id: str, security: ClientSecurity | None = None
) -> Connection:
    """A connection to the first broker of a bootstrap list (h1:p1,h2:p2), as Kafka's tools ask the first."""
    host, port = parse_bootstrap(bootstrap)[0]
    return Connection(host, port, timeout=timeout, client_id=client_id, security=security)


class LeaderEpochClient:
    """Metadata (for leaders and their epochs) and OffsetsForLeaderEpoch, sent to each partition's leader."""

    def __init__(self, bootstrap: str, timeout: float = 10.0, retries: int = 5, backoff: float = 0.5) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.timeout, self.retries, self.backoff = timeout, retries, backoff
        self._pool = ConnectionPool(timeout, client_id="epochlog-spark")
        self._brokers: dict[int, tuple[str, int]] = {}

    def _conn(self, addr: tuple[str, int]) -> Connection:
        return self._pool.get(addr)

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> LeaderEpochClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def metadata(self, topics: Iterable[str]) -> dict[TopicPartition, PartitionLeader]:
        req = metadata_request(sorted(set(topics)))
        last: Exception | None = None
        addrs = list(self._brokers.values()) + self.bootstrap
        for addr in addrs:
            try:
                resp = self._conn(addr).request(req)
            except WireError as e:
                last = e
                continue
            self._brokers = {b.node_id: (b.host, b.port) for b in resp.brokers}
            out: dict[TopicPartition, PartitionLeader] = {}
            for t in resp.topics:
                if t.error_code.value != Err.NONE:
                    out[(t.name, -1)] = PartitionLeader(-1, -1, t.error_code.value)
                    continue
                for p in t.partitions:
                    out[(t.name, p.partition_index)] = PartitionLeader(p.leader_id, p.leader_epoch, p.error_code.value)
            return out
        raise WireError(f"no broker answered Metadata: {last}")

    def _ask_leader(
        self, leader: int, queries: Mapping[TopicPartition, tuple[int, int]]
    ) -> dict[TopicPartition, EpochEnd]:
        req_cls = request_class(23, OFFSET_FOR_LEADER_EPOCH_VERSION)
        mod = __import__(req_cls.__module__, fromlist=["OffsetForLeaderTopic", "OffsetForLeaderPartition"])
        by_topic: dict[str, list[tuple[int, int, int]]] = {}
        for (t, p), (current, epoch) in queries.items():
            by_topic.setdefault(t, []).append((p, current, epoch))
        req = req_cls(
            replica_id=-1,  # a consumer, not a follower: the leader answers from its whole log
            topics=tuple(
                mod.OffsetForLeaderTopic(
                    topic=t,
                    partitions=tuple(
                        mod.OffsetForLeaderPartition(partition=p, current_leader_epoch=cur, leader_epoch=e)
                        for p, cur, e in parts
                    ),
                )
                for t, parts in by_topic.items()
            ),
        )
        addr = self._brokers.get(leader)
        if addr is None:
            raise WireError(f"leader {leader} is not in the metadata")
        resp = self._conn(addr).request(req)
        out: dict[TopicPartition, EpochEnd] = {}
        for t in resp.topics:
            for p in t.partitions:
                out[(t.topic, p.partition)] = EpochEnd(p.error_code.value, p.leader_epoch, p.end_offset)
        return out

    def end_offsets_for(self, epochs: Mapping[TopicPartition, int]) -> dict[TopicPartition, EpochEnd]:
        """The leader's (epoch, end offset) for each partition's epoch, retrying leader moves.

        Partitions whose topic no longer exists answer UNKNOWN_TOPIC_OR_PARTITION after the retries.
        """
        pending = dict(epochs)
        result: dict[TopicPartition, EpochEnd] = {}
        for attempt in range(self.retries + 1):
            if not pending:
                break
            leaders = self.metadata({t for t, _ in pending})
            by_leader: dict[int, dict[TopicPartition, tuple[int, int]]] = {}
            retry: dict[TopicPartition, int] = {}
            for tp, epoch in pending.items():
                pl = leaders.get(tp) or leaders.get((tp[0], -1))
                if pl is None:
                    pl = PartitionLeader(-1, -1, Err.UNKNOWN_TOPIC_OR_PARTITION)
                if pl.error != Err.NONE or pl.leader_id < 0:
                    code = pl.error or Err.LEADER_NOT_AVAILABLE
                    if code in _RETRIABLE or code == Err.UNKNOWN_TOPIC_OR_PARTITION:
                        retry[tp] = epoch
                    result[tp] = EpochEnd(code, -1, -1)
                    continue
                if pl.leader_epoch >= 0 and epoch > pl.leader_epoch:
                    # Our metadata is behind the epoch we saved; like Kafka's consumer, wait for it to
                    # catch up rather than ask a leader that cannot know that epoch yet.
                    retry[tp] = epoch
                    result[tp] = EpochEnd(Err.UNKNOWN_LEADER_EPOCH, -1, -1)
                    continue
                # CurrentLeaderEpoch fences us from a stale leader that still thinks it leads (KIP-320).
                by_leader.setdefault(pl.leader_id, {})[tp] = (pl.leader_epoch, epoch)
            for leader, queries in by_leader.items():
                try:
                    answers = self._ask_leader(leader, queries)
                except WireError as e:
                    # A leader that just died is the usual cause, and the next metadata names its
                    # successor: only the last attempt's failure is worth a warning.
                    last = attempt == self.retries
                    log.log(
                        logging.WARNING if last else logging.INFO,
                        "OffsetsForLeaderEpoch to broker %s failed%s: %s",
                        leader,
                        "" if last else ", retrying",
                        e,
                    )
                    retry.update({tp: epochs[tp] for tp in queries})
                    continue
                for tp in queries:
                    ans = answers.get(tp, EpochEnd(Err.UNKNOWN_TOPIC_OR_PARTITION, -1, -1))
                    result[tp] = ans
                    if ans.error in _RETRIABLE or ans.error == Err.UNKNOWN_TOPIC_OR_PARTITION:
                        retry[tp] = epochs[tp]
            pending = retry
            if pending and attempt < self.retries:
                time.sleep(self.backoff)
        return result

    def validate(self, positions: Mapping[TopicPartition, Position]) -> ValidationReport:
        """Check every position that carries an epoch; see divergence() for the rule."""
        report = ValidationReport()
        to_ask = {tp: pos.epoch for tp, pos in positions.items() if pos.epoch >= 0}
        for tp, pos in positions.items():
            if pos.epoch < 0:
                report.unchecked[tp] = "no leader epoch saved with this position"
        if not to_ask:
            return report
        answers = self.end_offsets_for(to_ask)
        for tp, epoch in to_ask.items():
            ans = answers.get(tp)
            if ans is None or ans.error != Err.NONE:
                code = ans.error if ans else -1
                report.unchecked[tp] = f"leader answered error {code}"
                continue
            t = divergence(positions[tp], ans)
            if t is not None:
                report.truncations.append(Truncation(tp[0], tp[1], t.position, t.divergence_offset, t.leader_epoch))
            log.debug("validated %s-%s at %s epoch %s: %s", tp[0], tp[1], positions[tp].offset, epoch, ans)
        return report
