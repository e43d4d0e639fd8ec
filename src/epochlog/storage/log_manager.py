"""All partition logs of one log directory: meta.properties, checkpoints, clean-shutdown marker.

An I/O error anywhere in the directory takes it offline (``LogDirFailureChannel``); its logs are then
let go without writing, and it is left out of ticks, checkpoints and the clean shutdown.
"""

from __future__ import annotations

import base64
import json
import logging
import shutil
import time
import uuid
from pathlib import Path

from epochlog.clock import now_ms as _now_ms
from epochlog.storage import checkpoints, fileops
from epochlog.storage.config import LogConfig
from epochlog.storage.errors import KafkaStorageError, LogDirError
from epochlog.storage.log_dir_failure import LogDirFailureChannel
from epochlog.storage.log_loader import parse_dir_name
from epochlog.storage.partition_log import PartitionLog

log = logging.getLogger("epochlog.storage")

META = "meta.properties"
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
RECOVERY_POINTS = "recovery-point-offset-checkpoint"
HIGH_WATERMARKS = "replication-offset-checkpoint"
LOG_STARTS = "log-start-offset-checkpoint"
DELETE_SUFFIX = "-delete"
METADATA_TOPIC = "__cluster_metadata"
CHECKPOINT_INTERVAL_MS = 60_000
RETENTION_INTERVAL_MS = 300_000



