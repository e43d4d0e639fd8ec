"""Open a data dir written by the single-node broker of before combined mode.

That broker kept its topics in ``epochlog-topics.json`` (names, ids, partition counts, configs and
each partition's leader epoch) and its producer-id high water in ``producer-id-block``. On the first
start in combined mode both become metadata records, written before the controller replays its log,
and the files are renamed with a ``.imported`` suffix so it happens once. The partition logs are
left as they are: the node keeps leading them at the epochs it had reached.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from epochlog.controller.controller import Controller
from epochlog.server.metadata_log import MetadataLog
from epochlog.server.topics import REGISTRY_FILE, TopicRegistry

log = logging.getLogger("epochlog.combined")

PRODUCER_ID_FILE = "producer-id-block"
IMPORTED_SUFFIX = ".imported"


def import_single_node_dir(log_dir: Path, node_id: int) -> bool:
    """Turn an old single-node registry into metadata records; True when something was imported.

    Refuses (RuntimeError) when the dir has both a registry and a non-empty metadata log: which one is
    the truth cannot be told, and guessing could drop topics."""
    registry_path = log_dir / REGISTRY_FILE
    if not registry_path.exists():
        return False
    registry = TopicRegistry(log_dir)
    registry.load()
    metadata = MetadataLog(log_dir)
    try:
        if metadata.read_all():
            raise RuntimeError(
                f"{log_dir} holds both a single-node topic registry ({REGISTRY_FILE}) and a metadata log; "
                f"move one of them away (the registry is the older one)"
            )
        core = Controller()
        for info in registry.topics.values():
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
        "imported %d topics from the single-node registry %s into the metadata log", len(registry.topics), registry_path
    )
    return True


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
