"""Putting cleaned segments in place, crash-safely, with Kafka's file steps (LocalLog.replaceSegments and
LogLoader's recovery of them).

The cleaner writes a segment's replacement as ``<base>.log.cleaned`` (+ ``.index.cleaned``,
``.timeindex.cleaned``) and makes it durable. The swap then:

1. renames the index files, then the log file, from ``.cleaned`` to ``.swap`` and syncs the directory.
   The ``<base>.log.swap`` rename is the commit point: before it the old segments are the log (a
   restart deletes ``.cleaned`` files); after it the cleaned segment is (a restart completes the swap);
2. renames each replaced segment's files to ``.deleted`` and syncs the directory;
3. renames the ``.swap`` files to their final names and syncs the directory;
4. deletes the ``.deleted`` files.

Recovery at open (``recover_swaps``), for each ``<base>.log.swap``: the segments it replaces are those
whose base offset lies in [base, the swap's next offset) (Kafka's rule); their files are deleted, the
swap's index files too (rebuilt from the data, so a stale index can never be paired with new data),
and the ``.swap`` renamed in place. ``.cleaned`` files, and index ``.swap`` files whose log is not yet
``.swap``, belong to a swap that never committed and are deleted. A kill -9 at any step therefore
leaves either the old segments or the cleaned one, never both and never neither.
"""

from __future__ import annotations

import logging
import mmap
import os
from pathlib import Path

from epochlog.protocol.record_batch import CorruptBatchError, read_header
from epochlog.storage import fileops

log = logging.getLogger("epochlog.storage")

CLEANED = ".cleaned"
SWAP = ".swap"
DELETED = ".deleted"
SEGMENT_SUFFIXES = (".index", ".timeindex", ".txnindex", ".log")  # the log last: its rename is the step that counts


def _base_of(name: str) -> int | None:
    head = name.split(".", 1)[0]
    return int(head) if head.isdigit() and len(head) == 20 else None


def _next_offset(path: Path) -> int | None:
    """The offset after the last whole batch of a segment file (None when it holds no batch)."""
    size = path.stat().st_size
    if size == 0:
        return None
    nxt = None
    fd = os.open(path, os.O_RDONLY)
    try:
        with mmap.mmap(fd, size, prot=mmap.PROT_READ) as mm:
            view = memoryview(mm)
            try:
                pos = 0
                while pos + 61 <= size:
                    h = read_header(view, pos)
                    if pos + h.size > size:
                        break
                    nxt = h.next_offset
                    pos += h.size
            except CorruptBatchError:
                pass
            finally:
                view.release()
    finally:
        os.close(fd)
    return nxt


def recover_swaps(directory: Path) -> bool:
    """Finish or roll back swaps a crash interrupted; True when anything was changed."""
    ops = fileops.ops()
    changed = False
    for p in sorted(directory.glob(f"*{CLEANED}")):
        ops.unlink(p)
        changed = True
    swaps = sorted(directory.glob(f"*.log{SWAP}"))
    committed = {_base_of(p.name) for p in swaps}
    for p in sorted(directory.glob(f"*{SWAP}")):
        if p.name.endswith(f".log{SWAP}"):
            continue
        if _base_of(p.name) not in committed:  # its log never reached .swap: the swap did not happen
            ops.unlink(p)
            changed = True
    for swap in swaps:
        base = _base_of(swap.name)
        if base is None:
            continue
        nxt = _next_offset(swap)
        end = nxt if nxt is not None else base + 1
        replaced = []
        for seg_log in directory.glob("*.log"):
            b = _base_of(seg_log.name)
            if b is not None and base <= b < end:
                replaced.append(b)
        for b in sorted(replaced):
            for suffix in SEGMENT_SUFFIXES:
                ops.unlink(directory / f"{b:020d}{suffix}")
        for suffix in (".index", ".timeindex"):  # rebuilt from the data when the segment opens
            ops.unlink(directory / f"{base:020d}{suffix}{SWAP}")
            ops.unlink(directory / f"{base:020d}{suffix}")
        # The aborted-transaction index cannot be rebuilt from this segment alone: the cleaned one, written
        # before the commit point, takes the place of the replaced segments' (deleted just above).
        txn_swap = directory / f"{base:020d}.txnindex{SWAP}"
        if txn_swap.exists():
            ops.rename(txn_swap, directory / f"{base:020d}.txnindex")
        ops.rename(swap, directory / f"{base:020d}.log")
        log.warning(
            "%s: completed the interrupted swap of cleaned segment %d (replacing segments %s)",
            directory.name,
            base,
            sorted(replaced),
        )
        changed = True
    if changed:
        ops.fsync_dir(directory)
    return changed


def _rename_segment(directory: Path, base: int, from_tail: str, to_tail: str) -> None:
    """Rename the segment's files ``<base><suffix><from_tail>`` to ``...<to_tail>``, the log last (it must
    exist; an index may not), then sync the directory."""
    ops = fileops.ops()
    for suffix in SEGMENT_SUFFIXES:
        src = directory / f"{base:020d}{suffix}{from_tail}"
        if src.exists() or suffix == ".log":
            ops.rename(src, directory / f"{base:020d}{suffix}{to_tail}")
    ops.fsync_dir(directory)


def commit_cleaned(directory: Path, base: int) -> None:
    """Step 1: the cleaned segment's files become ``.swap``, the log last, and the directory is synced."""
    _rename_segment(directory, base, CLEANED, SWAP)


def retire(directory: Path, bases: list[int]) -> list[Path]:
    """Step 2: the replaced segments' files become ``.deleted``; returns them for step 4. The directory
    is synced before step 3: otherwise a power loss could keep step 3's renames and lose these, leaving
    the cleaned segment and the ones it replaced side by side, with no ``.swap`` left to tell."""
    ops = fileops.ops()
    out = []
    for b in bases:
        for suffix in SEGMENT_SUFFIXES:
            src = directory / f"{b:020d}{suffix}"
            if src.exists():
                dst = directory / f"{b:020d}{suffix}{DELETED}"
                ops.rename(src, dst)
                out.append(dst)
    ops.fsync_dir(directory)
    return out


def install(directory: Path, base: int) -> None:
    """Step 3: the ``.swap`` files take their final names, the log last; the directory is synced."""
    _rename_segment(directory, base, SWAP, "")


def delete_retired(paths: list[Path]) -> None:
    """Step 4."""
    ops = fileops.ops()
    for p in paths:
        ops.unlink(p)