def new_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class LogManager:
    def __init__(
        self,
        log_dir: Path,
        default_config: LogConfig,
        retention_check_interval_ms: int = RETENTION_INTERVAL_MS,
        failures: LogDirFailureChannel | None = None,
    ) -> None:
        self.dir = log_dir
        self.failures = failures if failures is not None else LogDirFailureChannel()
        self.failures.subscribe(self._on_failure)
        # meta.properties directory.id (KIP-858): how the controller names this directory.
        self.directory_id: uuid.UUID | None = None
        self.default_config = default_config
        self.logs: dict[tuple[str, int], PartitionLog] = {}
        self.had_clean_shutdown = False
        self.previous_broker_epoch = -1  # what the clean-shutdown marker held (-1: none, or unreadable)
        self.retention_interval_ms = retention_check_interval_ms
        self._last_checkpoint = _now_ms()
        self._last_retention = _now_ms()

    @property
    def offline(self) -> bool:
        return self.failures.is_offline(self.dir)

    def _on_failure(self, failed: str) -> None:
        if failed != str(self.dir):
            return
        for plog in self.logs.values():
            plog.abandon()
        self.logs.clear()

    def open(self, node_id: int, cluster_id: str = "") -> str:
        """Check or write meta.properties and consume the clean-shutdown marker; returns the cluster id."""
        self.dir.mkdir(parents=True, exist_ok=True)
        meta = self.dir / META
        props: dict[str, str] = {}
        if meta.exists():
            for line in meta.read_text().splitlines():
                if "=" in line and not line.lstrip().startswith("#"):
                    k, v = line.split("=", 1)
                    props[k.strip()] = v.strip()
            stored_node = props.get("node.id", props.get("broker.id"))
            if stored_node is not None and int(stored_node) != node_id:
                raise LogDirError(
                    f"{meta} belongs to node.id {stored_node}, but this broker is node.id {node_id}; "
                    "point log.dirs at this node's own directory"
                )
            stored_cluster = props.get("cluster.id", "")
            if cluster_id and stored_cluster and cluster_id != stored_cluster:
                raise LogDirError(f"{meta} belongs to cluster {stored_cluster}, not {cluster_id}")
            cluster_id = stored_cluster or cluster_id or new_cluster_id()
        else:
            cluster_id = cluster_id or new_cluster_id()
        directory_id = props.get("directory.id", "")
        try:
            self.directory_id = uuid.UUID(bytes=base64.urlsafe_b64decode(directory_id + "=" * (-len(directory_id) % 4)))
        except ValueError:
            self.directory_id = None
        if self.directory_id is None or "cluster.id" not in props:
            self.directory_id = self.directory_id or uuid.uuid4()
            text_id = base64.urlsafe_b64encode(self.directory_id.bytes).decode().rstrip("=")
            checkpoints.write_atomically(
                meta, f"version=1\nnode.id={node_id}\ncluster.id={cluster_id}\ndirectory.id={text_id}\n"
            )
        marker = self.dir / CLEAN_SHUTDOWN
        self.had_clean_shutdown = marker.exists()
        self.previous_broker_epoch = read_clean_shutdown_epoch(marker) if self.had_clean_shutdown else -1
        if self.had_clean_shutdown:
            fileops.ops().unlink(marker)
            checkpoints.fsync_dir(self.dir)
        return cluster_id

    def load_all(self, configs: dict[str, LogConfig] | None = None) -> None:
        recover = not self.had_clean_shutdown
        rps = checkpoints.read_offsets(self.dir / RECOVERY_POINTS)
        hws = checkpoints.read_offsets(self.dir / HIGH_WATERMARKS)
        starts = checkpoints.read_offsets(self.dir / LOG_STARTS)
        for d in sorted(self.dir.iterdir()):
            if not d.is_dir():
                continue
            if d.name.endswith(DELETE_SUFFIX):
                shutil.rmtree(d, ignore_errors=True)
                continue
            parsed = parse_dir_name(d.name)
            # The metadata log of a combined node shares the dir (Kafka's metadata.log.dir default); it
            # belongs to the controller, never to the broker's partitions.
            if parsed is None or parsed[0] == METADATA_TOPIC:
                continue
            cfg = (configs or {}).get(parsed[0], self.default_config)
            t0 = time.monotonic()
            plog = PartitionLog.open(
                d,
                parsed[0],
                parsed[1],
                cfg,
                recover=recover,
                recovery_point=rps.get(parsed, 0),
                log_start_offset=starts.get(parsed, 0),
                high_watermark=hws.get(parsed, 0),
                failures=self.failures,
            )
            plog.persist_log_start = self.checkpoint_log_starts
            self.logs[parsed] = plog
            if recover:
                log.info(
                    "%s-%d: recovered [%d, %d) in %.0f ms after an unclean shutdown",
                    parsed[0],
                    parsed[1],
                    plog.log_start_offset,
                    plog.log_end_offset,
                    (time.monotonic() - t0) * 1000,
                )

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get((topic, partition))

    def create(
        self, topic: str, partition: int, topic_id: uuid.UUID | None, config: LogConfig | None = None
    ) -> PartitionLog:
        existing = self.logs.get((topic, partition))
        if existing is not None:
            return existing
        plog = PartitionLog.open(
            self.dir / f"{topic}-{partition}",
            topic,
            partition,
            config or self.default_config,
            recover=False,
            topic_id=topic_id,
            failures=self.failures,
        )
        plog.persist_log_start = self.checkpoint_log_starts
        self.logs[(topic, partition)] = plog
        return plog

    def delete_topic(self, topic: str) -> None:
        if self.offline:
            return
        with self.failures.guard(self.dir, f"deleting topic {topic}"):
            self._delete_topic(topic)

    def _delete_topic(self, topic: str) -> None:
        for key in [k for k in self.logs if k[0] == topic]:
            self._delete_log(key)
        checkpoints.fsync_dir(self.dir)

    def delete_partition(self, topic: str, partition: int) -> None:
        """Remove one replica's log (a reassignment moved it elsewhere), as Kafka's StopReplica with
        delete: renamed to ``-delete`` first, so a crash midway leaves a directory load_all removes."""
        if self.offline or (topic, partition) not in self.logs:
            return
        with self.failures.guard(self.dir, f"deleting {topic}-{partition}"):
            self._delete_log((topic, partition))
            checkpoints.fsync_dir(self.dir)

    def _delete_log(self, key: tuple[str, int]) -> None:
        plog = self.logs.pop(key)
        for seg in plog.segments:
            seg.close()
        target = plog.dir.with_name(f"{plog.dir.name}.{uuid.uuid4().hex}{DELETE_SUFFIX}")
        fileops.ops().rename(plog.dir, target)
        shutil.rmtree(target, ignore_errors=True)

    def checkpoint(self) -> None:
        if self.offline:
            return
        with self.failures.guard(self.dir, "writing checkpoints"):
            self._checkpoint()

    def _checkpoint(self) -> None:
        checkpoints.write_offsets(self.dir / RECOVERY_POINTS, {k: v.recovery_point for k, v in self.logs.items()})
        checkpoints.write_offsets(self.dir / HIGH_WATERMARKS, {k: v.high_watermark for k, v in self.logs.items()})
        self._write_log_starts()

    def checkpoint_log_starts(self) -> None:
        """log-start-offset-checkpoint alone, at once: a start offset moved by DeleteRecords (or learned from
        a leader) must survive a kill -9, which the periodic checkpoint would not guarantee. Called from
        inside a PartitionLog operation, whose own guard takes the directory offline on an I/O error."""
        self._write_log_starts()

    def _write_log_starts(self) -> None:
        checkpoints.write_offsets(self.dir / LOG_STARTS, {k: v.log_start_offset for k, v in self.logs.items()})

    def tick(self, now_ms: int) -> None:
        if self.offline:
            return
        try:
            self._tick(now_ms)
        except KafkaStorageError as e:
            log.error("%s", e)  # the directory is offline now; its logs were let go

    def _tick(self, now_ms: int) -> None:
        for plog in self.logs.values():
            plog.maybe_flush_by_time(now_ms)
        if now_ms - self._last_retention >= self.retention_interval_ms:
            self._last_retention = now_ms
            for plog in self.logs.values():
                plog.apply_retention(now_ms)
                plog.producer_state.remove_expired(now_ms)
        if now_ms - self._last_checkpoint >= CHECKPOINT_INTERVAL_MS:
            self._last_checkpoint = now_ms
            self.checkpoint()

    def close(self, broker_epoch: int = -1) -> None:
        """Flush and mark a clean shutdown; an offline directory gets no marker, so it is recovered. The
        marker holds ``broker_epoch``, which the next registration sends as its PreviousBrokerEpoch."""
        if self.offline:
            return
        try:
            for plog in list(self.logs.values()):
                plog.close()
            self.checkpoint()
            if not self.offline:
                with self.failures.guard(self.dir, "writing the clean-shutdown marker"):
                    text = json.dumps({"version": 0, "brokerEpoch": broker_epoch})
                    checkpoints.write_atomically(self.dir / CLEAN_SHUTDOWN, text)
        except KafkaStorageError as e:
            log.error("%s", e)


def read_clean_shutdown_epoch(marker: Path) -> int:
    """The broker epoch a clean-shutdown marker holds (JSON ``{"version": 0, "brokerEpoch": N}`` as Kafka
    writes it); -1 for an empty marker (written before it held one) or one that cannot be read."""
    try:
        doc = json.loads(marker.read_text() or "{}")
        epoch = doc.get("brokerEpoch", -1) if isinstance(doc, dict) else -1
    except (OSError, ValueError):
        return -1
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else -1
