"""`epochlog sim`: named scenarios from the seeds and random fault schedules in the simulator."""

from __future__ import annotations

import inspect
import sys
import time
from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    register_quorum(app)

    @app.command()
    def sim(
        scenario: Annotated[str | None, typer.Option("--scenario", help="a named scenario (see --list)")] = None,
        truncation: Annotated[
            str, typer.Option("--truncation", help="leader-epoch or high-watermark")
        ] = "leader-epoch",
        list_: Annotated[bool, typer.Option("--list", help="list the named scenarios")] = False,
        seeds: Annotated[int, typer.Option("--seeds", help="run N random fault schedules")] = 0,
        start_seed: Annotated[int, typer.Option("--start-seed")] = 0,
        seed: Annotated[int | None, typer.Option("--seed", help="replay one random schedule")] = None,
        report_dir: Annotated[Path, typer.Option("--report-dir", help="where HTML reports go")] = Path("sim-reports"),
        quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
        transactions: Annotated[
            bool, typer.Option("--transactions", help="random schedules write transactions and markers")
        ] = False,
        open_: Annotated[
            bool,
            typer.Option(
                "--open",
                help="serve the report from the console's app on 127.0.0.1 and print its URL (no browser is started)",
            ),
        ] = False,
        port: Annotated[int, typer.Option("--port", help="HTTP port for --open (0: any free port)")] = 8080,
    ) -> None:
        """Run the deterministic replication simulator; exit 1 when an invariant breaks."""
        from rich.console import Console
        from rich.progress import Progress

        from epochlog.replication.types import TruncationMode
        from epochlog.sim.elr_scenarios import ELR_SCENARIOS
        from epochlog.sim.report import html_report, text_report
        from epochlog.sim.scenarios import SCENARIOS, broker_names, random_schedule

        SCENARIOS = {**SCENARIOS, **ELR_SCENARIOS}  # KIP-966's, listed and run like the others

        console = Console(width=None if sys.stdout.isatty() else 160)
        if list_:
            for name, listed in SCENARIOS.items():
                doc = ((listed.__doc__ or "").strip().splitlines() or [""])[0]  # a lambda has none
                console.print(f"{name:22} {doc}")
            return
        try:
            mode = TruncationMode(truncation)
        except ValueError:
            console.print(f"[red]--truncation must be leader-epoch or high-watermark, not {truncation!r}")
            raise typer.Exit(2) from None
        if scenario is not None:
            fn = SCENARIOS.get(scenario)
            if fn is None:
                console.print(f"[red]unknown scenario {scenario!r}; see epochlog sim --list")
                raise typer.Exit(2)
            w = fn(mode)
            names = broker_names(scenario, list(w.brokers))
            if not quiet:
                console.print(text_report(w, names), highlight=False, markup=False)
            path = html_report(
                w, f"{scenario} ({mode.value})", report_dir / f"{scenario}-{mode.value}.html",
                narrative=inspect.cleandoc(fn.__doc__ or "") or None, names=names,
            )  # fmt: skip
            for v in w.checker.permitted:
                console.print(f"[yellow]permitted[/] {v.invariant} at {v.at_ms} ms: {v.detail}", markup=True)
            for v in w.violations:
                console.print(f"[red]VIOLATION[/] {v.invariant} at {v.at_ms} ms: {v.detail}")
            console.print(
                f"{scenario} ({mode.value}): {len(w.violations)} violation(s), "
                f"{len(w.checker.permitted)} permitted; report {path}"
            )
            if open_:
                _serve_report(path, port)
            raise typer.Exit(1 if w.violations else 0)
        if seed is not None:
            w = random_schedule(seed, mode, transactions)
            if not quiet:
                console.print("\n".join(w.history), highlight=False, markup=False)
            path = html_report(w, f"seed {seed} ({mode.value})", report_dir / f"seed-{seed}-{mode.value}.html")
            for v in w.violations:
                console.print(f"[red]VIOLATION[/] {v.invariant} at {v.at_ms} ms: {v.detail}")
            console.print(f"seed {seed}: {len(w.violations)} violation(s), {w.events} events; report {path}")
            if open_:
                _serve_report(path, port)
            raise typer.Exit(1 if w.violations else 0)
        if seeds > 0:
            failed: list[int] = []
            events = 0
            t0 = time.perf_counter()
            with Progress(console=console, transient=quiet) as progress:
                task = progress.add_task(f"{seeds} random schedules ({mode.value})", total=seeds)
                for s in range(start_seed, start_seed + seeds):
                    w = random_schedule(s, mode, transactions)
                    events += w.events
                    if w.violations:
                        failed.append(s)
                        v = w.violations[0]
                        progress.console.print(
                            f"[red]seed {s}[/]: {v.invariant}: {v.detail}\n"
                            f"  replay: epochlog sim --seed {s} --truncation {mode.value}"
                            + (" --transactions" if transactions else "")
                        )
                    progress.advance(task)
            dt = time.perf_counter() - t0
            console.print(
                f"{seeds} seeds, {len(failed)} with violations, {events} events in {dt:.1f} s "
                f"({events / dt:,.0f} simulated events/s)"
            )
            raise typer.Exit(1 if failed else 0)
        console.print("nothing to do: give --list, --scenario NAME, --seed S or --seeds N")
        raise typer.Exit(2)


