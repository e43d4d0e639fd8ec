"""The one place storage/ touches the file system: write, pwrite, fsync, open, rename, truncate, unlink and
directory fsync go through ``FILE_OPS``.

Production uses ``FileOps`` (the os calls, nothing else). Tests swap in ``FaultyFileOps`` to make a chosen
operation on a chosen path fail with EIO or ENOSPC, which is how a failing disk is shown to take its log
directory offline without losing an acknowledged write. A test can reach a real broker process too: when
the environment variable ``EPOCHLOG_TEST_FAULTS`` is set at start-up, the faulty implementation is installed
and reads its rules from that variable, and from the file named in it, on every call, so a running test
can arm a fault after the broker is up.

``EPOCHLOG_TEST_FAULTS`` is either a rule list or ``@/path/to/file`` holding one (re-read on each call).
A rule is ``op:errno:glob`` (``write:EIO:*/t-0/*.log``); rules are separated by ``;`` or newlines. A glob
ending in ``#N`` fails only after N successful matching calls (``write:ENOSPC:*.log#3``).
"""

from __future__ import annotations

import errno as errno_mod
import fnmatch
import os
from pathlib import Path

FAULTS_ENV = "EPOCHLOG_TEST_FAULTS"

OPS = ("open", "write", "pwrite", "fsync", "rename", "truncate", "unlink", "dirfsync", "read", "mkdir")


class FileOps:
    """The real calls. Paths are strings or Paths; ``fd`` calls take the path too, for fault matching."""

    def open(self, path: str | Path, flags: int, mode: int = 0o644) -> int:
        return os.open(path, flags, mode)

    def write(self, fd: int, data: bytes | bytearray | memoryview, path: str | Path = "") -> int:
        return os.write(fd, data)

    def write_all(self, fd: int, data: bytes | bytearray | memoryview, path: str | Path = "") -> None:
        view = memoryview(data)
        written = self.write(fd, view, path)
        while written < len(view):
            written += self.write(fd, view[written:], path)

    def pwrite(self, fd: int, data: bytes | bytearray | memoryview, offset: int, path: str | Path = "") -> int:
        return os.pwrite(fd, data, offset)

    def fsync(self, fd: int, path: str | Path = "") -> None:
        os.fsync(fd)

    def fdatasync(self, fd: int, path: str | Path = "") -> None:
        os.fdatasync(fd)

    def pread(self, fd: int, size: int, offset: int, path: str | Path = "") -> bytes:
        return os.pread(fd, size, offset)

    def truncate(self, fd: int, size: int, path: str | Path = "") -> None:
        os.ftruncate(fd, size)

    def rename(self, src: str | Path, dst: str | Path) -> None:
        os.replace(src, dst)

    def unlink(self, path: str | Path, missing_ok: bool = True) -> None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            if not missing_ok:
                raise

    def mkdir(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)

    def fsync_dir(self, path: str | Path) -> None:
        """Make a directory's entries (files created, renamed or removed in it) durable."""
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def write_file(self, path: Path, data: bytes, sync: bool = True) -> None:
        fd = self.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            self.write_all(fd, data, path)
            if sync:
                self.fsync(fd, path)
        finally:
            os.close(fd)


class FaultyFileOps(FileOps):
    """Test-only: fails matching calls with an OSError of the rule's errno, before doing anything."""

    def __init__(self, rules: str = "") -> None:
        self.static = rules
        self.counts: dict[str, int] = {}

    def _rules(self) -> list[tuple[str, int, str, int]]:
        text = self.static or os.environ.get(FAULTS_ENV, "")
        if text.startswith("@"):
            try:
                text = Path(text[1:]).read_text()
            except OSError:
                text = ""
        out = []
        for raw in text.replace("\n", ";").split(";"):
            raw = raw.strip()
            if not raw:
                continue
            op, code, pattern = raw.split(":", 2)
            after = 0
            if "#" in pattern:
                pattern, n = pattern.rsplit("#", 1)
                after = int(n)
            out.append((op, getattr(errno_mod, code), pattern, after))
        return out

    def check(self, op: str, path: str | Path) -> None:
        p = str(path)
        for rule_op, code, pattern, after in self._rules():
            if rule_op == op and fnmatch.fnmatch(p, pattern):
                key = f"{rule_op}:{pattern}"
                seen = self.counts.get(key, 0)
                self.counts[key] = seen + 1
                if seen >= after:
                    raise OSError(code, f"{os.strerror(code)} (injected by {FAULTS_ENV})", p)

    def open(self, path: str | Path, flags: int, mode: int = 0o644) -> int:
        self.check("open", path)
        return super().open(path, flags, mode)

    def write(self, fd: int, data: bytes | bytearray | memoryview, path: str | Path = "") -> int:
        self.check("write", path)
        return super().write(fd, data, path)

    def pwrite(self, fd: int, data: bytes | bytearray | memoryview, offset: int, path: str | Path = "") -> int:
        self.check("pwrite", path)
        return super().pwrite(fd, data, offset, path)

    def fsync(self, fd: int, path: str | Path = "") -> None:
        self.check("fsync", path)
        super().fsync(fd, path)

    def fdatasync(self, fd: int, path: str | Path = "") -> None:
        self.check("fsync", path)
        super().fdatasync(fd, path)

    def pread(self, fd: int, size: int, offset: int, path: str | Path = "") -> bytes:
        self.check("read", path)
        return super().pread(fd, size, offset, path)

    def truncate(self, fd: int, size: int, path: str | Path = "") -> None:
        self.check("truncate", path)
        super().truncate(fd, size, path)

    def rename(self, src: str | Path, dst: str | Path) -> None:
        self.check("rename", dst)
        super().rename(src, dst)

    def unlink(self, path: str | Path, missing_ok: bool = True) -> None:
        self.check("unlink", path)
        super().unlink(path, missing_ok)

    def mkdir(self, path: Path) -> None:
        self.check("mkdir", path)
        super().mkdir(path)

    def fsync_dir(self, path: str | Path) -> None:
        self.check("dirfsync", path)
        super().fsync_dir(path)


def _initial() -> FileOps:
    return FaultyFileOps() if os.environ.get(FAULTS_ENV) else FileOps()


class _Current:
    """Holds the implementation in use; storage code calls ``FILE_OPS.ops.<call>``."""

    def __init__(self) -> None:
        self.ops: FileOps = _initial()


FILE_OPS = _Current()


def ops() -> FileOps:
    return FILE_OPS.ops


def install(impl: FileOps) -> FileOps:
    """Swap the implementation (tests); returns the previous one so the test can put it back."""
    prev = FILE_OPS.ops
    FILE_OPS.ops = impl
    return prev
