"""`epochlog chaos`: a local cluster under workloads while a nemesis injects faults; a verdict on the history."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer


def _split(values: list[str]) -> list[str]:
    """--x a,b --x c -> [a, b, c]: several at once either way."""
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def _settings(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"--set expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def _span(text: str, option: str) -> tuple[float, float]:
    """'3-8' -> (3.0, 8.0): seconds, low to high."""
    low, sep, high = text.partition("-")
    try:
        span = (float(low), float(high if sep else low))
    except ValueError:
        raise typer.BadParameter(f"{option} expects seconds as LOW-HIGH (e.g. 3-8), got {text!r}") from None
    if not 0 < span[0] <= span[1] <= 3600:
        raise typer.BadParameter(f"{option} expects 0 < LOW <= HIGH <= 3600 seconds, got {text!r}")
    return span


def register(app: typer.Typer) -> None:
    @app.command()
    def chaos(
        duration: Annotated[float, typer.Option("--duration", min=5.0, max=86400.0, help="seconds of faults")] = 60.0,
        workload: Annotated[
            list[str], typer.Option("--workload", help="queue, txn, groups (groups implies queue); several at once")
        ] = ["queue"],  # noqa: B006
        nemesis: Annotated[
            list[str],
            typer.Option(
                "--nemesis",
                help="kill, pause, partition, kip101, powerloss, disk (these two need FUSE), controller, leader",
            ),
        ] = ["kill,pause,partition,kip101,controller,leader"],  # noqa: B006
        seed: Annotated[int | None, typer.Option("--seed", help="the nemesis's random seed (default: random)")] = None,
        set_: Annotated[list[str], typer.Option("--set", help="broker property: key=value")] = [],  # noqa: B006
        controllers: Annotated[int, typer.Option("--controllers", min=1, max=5)] = 3,
        brokers: Annotated[int, typer.Option("--brokers", min=3, max=9)] = 3,
        partitions: Annotated[int, typer.Option("--partitions", min=1, max=64)] = 4,
        rate: Annotated[float, typer.Option("--rate", min=1.0, max=5000.0, help="sends/s per producer")] = 50.0,
        fault_interval: Annotated[
            str, typer.Option("--fault-interval", help="seconds between faults, LOW-HIGH, chosen at random")
        ] = "2-5",
        fault_duration: Annotated[
            str, typer.Option("--fault-duration", help="seconds each fault lasts, LOW-HIGH, chosen at random")
        ] = "2-7",
        delivery_timeout: Annotated[
            float,
            typer.Option(
                "--delivery-timeout",
                min=5.0,
                max=600.0,
                help="seconds before a queue producer reports a send failed (message.timeout.ms; Kafka's "
                "default 120). Shorter ones measure availability, but a send timed out in flight makes "
                "librdkafka resend what it holds under a new producer epoch: duplicates the broker cannot see",
            ),
        ] = 120.0,
        unsafe: Annotated[
            list[str],
            typer.Option("--unsafe", help="high-watermark-truncation: the pre-KIP-101 rule, to see the run fail"),
        ] = [],  # noqa: B006
        json_out: Annotated[Path | None, typer.Option("--json", help="write the result as JSON here")] = None,
        report: Annotated[Path | None, typer.Option("--report", help="write an HTML report here")] = None,
        data_dir: Annotated[Path | None, typer.Option("--data-dir", help="new or empty directory")] = None,
        partition_backend: Annotated[
            str,
            typer.Option(
                "--partition-backend",
                help="auto (netns when root and namespaces work, else proxy), netns (each node in a network "
                "namespace, cuts by iptables) or proxy (TCP proxies between nodes)",
            ),
        ] = "auto",
        keep_data: Annotated[
            bool, typer.Option("--keep-data", help="keep the data (always kept on anomalies)")
        ] = False,
    ) -> None:
        """Start a local cluster, run workloads against it while a nemesis injects faults, heal, check the
        history. Exits 1 on any anomaly (or when the history could not be checked), 2 when the run failed."""
        from rich.console import Console

        from epochlog.chaos.nemesis import ALL
        from epochlog.chaos.report import summary_lines, write_report
        from epochlog.chaos.run import ChaosError, ChaosOptions, run_chaos

        console = Console(width=None if sys.stdout.isatty() else 160)
        from epochlog.chaos.netns import BACKENDS

        if partition_backend not in BACKENDS:
            raise typer.BadParameter(f"--partition-backend {partition_backend!r}: choose from {', '.join(BACKENDS)}")
        nemeses = _split(nemesis)
        bad = [n for n in nemeses if n not in ALL]
        if bad:
            raise typer.BadParameter(f"unknown nemesis {', '.join(bad)}: choose from {', '.join(ALL)}")
        opts = ChaosOptions(
            duration=duration,
            workloads=_split(workload),
            nemeses=nemeses,
            seed=seed,
            settings=_settings(set_),
            controllers=controllers,
            brokers=brokers,
            partitions=partitions,
            rate=rate,
            fault_interval=_span(fault_interval, "--fault-interval"),
            fault_duration=_span(fault_duration, "--fault-duration"),
            delivery_timeout=delivery_timeout,
            unsafe=_split(unsafe),
            data_dir=data_dir,
            keep_data=keep_data,
            partition_backend=partition_backend,
        )
        interrupted = [False]

        def on_signal(signum: int, frame: object) -> None:
            if not interrupted[0]:  # the first unwinds into run_chaos's clean-up; later ones must not cut it short
                interrupted[0] = True
                raise KeyboardInterrupt

        old_term, old_int = signal.signal(signal.SIGTERM, on_signal), signal.signal(signal.SIGINT, on_signal)
        try:
            res = run_chaos(opts, lambda text: console.print(text, highlight=False, soft_wrap=True))
        except ChaosError as e:
            console.print(f"[bold red]epochlog chaos: {e}[/]")
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            console.print("[bold red]epochlog chaos: interrupted; everything it started was stopped[/]")
            raise typer.Exit(130) from None
        finally:
            signal.signal(signal.SIGTERM, old_term)
            signal.signal(signal.SIGINT, old_int)
        if json_out is not None:
            json_out.write_text(json.dumps(res.as_json(), indent=2) + "\n")
        if report is not None:
            write_report(res, report)
        for line in summary_lines(res):
            bad_line = line.startswith(("PROBLEM", "ANOMALY")) or line == "verdict: INVALID"
            console.print("  " + line, style="bold red" if bad_line else None, highlight=False, soft_wrap=True)
        if json_out is not None:
            console.print(f"  json: {json_out}", highlight=False, soft_wrap=True)
        if report is not None:
            console.print(f"  report: {report}", highlight=False, soft_wrap=True)
        if res.data_kept:
            console.print(f"  data directory: {res.data_dir} (kept)", highlight=False, soft_wrap=True)
        if not res.ok:
            raise typer.Exit(1)
