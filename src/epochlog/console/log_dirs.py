"""Where a broker keeps its replicas of a topic and how big they are: DescribeLogDirs (API 35).

Any Kafka-protocol broker answers it for its own log directories; the console asks each broker, since a
replica's size is only known to the broker that holds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from epochlog.client.wire import Connection
from epochlog.protocol.codec import request_class

DESCRIBE_LOG_DIRS_VERSION = 2


@dataclass(frozen=True, slots=True)
class ReplicaDir:
    log_dir: str
    size: int
    offset_lag: int

    def partition_dir(self, topic: str, partition: int) -> Path:
        return Path(self.log_dir) / f"{topic}-{partition}"


def describe_replicas(conn: Connection, topic: str, partitions: list[int]) -> dict[int, ReplicaDir]:
    """{partition: its replica on this broker} for the partitions asked that the broker holds."""
    req_cls = request_class(35, DESCRIBE_LOG_DIRS_VERSION)
    mod = __import__(req_cls.__module__, fromlist=["DescribableLogDirTopic"])
    req = req_cls(topics=(mod.DescribableLogDirTopic(topic=topic, partitions=tuple(partitions)),))
    resp = conn.request(req)
    out: dict[int, ReplicaDir] = {}
    for r in resp.results:
        if int(r.error_code):  # an offline directory holds nothing it can describe
            continue
        for t in r.topics:
            if t.name != topic:
                continue
            for p in t.partitions:
                out[int(p.partition_index)] = ReplicaDir(str(r.log_dir), int(p.partition_size), int(p.offset_lag))
    return out
