"""The command socket of a mounted file system: one line in, one JSON line out.

Commands: ``powerloss`` (drop every unsynced change), ``fail eio`` / ``fail enospc`` (every write and
fsync fails with that errno), ``heal`` (stop failing), ``status``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
from typing import Any

from epochlog.chaos.powerfs.ops import PowerOps


def answer(ops: PowerOps, line: str) -> dict[str, Any]:
    words = line.split()
    if not words:
        return {"ok": False, "error": "empty command"}
    cmd, args = words[0], words[1:]
    try:
        if cmd == "powerloss" and not args:
            return {"ok": True, **ops.powerloss()}
        if cmd == "fail" and len(args) == 1:
            ops.fail(args[0])
            return {"ok": True}
        if cmd == "heal" and not args:
            ops.heal()
            return {"ok": True}
        if cmd == "status" and not args:
            return {"ok": True, **ops.status()}
    except ValueError as e:
        return {"ok": False, "error": str(e)}
    return {"ok": False, "error": f"unknown command {line.strip()!r}: powerloss, fail eio|enospc, heal, status"}


class ControlServer:
    def __init__(self, ops: PowerOps, path: str) -> None:
        self.ops, self.path = ops, path
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(8)
        self.thread = threading.Thread(target=self._serve, name="powerfs-control", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed
            with conn:
                f = conn.makefile("rw")
                for line in f:
                    f.write(json.dumps(answer(self.ops, line)) + "\n")
                    f.flush()

    def close(self) -> None:
        self.sock.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


def command(path: str, line: str, timeout: float = 10.0) -> dict[str, Any]:
    """Send one command to the file system listening on ``path``; its answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        s.sendall(line.encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(4096)
            if not chunk:
                break
            buf += chunk
    out: dict[str, Any] = json.loads(buf)
    return out
