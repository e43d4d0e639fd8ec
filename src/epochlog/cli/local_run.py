"""Runs a LocalCluster in the foreground for `epochlog cluster up` and `epochlog up --cores N`: every process
started, a line saying where to connect, and all of them stopped on Ctrl-C or SIGTERM."""

from __future__ import annotations

import signal
import time
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from epochlog.server.cluster.local import LocalCluster


def run_until_signal(lc: LocalCluster, command: str, banner: str) -> None:
    """Start ``lc``, print ``banner`` with where to connect, and stop every process on SIGTERM or Ctrl-C;
    a process that exits on its own is reported, not restarted (its log says why)."""
    stop = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    reported: set[str] = set()
    try:
        lc.start()
        typer.echo(
            f"{banner}: bootstrap.servers={lc.bootstrap} controllers={lc.bootstrap_controllers} "
            f"data={lc.data_dir} logs={lc.data_dir / 'logs'}",
            err=True,
        )
        while not stop:
            time.sleep(0.2)
            dead = [n.name for n in lc.nodes.values() if not n.alive and n.name not in reported]
            if dead:
                reported.update(dead)
                typer.echo(f"{command}: {', '.join(dead)} exited; see {lc.data_dir / 'logs'}", err=True)
    except (RuntimeError, TimeoutError) as e:
        typer.echo(f"{command}: {e}; see {lc.data_dir / 'logs'}", err=True)
        raise typer.Exit(1) from None
    finally:
        lc.stop()
        typer.echo(f"{command} stopped", err=True)
