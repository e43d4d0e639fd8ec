"""Each replica's leader-epoch lineage (epoch -> start offset) for one partition, and where they part.

Three sources, tried in this order for each replica; the page says which one each column came from:

- The replica's broker, over its metrics endpoint (`GET /v1/leader-epochs`, epochlog's own, see
  server/metrics.py): the in-memory epoch cache, with the log's start and end offsets and high watermark.
  It is asked when the console knows where the endpoint is (console/broker_metrics.py) and works wherever
  the brokers run.
- The leader, over the Kafka protocol: OffsetsForLeaderEpoch answers "the largest epoch <= E I know, and
  where it ends" (the start of the next epoch). Asking for the current epoch, then for one below each answer,
  walks the leader's whole checkpoint down to its first entry. This works against any Kafka-protocol cluster.
- A follower refuses OffsetsForLeaderEpoch (NOT_LEADER_OR_FOLLOWER, as in Kafka), and no Kafka admin API
  exposes a replica's checkpoint. When no endpoint answers and the console runs on the brokers' machine (a
  local `epochlog cluster up`), DescribeLogDirs names each broker's log directory and the console reads the
  replica's `leader-epoch-checkpoint` file there. Elsewhere the follower columns say "not available".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from epochlog.client.wire import Connection, ConnectionPool, WireError
from epochlog.console.broker_metrics import EndpointError, MetricsEndpoints
from epochlog.console.log_dirs import describe_replicas
from epochlog.protocol.codec import request_class
from epochlog.storage.checkpoints import read_epochs

OFFSET_FOR_LEADER_EPOCH_VERSION = 4
MAX_WALK = 10_000  # epochs; a bound on a walk against a broker that answers nonsense


@dataclass(frozen=True, slots=True)
class EpochStart:
    epoch: int
    start_offset: int


def walk_lineage(ask: Callable[[int], tuple[int, int]], current_epoch: int, log_start: int) -> list[EpochStart]:
    """The lineage behind OffsetsForLeaderEpoch answers, oldest first. `ask(epoch)` returns (epoch, end offset).

    An epoch cache holds epochs with strictly increasing start offsets, so each answer's end offset is the
    start of the epoch above the one answered. Below its first entry a broker echoes the requested epoch with
    the first entry's start (Kafka's rule, kept by epochlog): an end offset repeating marks that, and stops
    the walk. The lowest epoch reached has no epoch below to tell its start; it is kept, starting at the log
    start offset, only when records before the next epoch's start remain (else it is an echo, or empty).
    """
    first, _ = ask(current_epoch)
    if first < 0:
        return []
    chain = [first]
    starts: dict[int, int] = {}
    prev_end: int | None = None
    for _ in range(MAX_WALK):
        if chain[-1] <= 0:
            break
        below, end = ask(chain[-1] - 1)
        if below < 0 or end < 0 or end == prev_end:
            break
        starts[chain[-1]] = end
        chain.append(below)
        prev_end = end
    lowest = chain[-1]
    if lowest not in starts:
        above = starts.get(chain[-2]) if len(chain) > 1 else None
        if above is None or log_start < above:
            starts[lowest] = log_start
    return sorted((EpochStart(e, s) for e, s in starts.items()), key=lambda e: e.epoch)


def divergence(leader: list[EpochStart], replica: list[EpochStart]) -> dict[str, int] | None:
    """Where a replica's lineage leaves the leader's: the first epoch the replica has that the leader does not,
    or has with another start offset. The replica's log past that offset is not the leader's (KIP-101): it
    must truncate there, or already did. A lineage that is a prefix of the leader's is behind, not diverged."""
    lead = {e.epoch: e.start_offset for e in leader}
    for e in replica:
        if lead.get(e.epoch) != e.start_offset:
            # The leader's epoch covering that point ends where the leader's next epoch after it starts.
            later = [le.start_offset for le in leader if le.epoch > e.epoch]
            at = min([e.start_offset, *later[:1]])
            return {"epoch": e.epoch, "offset": at}
    return None


