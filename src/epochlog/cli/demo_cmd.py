"""`epochlog demo`: the project's main job, a leader killed under a live stream with Spark reading it."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def demo(
        data_dir: Annotated[
            Path | None,
            typer.Option("--data-dir", help="new or empty directory for the cluster and Spark (default: a temp dir)"),
        ] = None,
        duration: Annotated[
            float, typer.Option("--duration", min=10.0, max=3600.0, help="seconds of producing")
        ] = 60.0,
        report: Annotated[Path, typer.Option("--report", help="where the HTML report goes")] = Path(
            "epochlog-demo-report.html"
        ),
        keep_data: Annotated[
            bool, typer.Option("--keep-data", help="keep the data directory (always kept when a check fails)")
        ] = False,
        rate: Annotated[int, typer.Option("--rate", min=1, max=20000, help="page views per second")] = 1000,
    ) -> None:
        """Start a 3-broker cluster, stream page views through Spark into Parquet, kill -9 a leader midway,
        and check that nothing acknowledged was lost or duplicated. Exits 1 when a check fails."""
        from rich.console import Console

        from epochlog.demo.model import DemoError, DemoOptions
        from epochlog.demo.report import summary_lines, write_report
        from epochlog.demo.run import run_demo

        console = Console(width=None if sys.stdout.isatty() else 160)

        interrupted = [False]

        def on_signal(signum: int, frame: object) -> None:
            # The first SIGTERM/SIGINT unwinds into run_demo's finally, which stops everything it started;
            # later ones are ignored so that the clean-up itself is not cut short.
            if not interrupted[0]:
                interrupted[0] = True
                raise KeyboardInterrupt

        old_term = signal.signal(signal.SIGTERM, on_signal)
        old_int = signal.signal(signal.SIGINT, on_signal)
        opts = DemoOptions(data_dir=data_dir, duration=duration, report=report, keep_data=keep_data, rate=rate)
        try:
            res = run_demo(opts, console)
        except DemoError as e:
            console.print(f"[bold red]epochlog demo: {e}[/]")
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            console.print("[bold red]epochlog demo: interrupted; everything it started was stopped[/]")
            raise typer.Exit(130) from None
        finally:
            signal.signal(signal.SIGTERM, old_term)
            signal.signal(signal.SIGINT, old_int)
        path = write_report(res, report)
        console.print()
        console.print("[bold]epochlog demo: what happened[/]")
        for line in summary_lines(res):
            style = "bold red" if line.startswith("PROBLEM") else None
            console.print("  " + line, style=style, highlight=False, soft_wrap=True)
        console.print(f"  report: {path}", highlight=False, soft_wrap=True)
        where = res.data_dir + " (kept)" if res.data_kept else "removed"
        console.print(f"  data directory: {where}", highlight=False, soft_wrap=True)
        if not res.ok:
            raise typer.Exit(1)
