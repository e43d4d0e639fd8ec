"""The power-loss file system (chaos/powerfs) mounted for real through FUSE: what a power loss drops and what it
keeps, that reads see unsynced data, that mmap works, that a failing disk answers ENOSPC/EIO until healed.

Skipped, with the reason, where this machine cannot mount FUSE (no /dev/fuse, no fusermount3 as a normal user,
or the binding missing: scripts/setup installs fuse3 and mfusepy)."""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from epochlog.chaos.powerfs.mount import PowerFS, unavailable_reason

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

_why = unavailable_reason()
needs_fuse = pytest.mark.skipif(_why is not None, reason=f"FUSE cannot be mounted here: {_why}")


@pytest.fixture
def fs(tmp_path: Path) -> Iterator[PowerFS]:
    f = PowerFS(tmp_path / "backing", tmp_path / "mnt", tmp_path / "control.sock", tmp_path / "fs.log").start()
    try:
        yield f
    finally:
        f.stop()
        assert not f.mounted


def _write(path: Path, data: bytes, sync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, data, os.fstat(fd).st_size)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def unsynced_writes_are_dropped(root: Path, power_off: Callable[[], object]) -> list[str]:
    """The power-loss property on any directory; what broke it (empty: it held)."""
    (root / "d").mkdir()
    synced, unsynced, renamed = root / "d" / "synced", root / "d" / "unsynced", root / "d" / "renamed"
    _write(synced, b"durable", sync=True)
    _write(synced, b"+lost", sync=False)
    _write(unsynced, b"lost", sync=False)
    _write(renamed, b"kept", sync=True)
    os.rename(renamed, root / "d" / "moved")
    _write(root / "d" / "moved", b"+lost", sync=False)
    power_off()
    broken = []
    if synced.read_bytes() != b"durable":
        broken.append(f"synced file holds {synced.read_bytes()!r}")
    if not unsynced.exists():
        broken.append("a created file's name was lost (names are durable at once)")
    elif unsynced.read_bytes() != b"":
        broken.append(f"unsynced data survived: {unsynced.read_bytes()!r}")
    if (root / "d" / "moved").read_bytes() != b"kept":
        broken.append(f"renamed file holds {(root / 'd' / 'moved').read_bytes()!r}")
    return broken


@needs_fuse
def test_a_power_loss_drops_exactly_the_unsynced_writes(fs: PowerFS) -> None:
    assert unsynced_writes_are_dropped(fs.mountpoint, fs.powerloss) == []
    assert fs.status()["dropped_files"] >= 3


@needs_fuse
def test_the_check_fails_on_a_disk_that_keeps_everything(tmp_path: Path) -> None:
    """Break on purpose: a plain directory (no power loss possible) keeps unsynced data, and the check says so."""
    broken = unsynced_writes_are_dropped(tmp_path, lambda: None)
    assert any("unsynced data survived" in b for b in broken), broken


@needs_fuse
def test_reads_sizes_and_truncates_see_the_unsynced_data(fs: PowerFS) -> None:
    path = fs.mountpoint / "f"
    path.write_bytes(b"a" * 10_000)
    assert path.stat().st_size == 10_000 and path.read_bytes() == b"a" * 10_000
    assert (fs.backing / "f").stat().st_size == 0  # nothing reached the backing file
    with open(path, "r+b") as f:
        f.truncate(3)
        f.seek(5000)
        f.write(b"b")
    assert path.stat().st_size == 5001
    assert path.read_bytes() == b"aaa" + bytes(4997) + b"b"
    assert sorted(os.listdir(fs.mountpoint)) == ["f"]
    fs.powerloss()
    assert path.stat().st_size == 0


@needs_fuse
def test_mmap_reads_through_the_file_system(fs: PowerFS) -> None:
    path = fs.mountpoint / "index"
    data = bytes(range(256)) * 64
    path.write_bytes(data)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as mm:
        assert mm[:] == data
    with open(path, "r+b") as f, mmap.mmap(f.fileno(), 0) as mm:  # a shared writable map too
        mm[0:4] = b"EPOC"
        mm.flush()
        os.fsync(f.fileno())
    fs.powerloss()
    assert path.read_bytes() == b"EPOC" + data[4:]


@needs_fuse
@pytest.mark.parametrize("kind,code", [("enospc", errno.ENOSPC), ("eio", errno.EIO)])
def test_a_failing_disk_answers_its_errno_until_healed(fs: PowerFS, kind: str, code: int) -> None:
    path = fs.mountpoint / "f"
    _write(path, b"before", sync=True)
    fs.fail(kind)
    assert fs.status()["failing"] == kind
    for attempt in (
        lambda: _write(path, b"x", sync=False),
        lambda: os.truncate(path, 0),
        lambda: (fs.mountpoint / "new").write_bytes(b"x"),
        lambda: (fs.mountpoint / "dir").mkdir(),
    ):
        with pytest.raises(OSError) as e:
            attempt()
        assert e.value.errno == code
    assert path.read_bytes() == b"before"  # reads still work
    fs.heal()
    _write(path, b"+after", sync=True)
    assert path.read_bytes() == b"before+after"


@needs_fuse
def test_fsync_fails_while_failing_and_keeps_the_data_unsynced(fs: PowerFS) -> None:
    path = fs.mountpoint / "f"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"pending")
        fs.fail("eio")
        with pytest.raises(OSError) as e:
            os.fsync(fd)
        assert e.value.errno == errno.EIO
        fs.heal()
    finally:
        os.close(fd)
    fs.powerloss()
    assert path.read_bytes() == b""


@needs_fuse
def test_bad_commands_get_a_clear_error(fs: PowerFS) -> None:
    with pytest.raises(RuntimeError, match="fail expects one of eio, enospc"):
        fs.fail("ebadf")
    with pytest.raises(RuntimeError, match="unknown command"):
        fs.command("reboot")


@needs_fuse
def test_unmount_while_busy_still_ends(tmp_path: Path) -> None:
    f = PowerFS(tmp_path / "b", tmp_path / "m", tmp_path / "c.sock", tmp_path / "fs.log").start()
    fd = os.open(f.mountpoint / "held", os.O_RDWR | os.O_CREAT, 0o644)
    cwd = os.open(f.mountpoint, os.O_RDONLY)
    try:
        f.stop()
        assert not f.mounted and f.proc is not None and f.proc.poll() is not None
    finally:
        for held in (fd, cwd):
            with contextlib.suppress(OSError):  # ENOTCONN: the server it belonged to is gone
                os.close(held)