class LineageReader:
    def __init__(self, timeout: float = 5.0, endpoints: MetricsEndpoints | None = None) -> None:
        self.timeout = timeout
        self.endpoints = endpoints or MetricsEndpoints()
        self._pool = ConnectionPool(timeout, client_id="epochlog-console")

    def conn(self, addr: tuple[str, int]) -> Connection:
        """One connection per broker, shared by the lineage walk and DescribeLogDirs."""
        return self._pool.get(addr)

    def close(self) -> None:
        self._pool.close()

    def ask_epoch(self, addr: tuple[str, int], topic: str, partition: int, current: int, epoch: int) -> tuple[int, int]:
        req_cls = request_class(23, OFFSET_FOR_LEADER_EPOCH_VERSION)
        mod = __import__(req_cls.__module__, fromlist=["OffsetForLeaderTopic", "OffsetForLeaderPartition"])
        req = req_cls(
            replica_id=-1,
            topics=(
                mod.OffsetForLeaderTopic(
                    topic=topic,
                    partitions=(
                        mod.OffsetForLeaderPartition(
                            partition=partition, current_leader_epoch=current, leader_epoch=epoch
                        ),
                    ),
                ),
            ),
        )
        resp = self.conn(addr).request(req)
        p = resp.topics[0].partitions[0]
        if p.error_code.value != 0:
            raise WireError(f"OffsetsForLeaderEpoch {topic}-{partition} epoch {epoch}: error {p.error_code.value}")
        return int(p.leader_epoch), int(p.end_offset)

    def lineages(
        self, brokers: dict[int, tuple[str, int]], topic: str, partition: int, leader: int, leader_epoch: int,
        replicas: list[int], log_start: int,
    ) -> dict[str, Any]:  # fmt: skip
        out: list[dict[str, Any]] = []
        leader_entries: list[EpochStart] | None = None
        for r in replicas:
            row: dict[str, Any] = {"broker": r, "leader": r == leader, "source": None, "entries": [], "error": None}
            addr = brokers.get(r)
            if addr is None:
                row["error"] = "broker not in the metadata (down or fenced)"
                out.append(row)
                continue
            try:
                entries = self._replica_lineage(row, addr, topic, partition, leader_epoch, log_start)
                row["entries"] = [{"epoch": e.epoch, "start_offset": e.start_offset} for e in entries]
                if r == leader:
                    leader_entries = entries
            except (WireError, ValueError) as e:
                row["error"] = str(e)
            out.append(row)
        for row in out:
            if not row["leader"] and leader_entries is not None and row["entries"]:
                mine = [EpochStart(e["epoch"], e["start_offset"]) for e in row["entries"]]
                row["diverges"] = divergence(leader_entries, mine)
        return {"topic": topic, "partition": partition, "leader": leader, "leader_epoch": leader_epoch, "replicas": out}

    def _replica_lineage(
        self, row: dict[str, Any], addr: tuple[str, int], topic: str, partition: int, leader_epoch: int,
        log_start: int,
    ) -> list[EpochStart]:  # fmt: skip
        """One replica's entries, from the first source that answers; fills the row's source and extras."""
        # Size on disk for every replica; a broker that holds none is named, not guessed at.
        mine = describe_replicas(self.conn(addr), topic, [partition]).get(partition)
        if mine is not None:
            row.update(size=mine.size, offset_lag=mine.offset_lag)
        base = self.endpoints.base_url(row["broker"], addr[0])
        if base is not None:
            try:
                view = self.endpoints.leader_epochs(base, topic, partition)
            except EndpointError as e:
                row["endpoint_error"] = str(e)  # said on the page, then the other sources are tried
            else:
                if view is None:
                    raise WireError("the broker holds no replica of this partition")
                row["source"] = "the broker's /v1/leader-epochs"
                for k in ("log_start_offset", "log_end_offset", "high_watermark"):
                    row[k] = view.get(k)
                return [EpochStart(int(e["epoch"]), int(e["start_offset"])) for e in view["entries"]]
        if row["leader"]:
            row["source"] = "OffsetsForLeaderEpoch"
            return walk_lineage(
                lambda e: self.ask_epoch(addr, topic, partition, leader_epoch, e), leader_epoch, log_start
            )
        if mine is None:
            raise WireError("the broker holds no replica of this partition")
        path = mine.partition_dir(topic, partition) / "leader-epoch-checkpoint"
        # read_epochs takes a missing file for an empty cache (a new replica); here a missing file means
        # most often that the broker's disk is not this machine's.
        if not path.exists():
            raise WireError(
                f"{path} is not readable from here (the console is not on that broker's machine;"
                " give --metrics-port or --metrics-port-map to ask the broker)"
            )
        try:
            entries = read_epochs(path)
        except OSError as e:
            raise WireError(f"{path}: {e}") from None
        row["source"] = "leader-epoch-checkpoint"
        row["path"] = str(path)
        return [EpochStart(e, s) for e, s in entries]
