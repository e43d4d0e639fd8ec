"""The file system as a process of its own: can this machine mount it, start it over a directory, command it,
unmount it (lazily when busy) and stop the process by its pid.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from epochlog.chaos.powerfs.control import command

MOUNT_TIMEOUT_S = 15.0


def serve(backing: str, mountpoint: str, control: str) -> int:
    """Mount ``backing`` at ``mountpoint`` and serve (in this process) until unmounted."""
    import mfusepy  # type: ignore[import-untyped]

    from epochlog.chaos.powerfs.control import ControlServer
    from epochlog.chaos.powerfs.ops import PowerOps

    ops = PowerOps(backing)
    server = ControlServer(ops, control)
    server.start()
    try:
        # Timeouts of 0: the kernel asks for every size and name, so a dropped write is never hidden by a
        # cached attribute. No direct_io, so mmap (the index files) works through the page cache, which
        # the kernel drops when a file is opened again (after the node's restart).
        _fuse_class(mfusepy)(
            ops,
            mountpoint,
            foreground=True,
            attr_timeout=0,
            entry_timeout=0,
            negative_timeout=0,
            hard_remove=True,
            fsname="epochlog-powerfs",
        )
    finally:
        server.close()
    return 0


def _fuse_class(mfusepy: Any) -> Any:
    class FUSE(mfusepy.FUSE):  # type: ignore[misc]
        """mfusepy's, except that ftruncate gets its file handle (mfusepy's libfuse 3 truncate drops it, and
        with nullpath_ok the path is then NULL: nothing would name the file)."""

        def truncate_fuse_3(self, path: bytes | None, length: int, fip: Any) -> int:
            fh = fip.contents.fh if fip else None
            name = None if path is None else path.decode(self.encoding, self.errors)
            result: int = self.operations.truncate(name, length, fh)
            return result

    return FUSE


def _fusermount() -> str | None:
    return shutil.which("fusermount3") or shutil.which("fusermount")


def unavailable_reason() -> str | None:
    """Why a FUSE file system cannot be mounted here (None: it can); the answer is remembered."""
    return _probe()


@functools.cache
def _probe() -> str | None:
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse does not exist"
    if os.geteuid() != 0 and _fusermount() is None:
        return "not root and no fusermount3 (apt-get install fuse3)"
    if importlib.util.find_spec("mfusepy") is None:
        return "the FUSE binding mfusepy is not installed (scripts/setup installs it and fuse3)"
    with tempfile.TemporaryDirectory(prefix="epochlog-powerfs-probe-") as tmp:
        fs = PowerFS(Path(tmp) / "backing", Path(tmp) / "mnt", Path(tmp) / "control.sock", Path(tmp) / "fs.log")
        try:
            fs.start()
        except Exception as e:
            return f"a FUSE mount failed: {e}"
        finally:
            fs.stop()
    return None


class PowerFS:
    """One mounted file system over ``backing``, served by a child process started and stopped by pid."""

    def __init__(self, backing: Path, mountpoint: Path, control: Path, log: Path) -> None:
        self.backing, self.mountpoint, self.control, self.log = backing, mountpoint, control, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> PowerFS:
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.control.unlink()
        args = [sys.executable, "-m", "epochlog.chaos.powerfs", str(self.backing), str(self.mountpoint)]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [*args, str(self.control)],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, "FUSE_LIBRARY_NAME": "fuse3"},  # libfuse 3 even where 2 is installed too
            )
        deadline = time.monotonic() + MOUNT_TIMEOUT_S
        while not (os.path.ismount(self.mountpoint) and self.control.exists()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = self.log.read_text(errors="replace")[-600:] if self.log.exists() else ""
                raise RuntimeError(f"powerfs did not mount {self.mountpoint}: {tail.strip() or 'no output'}")
            time.sleep(0.05)
        return self

    @property
    def mounted(self) -> bool:
        return os.path.ismount(self.mountpoint)

    def command(self, line: str) -> dict[str, Any]:
        out = command(str(self.control), line)
        if not out.get("ok"):
            raise RuntimeError(f"powerfs {self.mountpoint}: {line}: {out.get('error')}")
        return out

    def powerloss(self) -> dict[str, Any]:
        return self.command("powerloss")

    def fail(self, kind: str) -> None:
        self.command(f"fail {kind}")

    def heal(self) -> None:
        self.command("heal")

    def status(self) -> dict[str, Any]:
        return self.command("status")

    def _unmount(self, lazy: bool) -> bool:
        tool = _fusermount()
        if tool is not None:
            args = [tool, "-u", *(["-z"] if lazy else []), str(self.mountpoint)]
        else:
            args = ["umount", *(["-l"] if lazy else []), str(self.mountpoint)]
        done = subprocess.run(args, capture_output=True, timeout=20)
        return done.returncode == 0

    def stop(self, timeout: float = 10.0) -> None:
        """Unmount (lazily if busy) and wait for the serving process; kill it by pid if it does not end."""
        try:
            if self.mounted and not self._unmount(lazy=False):
                self._unmount(lazy=True)  # a process still holds a file: detach now, end when it lets go
                timeout = min(timeout, 2.0)
        finally:
            if self.proc is not None and self.proc.poll() is None:
                try:
                    self.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(5)
                    if self.mounted:  # the kernel answers ENOTCONN until it is unmounted
                        self._unmount(lazy=True)
