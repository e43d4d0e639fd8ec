"""Read segment files batch by batch for `epochlog dump-log`, reporting a torn or corrupt tail."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from epochlog.protocol.record_batch import CorruptBatchError, compute_crc, read_header
from epochlog.protocol.records import CODEC_NAMES


def _segment_files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(path.glob("*.log"))
    return [path]


def dump(path: Path) -> Iterator[dict[str, Any]]:
    for seg in _segment_files(path):
        data = seg.read_bytes()
        pos = 0
        yield {"segment": str(seg), "size": len(data)}
        while pos < len(data):
            try:
                h = read_header(data, pos)
            except CorruptBatchError as e:
                yield {"position": pos, "error": str(e), "remaining_bytes": len(data) - pos}
                break
            if pos + h.size > len(data):
                yield {
                    "position": pos,
                    "error": f"torn batch: needs {h.size} bytes, {len(data) - pos} left",
                    "base_offset": h.base_offset,
                    "remaining_bytes": len(data) - pos,
                }
                break
            yield {
                "base_offset": h.base_offset,
                "last_offset": h.last_offset,
                "count": h.record_count,
                "partition_leader_epoch": h.partition_leader_epoch,
                "position": pos,
                "size": h.size,
                "crc": h.crc,
                "crc_valid": compute_crc(data, pos, h) == h.crc,
                "compression": CODEC_NAMES.get(h.compression, str(h.compression)),
                "base_timestamp": h.base_timestamp,
                "max_timestamp": h.max_timestamp,
                "producer_id": h.producer_id,
                "producer_epoch": h.producer_epoch,
                "base_sequence": h.base_sequence,
                "is_transactional": h.is_transactional,
                "is_control": h.is_control,
            }
            pos += h.size


def format_dump(entries: Iterable[dict[str, Any]]) -> Iterator[str]:
    for e in entries:
        if "segment" in e:
            yield f"Dumping {e['segment']} ({e['size']} bytes)"
        elif "error" in e:
            yield f"position: {e['position']} CORRUPT TAIL ({e['remaining_bytes']} bytes): {e['error']}"
        else:
            yield (
                f"baseOffset: {e['base_offset']} lastOffset: {e['last_offset']} count: {e['count']} "
                f"partitionLeaderEpoch: {e['partition_leader_epoch']} position: {e['position']} size: {e['size']} "
                f"compresscodec: {e['compression']} producerId: {e['producer_id']} "
                f"producerEpoch: {e['producer_epoch']} baseSequence: {e['base_sequence']} "
                f"maxTimestamp: {e['max_timestamp']} crc: {e['crc']} isvalid: {str(e['crc_valid']).lower()}"
            )
