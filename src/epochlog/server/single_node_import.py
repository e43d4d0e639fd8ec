"""Open a data dir written by the single-node broker of before combined mode.

That broker kept its topics in ``epochlog-topics.json`` (names, ids, partition counts, configs and
each partition's leader epoch) and its producer-id high water in ``producer-id-block``. On the first
start in combined mode both become metadata records, written before the controller replays its log,
and the files are renamed with a ``.imported`` suffix so it happens once. The partition logs are
left as they are: the node keeps leading them at the epochs it had reached.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from epochlog.controller.controller import Controller
from epochlog.server.metadata_log import MetadataLog

log = logging.getLogger("epochlog.combined")

REGISTRY_FILE = "epochlog-topics.json"
PRODUCER_ID_FILE = "producer-id-block"
IMPORTED_SUFFIX = ".imported"


@dataclass(frozen=True)
class OldTopic:
    """One topic as the single-node registry kept it."""

    name: str
    topic_id: uuid.UUID
    configs: dict[str, str]
    leader_epochs: list[int]


def read_registry(path: Path) -> list[OldTopic]:
    """The old registry's topics ({"version": 1, "topics": {name: {id, partitions, configs, leader_epochs}}});
    a partition the file gave no epoch starts at 0."""
    try:
        data = json.loads(path.read_text())
        out = []
        for name, d in data.get("topics", {}).items():
            parts = int(d["partitions"])
            epochs = [int(e) for e in d.get("leader_epochs", [])]
            epochs += [0] * (parts - len(epochs))
            configs = {str(k): str(v) for k, v in d.get("configs", {}).items()}
            out.append(OldTopic(name, uuid.UUID(d["id"]), configs, epochs))
        return out
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise RuntimeError(f"topic registry {path} is unreadable: {e}") from e


def import_single_node_dir(log_dir: Path, node_id: int) -> bool:
    """Turn an old single-node registry into metadata records; True when something was imported.

    Refuses (RuntimeError) when the dir has both a registry and a non-empty metadata log: which one is
    the truth cannot be told, and guessing could drop topics."""
    registry_path = log_dir / REGISTRY_FILE
    if not registry_path.exists():
        return False
    topics = read_registry(registry_path)
    metadata = MetadataLog(log_dir)
    try:
        if metadata.read_all():
            raise RuntimeError(
                f"{log_dir} holds both a single-node topic registry ({REGISTRY_FILE}) and a metadata log; "
                f"move one of them away (the registry is the older one)"
            )
        core = Controller()
        for info in topics:
            core.import_topic(info.name, str(info.topic_id), info.configs, list(info.leader_epochs), node_id)
        pid_path = log_dir / PRODUCER_ID_FILE
        if pid_path.exists():
            try:
                high = int(pid_path.read_text().strip() or 0)
            except ValueError as e:
                raise RuntimeError(f"{pid_path} is corrupt: {e}") from e
            core.allocate_producer_ids(node_id, high)  # ids below the old block's end are never handed out again
        metadata.append(core.records)
    finally:
        metadata.close()
    for path in (registry_path, log_dir / PRODUCER_ID_FILE):
        if path.exists():
            os.replace(path, path.with_name(path.name + IMPORTED_SUFFIX))
    _fsync_dir(log_dir)
    log.info(
        "imported %d topics from the single-node registry %s into the metadata log", len(topics), registry_path
    )
    return True


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
