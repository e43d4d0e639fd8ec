"""Start and stop real `epochlog up` processes on free 127.0.0.1 ports for tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from epochlog.server.cluster.local import free_base_port, wait_for_port
from tests.trace_harness import TRACE_ON, register


def free_port() -> int:
    """A free port outside the kernel's ephemeral range (see free_base_port)."""
    return free_base_port(1)


class BrokerProcess:
    """One `epochlog up` process; kill -9, clean stop and restart on the same data dir and port."""

    def __init__(self, data_dir: Path, port: int | None = None, settings: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        # Traced: the state transitions are judged at the end of the test (tests/trace_harness.py).
        self.settings = {"group.initial.rebalance.delay.ms": "0", **TRACE_ON, **(settings or {})}
        self.proc: subprocess.Popen | None = None
        self.log_path = data_dir.parent / f"{data_dir.name}-broker.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> BrokerProcess:
        args = [
            sys.executable,
            "-m",
            "epochlog.cli.main",
            "up",
            "--port",
            str(self.port),
            "--data-dir",
            str(self.data_dir),
        ]
        for k, v in self.settings.items():
            args += ["--set", f"{k}={v}"]
        register(self.data_dir)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env={**os.environ})
        log.close()
        wait_for_port(self.port, proc=self.proc)
        return self

    def kill9(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, timeout: float = 20.0) -> int | None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode if self.proc else None

    def restart(self, hard: bool = False) -> None:
        self.kill9() if hard else self.stop()
        self.start()

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""