def _serve_report(path: Path, port: int) -> None:
    """Serve the report from the console's app on loopback until Ctrl-C. The URL is printed, not opened:
    these machines have no screen, and a browser anywhere that reaches 127.0.0.1 (a tunnel) can load it."""
    import socket

    from epochlog.console.app import serve_reports

    if port == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
    typer.echo(f"serving the report at http://127.0.0.1:{port}/sim/{path.name} (Ctrl-C to stop)", err=False)
    sys.stdout.flush()
    serve_reports(path.parent.resolve(), host="127.0.0.1", port=port)


def register_quorum(app: typer.Typer) -> None:
    @app.command("quorum-sim")
    def quorum_sim(
        scenario: Annotated[str | None, typer.Option("--scenario", help="a named quorum scenario (see --list)")] = None,
        list_: Annotated[bool, typer.Option("--list", help="list the named scenarios")] = False,
        seeds: Annotated[int, typer.Option("--seeds", help="run N random fault schedules")] = 0,
        start_seed: Annotated[int, typer.Option("--start-seed")] = 0,
        controllers: Annotated[
            bool, typer.Option("--controllers", help="random seeds with the controller core deciding on the quorum")
        ] = False,
        membership: Annotated[
            bool, typer.Option("--membership", help="random seeds with voters added and removed (KIP-853)")
        ] = False,
    ) -> None:
        """Run the controller quorum (raft/) in the simulator; exit 1 when an invariant breaks."""
        from epochlog.sim.controller_world import ControllerWorld
        from epochlog.sim.quorum_membership import MEMBERSHIP_SCENARIOS, random_membership_run
        from epochlog.sim.quorum_scenarios import SCENARIOS, random_run
        from epochlog.sim.quorum_world import QuorumWorld

        SCENARIOS = {**SCENARIOS, **MEMBERSHIP_SCENARIOS}  # KIP-853's, listed and run like the others

        world = ControllerWorld if controllers else QuorumWorld

        if list_:
            for name, listed in SCENARIOS.items():
                typer.echo(f"{name:26} {(listed.__doc__ or '').strip().splitlines()[0]}")
            return
        if scenario is not None:
            fn = SCENARIOS.get(scenario)
            if fn is None:
                typer.echo(f"unknown scenario {scenario!r}; see epochlog quorum-sim --list", err=True)
                raise typer.Exit(2)
            run = fn()
            typer.echo("\n".join(run.world.pictures))
            typer.echo("facts: " + ", ".join(f"{k}={v}" for k, v in run.facts.items()))
            for v in run.violations:
                typer.echo(f"VIOLATION {v.invariant} at {v.at_ms} ms: {v.detail}")
            typer.echo(f"{scenario}: {len(run.violations)} violation(s)")
            raise typer.Exit(1 if run.violations else 0)
        failed = []
        t0 = time.perf_counter()
        for s in range(start_seed, start_seed + seeds):
            run = random_membership_run(s) if membership else random_run(s, world=world)
            if run.violations:
                failed.append(s)
                typer.echo(f"seed {s}: {run.violations[0].invariant}: {run.violations[0].detail}")
        typer.echo(f"{seeds} seeds, {len(failed)} with violations, {time.perf_counter() - t0:.1f} s")
        raise typer.Exit(1 if failed else 0)
