"""DescribeLogDirs (API 35): which replicas each of this broker's log directories holds, and how big they are.

As Kafka's ReplicaManager.describeLogDirs answers it: one result per directory, an offline one with
KAFKA_STORAGE_ERROR and nothing in it; per replica its size on disk and offset_lag = max(HW - log end, 0)
(there are no future replicas here, so is_future_key is always false); total and usable bytes of the
directory's file system from v4.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Any

from epochlog.protocol.codec import RequestHeader, decode_body
from epochlog.protocol.errors import Err
from epochlog.security.acl import Operation
from epochlog.server import authz

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker

UNKNOWN_BYTES = -1


def handle_describe_log_dirs(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = decode_body(frame, header)
    if not authz.cluster_allowed(broker, header, Operation.DESCRIBE):
        # Kafka's answer: no directories at all (the error code exists from v3).
        return {"throttle_time": 0, "error_code": Err.CLUSTER_AUTHORIZATION_FAILED, "results": []}
    wanted: dict[str, set[int]] | None = None
    if req.topics is not None:
        wanted = {}
        for t in req.topics:
            wanted.setdefault(t.topic, set()).update(int(p) for p in t.partitions)
    results = []
    for manager in broker.log_manager.managers:
        row: dict[str, Any] = {"log_dir": str(manager.dir.resolve()), "topics": []}
        if manager.offline:
            row.update(error_code=Err.KAFKA_STORAGE_ERROR, total_bytes=UNKNOWN_BYTES, usable_bytes=UNKNOWN_BYTES)
            results.append(row)
            continue
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, p), plog in sorted(manager.logs.items()):
            if wanted is not None and p not in wanted.get(topic, ()):
                continue
            by_topic.setdefault(topic, []).append(
                {
                    "partition_index": p,
                    "partition_size": plog.size_bytes,
                    "offset_lag": max(plog.high_watermark - plog.log_end_offset, 0),
                    "is_future_key": False,
                }
            )
        try:
            usage = shutil.disk_usage(manager.dir)
            total, usable = usage.total, usage.free
        except OSError:
            total = usable = UNKNOWN_BYTES
        row.update(
            error_code=Err.NONE,
            topics=[{"name": n, "partitions": rows} for n, rows in by_topic.items()],
            total_bytes=total,
            usable_bytes=usable,
        )
        results.append(row)
    return {"throttle_time": 0, "error_code": Err.NONE, "results": results}
