"""Read segment files batch by batch for `epochlog dump-log`, reporting a torn or corrupt tail.

Segments of ``__cluster_metadata`` and its snapshot files (``.checkpoint``) can also be decoded into
their metadata records, as kafka-dump-log.sh does with ``--cluster-metadata-decoder``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from epochlog.protocol.record_batch import CorruptBatchError, compute_crc, read_header
from epochlog.protocol.records import CODEC_NAMES, iter_records


def _segment_files(path: Path, with_snapshots: bool) -> list[Path]:
    if path.is_dir():
        found = sorted(path.glob("*.log"))
        return found + sorted(path.glob("*.checkpoint")) if with_snapshots else found
    return [path]


def is_metadata_path(path: Path) -> bool:
    """A path inside the metadata partition's directory, or a snapshot file."""
    d = path if path.is_dir() else path.parent
    return d.name == "__cluster_metadata-0" or path.suffix == ".checkpoint"


def _decoded(value: bytes | None) -> dict[str, Any]:
    from epochlog.controller.records import to_json
    from epochlog.storage.metadata_raft_log import decode_record

    if value is None:
        return {"error": "null value"}
    try:
        kind, data = to_json(decode_record(value))
    except (ValueError, KeyError, TypeError) as e:
        return {"error": f"undecodable record: {e}"}
    if kind == "ScramCredentialSet":
        # What a SCRAM server checks proofs against is not for printing (Kafka's RecordRedactor agrees).
        data.update({k: "(redacted)" for k in ("salt", "stored_key", "server_key")})
    return {"kind": kind, "data": data}


def _dump_snapshot(path: Path) -> Iterator[dict[str, Any]]:
    data = path.read_bytes()
    yield {"snapshot": str(path), "size": len(data)}
    for n, line in enumerate(data.splitlines()):
        if line.strip():
            yield {"snapshot_record": n, **_decoded(line)}


def dump(path: Path, decode_metadata: bool = False) -> Iterator[dict[str, Any]]:
    for seg in _segment_files(path, decode_metadata):
        if seg.suffix == ".checkpoint":
            yield from _dump_snapshot(seg)
            continue
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
            if decode_metadata and compute_crc(data, pos, h) == h.crc:
                for r in iter_records(data[pos : pos + h.size]):
                    yield {"offset": r.offset, **_decoded(r.value)}
            pos += h.size


def format_dump(entries: Iterable[dict[str, Any]]) -> Iterator[str]:
    for e in entries:
        if "segment" in e:
            yield f"Dumping {e['segment']} ({e['size']} bytes)"
        elif "snapshot" in e:
            yield f"Dumping snapshot {e['snapshot']} ({e['size']} bytes)"
        elif "kind" in e or ("error" in e and "position" not in e):
            where = f"offset: {e['offset']}" if "offset" in e else f"snapshot record: {e['snapshot_record']}"
            body = f"{e['kind']} {json.dumps(e['data'], sort_keys=True)}" if "kind" in e else f"ERROR {e['error']}"
            yield f" | {where} {body}"
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
