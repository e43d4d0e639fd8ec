"""The controller's metadata records on disk: a PartitionLog (``__cluster_metadata-0``) of JSON records.

controller/ decides and keeps its records in memory; this module makes them durable in Kafka's
segment format (so `epochlog dump-log` reads them) and hands them back at start for
``Controller.replay``.
"""

from __future__ import annotations

import json
from pathlib import Path

from epochlog.clock import now_ms
from epochlog.controller.records import MetadataRecord, from_json, to_json
from epochlog.protocol.records import build_batch, iter_records
from epochlog.storage.config import LogConfig
from epochlog.storage.partition_log import PartitionLog

TOPIC = "__cluster_metadata"
METADATA_MAX_BATCH_BYTES = 8 * 1024 * 1024


class MetadataLog:
    def __init__(self, directory: Path) -> None:
        # One topic is one record: 10,000 partitions (the most one request may add) take about 1.8 MB. Kafka's
        # raft batches may be 8 MiB (KafkaRaftClient.MAX_BATCH_SIZE_BYTES).
        config = LogConfig(max_message_bytes=METADATA_MAX_BATCH_BYTES)
        self.log = PartitionLog.open(directory / f"{TOPIC}-0", TOPIC, 0, config, recover=True)

    def read_all(self) -> list[MetadataRecord]:
        out: list[MetadataRecord] = []
        if self.log.log_end_offset == 0:
            return out
        data = b"".join(self.log.read(0, 1 << 62).chunks)
        for r in iter_records(data):
            if r.value is not None:
                doc = json.loads(r.value)
                out.append(from_json(doc["kind"], doc["data"]))
        return out

    def append(self, records: list[MetadataRecord], epoch: int = 0) -> None:
        """Append and fsync: a controller decision is acted on only once it is durable."""
        if not records:
            return
        docs = (dict(zip(("kind", "data"), to_json(r), strict=True)) for r in records)
        batch = build_batch([(None, json.dumps(doc, sort_keys=True).encode()) for doc in docs])
        self.log.append_as_leader(batch, epoch, now_ms())
        self.log.flush()
        self.log.high_watermark = self.log.log_end_offset

    def close(self) -> None:
        self.log.close()
