"""Every log directory of a broker (``log.dirs``): one LogManager each, one failure channel for all.

New partitions go to the online directory holding the fewest partitions (Kafka's LogManager does the
same). A directory that fails, at start-up or later, is offline until the process restarts; the broker
keeps serving the partitions of the others, and a partition that lived on the failed one stays offline
here (it is not silently re-created empty on another directory).
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

from epochlog.storage.config import LogConfig
from epochlog.storage.errors import KafkaStorageError, LogDirError
from epochlog.storage.log_dir_failure import LogDirFailureChannel
from epochlog.storage.log_manager import RETENTION_INTERVAL_MS, LogManager
from epochlog.storage.partition_log import PartitionLog

log = logging.getLogger("epochlog.storage")


class LogDirs:
    def __init__(
        self,
        dirs: list[Path],
        default_config: LogConfig,
        retention_check_interval_ms: int = RETENTION_INTERVAL_MS,
        failures: LogDirFailureChannel | None = None,
    ) -> None:
        if not dirs:
            raise LogDirError("log.dirs names no directory")
        self.failures = failures if failures is not None else LogDirFailureChannel()
        # Partitions of a failed directory, remembered before its manager lets them go.
        self.offline_partitions: dict[tuple[str, int], str] = {}
        self.failures.subscribe(self._remember_offline)
        self.managers = [LogManager(d, default_config, retention_check_interval_ms, self.failures) for d in dirs]
        self.default_config = default_config

    def _remember_offline(self, failed: str) -> None:
        for m in self.managers:
            if str(m.dir) == failed:
                for key in m.logs:
                    self.offline_partitions[key] = failed

    # -- start-up ----------------------------------------------------------------------------
    @property
    def dir(self) -> Path:
        return self.managers[0].dir

    @property
    def online(self) -> list[LogManager]:
        return [m for m in self.managers if not m.offline]

    @property
    def had_clean_shutdown(self) -> bool:
        return all(m.had_clean_shutdown for m in self.online)

    @property
    def previous_broker_epoch(self) -> int:
        """The broker epoch every directory's clean-shutdown marker agrees on, else -1 (KIP-966: a
        directory without one may have lost unflushed records)."""
        epochs = {m.previous_broker_epoch for m in self.online}
        return epochs.pop() if len(epochs) == 1 and len(self.online) == len(self.managers) else -1

    def open(self, node_id: int, cluster_id: str = "") -> str:
        """Each directory's meta.properties must agree on node and cluster; one that cannot be read or
        written is offline from the start (a broker with none left refuses to start)."""
        for m in self.managers:
            try:
                cluster_id = m.open(node_id, cluster_id)
            except OSError as e:
                self.failures.mark_offline(m.dir, f"opening: {e}")
        self._require_online()
        return cluster_id

    def load_all(self, configs: dict[str, LogConfig] | None = None) -> None:
        for m in self.online:
            try:
                m.load_all(configs)
            except (OSError, KafkaStorageError) as e:
                self.failures.mark_offline(m.dir, f"loading logs: {e}")
        self._require_online()

    def _require_online(self) -> None:
        if not self.online:
            raise LogDirError(f"no log directory is usable: {self.failures.offline_dirs}")

    # -- partitions ----------------------------------------------------------------------------
    @property
    def logs(self) -> dict[tuple[str, int], PartitionLog]:
        out: dict[tuple[str, int], PartitionLog] = {}
        for m in self.managers:
            out.update(m.logs)
        return out

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        for m in self.managers:
            plog = m.logs.get((topic, partition))
            if plog is not None:
                return plog
        return None

    def manager_of(self, topic: str, partition: int) -> LogManager | None:
        return next((m for m in self.managers if (topic, partition) in m.logs), None)

    def directory_id_of(self, log_dir: str) -> uuid.UUID | None:
        return next((m.directory_id for m in self.managers if str(m.dir) == log_dir), None)

    def create(
        self, topic: str, partition: int, topic_id: uuid.UUID | None, config: LogConfig | None = None
    ) -> PartitionLog:
        existing = self.get(topic, partition)
        if existing is not None:
            return existing
        failed = self.offline_partitions.get((topic, partition))
        if failed is not None:
            raise KafkaStorageError(f"{topic}-{partition} is on the offline log directory {failed}")
        online = self.online
        if not online:
            raise KafkaStorageError("every log directory is offline")
        target = min(online, key=lambda m: len(m.logs))
        return target.create(topic, partition, topic_id, config)

    def delete_topic(self, topic: str) -> None:
        for key in [k for k in self.offline_partitions if k[0] == topic]:
            del self.offline_partitions[key]
        for m in self.online:
            try:
                m.delete_topic(topic)
            except KafkaStorageError as e:
                log.error("%s", e)

    def delete_partition(self, topic: str, partition: int) -> None:
        self.offline_partitions.pop((topic, partition), None)
        m = self.manager_of(topic, partition)
        if m is None:
            return
        try:
            m.delete_partition(topic, partition)
        except KafkaStorageError as e:
            log.error("%s", e)

    # -- upkeep ----------------------------------------------------------------------------------
    def checkpoint(self) -> None:
        for m in self.online:
            try:
                m.checkpoint()
            except KafkaStorageError as e:
                log.error("%s", e)

    def tick(self, now_ms: int) -> None:
        for m in self.online:
            m.tick(now_ms)

    def close(self, broker_epoch: int = -1) -> None:
        for m in self.online:
            m.close(broker_epoch)
