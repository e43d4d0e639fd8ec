"""The single-node topic registry: names, ids, partition counts, configs and leader epochs.

In single-node mode the broker is its own controller; this file-backed registry is the
interim home of that metadata until the controller's metadata log (controller/) takes over.
Writes are atomic (temp file, fsync, rename) so a crash leaves the old or the new version.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REGISTRY_FILE = "epochlog-topics.json"
MAX_TOPIC_NAME = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic_name(name: str) -> str | None:
    """None when ``name`` is a legal Kafka topic name, else the reason it is not."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_TOPIC_NAME:
        return f"topic name is longer than {MAX_TOPIC_NAME} characters"
    if not _LEGAL.match(name):
        return f"topic name {name!r} has characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    leader_epochs: list[int] = field(default_factory=list)
    internal: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "id": str(self.topic_id),
            "partitions": self.partitions,
            "configs": self.configs,
            "leader_epochs": self.leader_epochs,
            "internal": self.internal,
        }

    @classmethod
    def from_json(cls, name: str, d: dict[str, Any]) -> TopicInfo:
        parts = int(d["partitions"])
        epochs = [int(e) for e in d.get("leader_epochs", [])]
        epochs += [0] * (parts - len(epochs))
        return cls(name, uuid.UUID(d["id"]), parts, dict(d.get("configs", {})), epochs, bool(d.get("internal")))


class TopicRegistry:
    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / REGISTRY_FILE
        self.topics: dict[str, TopicInfo] = {}
        self.by_id: dict[uuid.UUID, TopicInfo] = {}

    def load(self) -> None:
        if not self.path.exists():
            return
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError) as e:
            raise RuntimeError(f"topic registry {self.path} is unreadable: {e}") from e
        for name, d in data.get("topics", {}).items():
            info = TopicInfo.from_json(name, d)
            self.topics[name] = info
            self.by_id[info.topic_id] = info

    def save(self) -> None:
        data = {"version": 1, "topics": {n: t.to_json() for n, t in sorted(self.topics.items())}}
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        dfd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def add(self, info: TopicInfo) -> None:
        self.topics[info.name] = info
        self.by_id[info.topic_id] = info
        self.save()

    def remove(self, name: str) -> TopicInfo | None:
        info = self.topics.pop(name, None)
        if info is not None:
            self.by_id.pop(info.topic_id, None)
            self.save()
        return info

    def bump_all_epochs(self) -> None:
        """A returning leader gets a new epoch for every partition it leads (KIP-101)."""
        for t in self.topics.values():
            t.leader_epochs = [e + 1 for e in t.leader_epochs]
        if self.topics:
            self.save()
