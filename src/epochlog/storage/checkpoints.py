"""Kafka's text checkpoint files, written atomically (temp file, fsync, rename, fsync dir).

Offset checkpoints:        "0\n<count>\n<topic> <partition> <offset>\n..."
Leader-epoch checkpoint:   "0\n<count>\n<epoch> <startOffset>\n..."
"""

from __future__ import annotations

import logging
from pathlib import Path

from epochlog.storage import fileops

log = logging.getLogger("epochlog.storage")

VERSION = 0


def write_atomically(path: Path, content: str | bytes, sync_dir: bool = True) -> None:
    """Replace ``path`` so a crash leaves either the old or the new content, never a mix."""
    tmp = path.with_name(path.name + ".tmp")
    data = content.encode() if isinstance(content, str) else content
    fileops.ops().write_file(tmp, data, sync=True)
    fileops.ops().rename(tmp, path)
    if sync_dir:
        fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    fileops.ops().fsync_dir(path)


class CheckpointError(ValueError):
    pass


def _parse(path: Path, fields: int) -> list[list[str]]:
    lines = path.read_text().splitlines()
    if len(lines) < 2:
        raise CheckpointError(f"{path}: missing version or count line")
    if lines[0].strip() != str(VERSION):
        raise CheckpointError(f"{path}: unknown version {lines[0].strip()!r}")
    try:
        count = int(lines[1])
    except ValueError:
        raise CheckpointError(f"{path}: count {lines[1]!r} is not a number") from None
    rows = [ln.split() for ln in lines[2:] if ln.strip()]
    if len(rows) != count:
        raise CheckpointError(f"{path}: expected {count} entries, found {len(rows)}")
    for r in rows:
        if len(r) != fields:
            raise CheckpointError(f"{path}: malformed entry {' '.join(r)!r}")
    return rows


def read_offsets(path: Path) -> dict[tuple[str, int], int]:
    """A missing file is empty; a corrupt one is logged and treated as empty (safe: full recovery)."""
    if not path.exists():
        return {}
    try:
        return {(t, int(p)): int(o) for t, p, o in _parse(path, 3)}
    except (CheckpointError, ValueError, OSError) as e:
        log.error("ignoring corrupt checkpoint %s: %s", path, e)
        return {}


def write_offsets(path: Path, offsets: dict[tuple[str, int], int]) -> None:
    body = "".join(f"{t} {p} {o}\n" for (t, p), o in sorted(offsets.items()))
    write_atomically(path, f"{VERSION}\n{len(offsets)}\n{body}")


def read_epochs(path: Path) -> list[tuple[int, int]]:
    if not path.exists():
        return []
    return [(int(e), int(o)) for e, o in _parse(path, 2)]


def write_epochs(path: Path, entries: list[tuple[int, int]], sync_dir: bool = True) -> None:
    body = "".join(f"{e} {o}\n" for e, o in entries)
    write_atomically(path, f"{VERSION}\n{len(entries)}\n{body}", sync_dir=sync_dir)
