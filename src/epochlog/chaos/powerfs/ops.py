"""The FUSE operations: a passthrough to the backing directory whose file data stays in memory (pages.py)
until fsync, whose names go through at once, and which can drop the unsynced data or fail writes on command.

Unsynced state is kept per backing inode, not per path, so it follows a file through a rename and is
shared by every handle open on it. Operations that take a handle use only the handle (the mount sets
nullpath_ok and hard_remove), so a file that is unlinked while open keeps working, as on a real disk.
One lock serialises the operations: libfuse calls them from several threads, and the chaos workloads
write at a few hundred records a second, well within one lock.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from typing import Any

from epochlog.chaos.powerfs.pages import Unsynced

FAILURES = {"eio": errno.EIO, "enospc": errno.ENOSPC}
_STAT_KEYS = ("st_mode", "st_ino", "st_nlink", "st_uid", "st_gid", "st_size", "st_blocks", "st_rdev")


def _oserror(code: int) -> OSError:
    return OSError(code, os.strerror(code))


class PowerOps:
    """The operations object mfusepy calls (it looks methods up by name; times are in nanoseconds)."""

    use_ns = True
    flag_nopath = True
    flag_nullpath_ok = True

    def __init__(self, backing: str) -> None:
        self.root = os.path.realpath(backing)
        self._mutex = threading.RLock()
        self.files: dict[int, Unsynced] = {}  # backing inode -> what it holds beyond the backing file
        self.handles: dict[int, int] = {}  # fh (the backing fd) -> backing inode
        self.failing: int | None = None  # errno every write and fsync fails with, until heal
        self.dropped_files = 0
        self.dropped_bytes = 0

    # -- commands (control.py) ---------------------------------------------------------------------------
    def powerloss(self) -> dict[str, int]:
        with self._mutex:
            files = sum(1 for u in self.files.values() if u.pages or u.floor < (1 << 62))
            size = sum(u.dirty_bytes for u in self.files.values())
            self.files.clear()
            self.dropped_files += files
            self.dropped_bytes += size
            return {"files": files, "dirty_bytes": size}

    def fail(self, kind: str) -> None:
        if kind not in FAILURES:
            raise ValueError(f"fail expects one of {', '.join(FAILURES)}, got {kind!r}")
        with self._mutex:
            self.failing = FAILURES[kind]

    def heal(self) -> None:
        with self._mutex:
            self.failing = None

    def status(self) -> dict[str, Any]:
        with self._mutex:
            return {
                "unsynced_files": len(self.files),
                "dirty_bytes": sum(u.dirty_bytes for u in self.files.values()),
                "open_handles": len(self.handles),
                "failing": next((k for k, v in FAILURES.items() if v == self.failing), None),
                "dropped_files": self.dropped_files,
                "dropped_bytes": self.dropped_bytes,
            }

    # -- helpers -----------------------------------------------------------------------------------------
    def _path(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def _check_failing(self) -> None:
        if self.failing is not None:
            raise _oserror(self.failing)

    def _state(self, fd: int, ino: int) -> Unsynced:
        u = self.files.get(ino)
        if u is None:
            u = self.files[ino] = Unsynced(os.fstat(fd).st_size)
        return u

    def _forget_if_gone(self, ino: int | None) -> None:
        """A removed inode nobody holds open has nothing left to sync (and its number may be reused)."""
        if ino is not None and ino not in self.handles.values():
            self.files.pop(ino, None)

    def _ino_of(self, path: str) -> int | None:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return None
        return st.st_ino if stat.S_ISREG(st.st_mode) and st.st_nlink <= 1 else None

    # -- attributes and directories ----------------------------------------------------------------------
    def getattr(self, path: str | None, fh: int | None = None) -> dict[str, Any]:
        with self._mutex:
            if fh is not None:
                st = os.fstat(fh)
            else:
                assert path is not None
                st = os.lstat(self._path(path))
            attrs: dict[str, Any] = {k: getattr(st, k) for k in _STAT_KEYS}
            attrs.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
            u = self.files.get(st.st_ino) if stat.S_ISREG(st.st_mode) else None
            if u is not None:
                attrs["st_size"] = u.size
                attrs["st_blocks"] = (u.size + 511) // 512
            return attrs

    def opendir(self, path: str) -> int:
        return os.open(self._path(path), os.O_RDONLY | os.O_DIRECTORY)

    def readdir(self, path: str | None, fh: int) -> list[str]:
        return [".", "..", *os.listdir(fh)]

    def releasedir(self, path: str | None, fh: int) -> int:
        os.close(fh)
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        sv = os.statvfs(self.root)
        keys = ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree", "f_favail")
        return {k: getattr(sv, k) for k in (*keys, "f_flag", "f_namemax")}

    def access(self, path: str, amode: int) -> int:
        if not os.access(self._path(path), amode):
            raise _oserror(errno.EACCES)
        return 0

    def mkdir(self, path: str, mode: int) -> int:
        with self._mutex:
            self._check_failing()
            os.mkdir(self._path(path), mode)
        return 0

    def rmdir(self, path: str) -> int:
        os.rmdir(self._path(path))
        return 0

    def fsyncdir(self, path: str | None, datasync: int, fh: int) -> int:
        with self._mutex:
            self._check_failing()
        os.fsync(fh)  # names went to the backing directory when made: this makes them durable there
        return 0

    # -- names: straight to the backing directory --------------------------------------------------------
    def unlink(self, path: str) -> int:
        with self._mutex:
            full = self._path(path)
            ino = self._ino_of(full)
            os.unlink(full)
            self._forget_if_gone(ino)
        return 0

    def rename(self, old: str, new: str) -> int:
        with self._mutex:
            self._check_failing()
            target = self._path(new)
            replaced = self._ino_of(target)
            os.rename(self._path(old), target)
            self._forget_if_gone(replaced)
        return 0

    def link(self, target: str, source: str) -> int:
        with self._mutex:
            self._check_failing()
            os.link(self._path(source), self._path(target))
        return 0

    def symlink(self, target: str, source: str) -> int:
        os.symlink(source, self._path(target))
        return 0

    def readlink(self, path: str) -> str:
        return os.readlink(self._path(path))

    # With a file handle, libfuse passes no path (nullpath_ok) and mfusepy passes no handle: nothing names
    # the file, and epochlog never changes modes, owners or times of an open file, so these do nothing then.
    def chmod(self, path: str | None, mode: int) -> int:
        if path is None:
            return 0
        os.chmod(self._path(path), mode)
        return 0

    def chown(self, path: str | None, uid: int, gid: int) -> int:
        if path is None:
            return 0
        os.chown(self._path(path), uid, gid)
        return 0

    def utimens(self, path: str | None, times: tuple[int, int] | None = None) -> int:
        if path is None:
            return 0
        if times is None:
            os.utime(self._path(path))
        else:
            os.utime(self._path(path), ns=times)
        return 0

    # -- file data: kept in memory until fsync -----------------------------------------------------------
    def _opened(self, fd: int) -> int:
        self.handles[fd] = os.fstat(fd).st_ino
        return fd

    def open(self, path: str, flags: int) -> int:
        # O_RDWR whatever the caller asked: a page written through one handle is read from the backing
        # file through another, and O_TRUNC/O_APPEND are the kernel's and ours to apply, not the backing's.
        with self._mutex:
            fd = os.open(self._path(path), os.O_RDWR if os.access(self._path(path), os.W_OK) else os.O_RDONLY)
            fh = self._opened(fd)
            if flags & os.O_TRUNC:
                self._check_failing()
                self._state(fd, self.handles[fh]).truncate(0)
            return fh

    def create(self, path: str, mode: int, flags: int = 0) -> int:
        with self._mutex:
            self._check_failing()
            full = self._path(path)
            fd = os.open(full, os.O_RDWR | os.O_CREAT, mode)
            fh = self._opened(fd)
            if flags & os.O_TRUNC:
                self._state(fd, self.handles[fh]).truncate(0)
            return fh

    def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
        with self._mutex:
            u = self.files.get(self.handles[fh])
            if u is None:
                return os.pread(fh, size, offset)
            return u.read(fh, size, offset)

    def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
        with self._mutex:
            self._check_failing()
            return self._state(fh, self.handles[fh]).write(fh, data, offset)

    def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
        with self._mutex:
            self._check_failing()
            if fh is not None:
                self._state(fh, self.handles[fh]).truncate(length)
                return 0
            assert path is not None
            fd = os.open(self._path(path), os.O_RDWR)
            try:
                self._state(fd, os.fstat(fd).st_ino).truncate(length)
            finally:
                os.close(fd)
            return 0

    def fsync(self, path: str | None, datasync: int, fh: int) -> int:
        with self._mutex:
            self._check_failing()
            u = self.files.pop(self.handles[fh], None)
            if u is not None:
                try:
                    u.flush(fh)
                except OSError:
                    self.files[self.handles[fh]] = u
                    raise
            else:
                os.fsync(fh)
        return 0

    def flush(self, path: str | None, fh: int) -> int:
        return 0  # close() makes nothing durable

    def release(self, path: str | None, fh: int) -> int:
        with self._mutex:
            ino = self.handles.pop(fh, None)
            try:
                gone = os.fstat(fh).st_nlink == 0
            finally:
                os.close(fh)
            if gone:
                self._forget_if_gone(ino)
        return 0
