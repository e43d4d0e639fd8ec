"""`epochlog reassign-partitions`: move partitions between brokers, with kafka-reassign-partitions.sh's
options, JSON files and messages (--generate, --execute, --verify, --cancel; --throttle while moving)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Annotated

import typer

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"


def _fail(msg: str) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(1)


def _read(path: Path | None, option: str) -> str:
    if path is None:
        _fail(f"{option} is required")
        return ""
    try:
        return path.read_text()
    except OSError as e:
        _fail(f"cannot read {path}: {e}")
        return ""


def _names(keys: object) -> str:
    return ",".join(f"{t}-{p}" for t, p in sorted(keys))  # type: ignore[call-overload]


def reassign_partitions(
    bootstrap: Annotated[str, typer.Option("--bootstrap-server", "-b", help="host:port of any broker")] = (
        DEFAULT_BOOTSTRAP
    ),
    generate: Annotated[bool, typer.Option("--generate", help="propose an assignment over --broker-list")] = False,
    execute: Annotated[bool, typer.Option("--execute", help="start the reassignment in the JSON file")] = False,
    verify: Annotated[bool, typer.Option("--verify", help="report each partition's progress")] = False,
    cancel: Annotated[bool, typer.Option("--cancel", help="cancel the reassignments in the JSON file")] = False,
    topics_to_move_json_file: Annotated[
        Path | None, typer.Option("--topics-to-move-json-file", help='{"topics": [{"topic": "foo"}], "version": 1}')
    ] = None,
    broker_list: Annotated[str, typer.Option("--broker-list", help="with --generate: broker ids, e.g. 1,2,3")] = "",
    disable_rack_aware: Annotated[
        bool, typer.Option("--disable-rack-aware", help="with --generate: place replicas ignoring broker racks")
    ] = False,
    reassignment_json_file: Annotated[
        Path | None, typer.Option("--reassignment-json-file", help="the reassignment, in the tool's JSON format")
    ] = None,
    throttle: Annotated[
        int, typer.Option("--throttle", help="with --execute: cap replication of the moving replicas, bytes/s")
    ] = -1,
    additional: Annotated[
        bool, typer.Option("--additional", help="with --execute: start even while other moves are in progress")
    ] = False,
    preserve_throttles: Annotated[
        bool, typer.Option("--preserve-throttles", help="with --verify: keep the throttles once all is done")
    ] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="seconds to wait for the cluster")] = 30.0,
) -> None:
    """Move partitions between brokers, like kafka-reassign-partitions.sh."""
    from epochlog.client import reassignments as ra

    if sum((generate, execute, verify, cancel)) != 1:
        _fail("exactly one of --generate, --execute, --verify or --cancel")
    try:
        if generate:
            topics_json = _read(topics_to_move_json_file, "--topics-to-move-json-file")
            _generate(bootstrap, topics_json, broker_list, not disable_rack_aware, timeout)
        else:
            wanted = ra.parse_reassignment(_read(reassignment_json_file, "--reassignment-json-file"))
            if execute:
                _execute(bootstrap, wanted, throttle, additional, timeout)
            elif verify:
                _verify(bootstrap, wanted, preserve_throttles, timeout)
            else:
                _cancel(bootstrap, wanted, timeout)
    except ra.ReassignError as e:
        _fail(str(e))
    except ra.WireError as e:
        _fail(f"cannot reach {bootstrap}: {e}")


def _generate(bootstrap: str, topics_json: str, broker_list: str, rack_aware: bool, timeout: float) -> None:
    from epochlog.client import reassignments as ra
    from epochlog.controller import placement

    topics = ra.parse_topics_to_move(topics_json)
    try:
        brokers = [int(b) for b in broker_list.split(",") if b.strip()]
    except ValueError:
        _fail(f"--broker-list must be broker ids separated by commas, got {broker_list!r}")
        return
    if not brokers:
        _fail("--generate needs --broker-list")
    current, live = ra.current_assignment(bootstrap, topics, timeout)
    unknown = sorted(set(brokers) - set(live))
    if unknown:
        raise ra.ReassignError(f"--broker-list names brokers the cluster does not have: {unknown}")
    known = ra.broker_racks(bootstrap, timeout) if rack_aware else {}
    racks = {b: known.get(b) for b in brokers}
    if rack_aware and None in racks.values() and any(r is not None for r in racks.values()):
        raise ra.ReassignError(
            "Not all brokers have rack information. Add --disable-rack-aware in command line to make replica "
            "assignment without rack information."
        )
    n = len(brokers)

    def placer(partitions: int, rf: int) -> list[list[int]]:
        # Kafka starts each topic's round-robin and follower shift at random, so topics spread differently.
        start, shift = random.randrange(n), random.randrange(n)
        try:
            return [list(r) for r in placement.assign(partitions, rf, racks, start, shift)]
        except placement.PlacementError as e:
            raise ra.ReassignError(str(e)) from None

    proposed = ra.generate(current, topics, brokers, placer)
    moved = {k: v for k, v in current.items() if k[0] in topics}
    typer.echo("Current partition replica assignment")
    typer.echo(ra.format_assignment(moved))
    typer.echo("")
    typer.echo("Proposed partition reassignment configuration")
    typer.echo(ra.format_assignment(proposed))


def _execute(
    bootstrap: str, wanted: dict[tuple[str, int], list[int]], throttle: int, additional: bool, timeout: float
) -> None:
    from epochlog.client import reassignments as ra

    if not additional and ra.ongoing(bootstrap, timeout):
        # As the Kafka tool: a second plan started by mistake would silently redirect moves in progress.
        raise ra.ReassignError(
            "Cannot execute because there is an existing partition assignment. Use --additional to override "
            "this and create a new partition assignment in addition to the existing one."
        )

    current, live = ra.current_assignment(bootstrap, sorted({t for t, _p in wanted}), timeout)
    missing = sorted(k for k in wanted if k not in current)
    if missing:
        raise ra.ReassignError(f"unknown partitions: {_names(missing)}")
    unknown = sorted({b for r in wanted.values() for b in r} - set(live))
    if unknown:
        raise ra.ReassignError(f"the reassignment names brokers the cluster does not have: {unknown}")
    typer.echo("Current partition replica assignment")
    typer.echo("")
    typer.echo(ra.format_assignment({k: current[k] for k in wanted}))
    typer.echo("")
    typer.echo("Save this to use as the --reassignment-json-file option during rollback")
    if throttle >= 0:
        _set_throttles(bootstrap, wanted, current, throttle, timeout)
    failed = ra.alter(bootstrap, dict(wanted.items()), timeout)
    if failed:
        lines = "\n".join(f"  {k}: {v}" for k, v in sorted(failed.items()))
        raise ra.ReassignError(f"Error reassigning partition(s):\n{lines}")
    typer.echo(f"Successfully started partition reassignments for {_names(wanted)}")


def _set_throttles(
    bootstrap: str,
    wanted: dict[tuple[str, int], list[int]],
    current: dict[tuple[str, int], list[int]],
    rate: int,
    timeout: float,
) -> None:
    """As the tool does: the rate on every broker involved; the existing replicas throttled as leaders
    (they send), the joining ones as followers (they fetch)."""
    from epochlog.client.configs import BROKER, TOPIC
    from epochlog.client.configs import alter as alter_configs

    brokers = sorted({b for k, r in wanted.items() for b in (*r, *current[k])})
    rates = {LEADER_RATE: str(rate), FOLLOWER_RATE: str(rate)}
    for b in brokers:
        alter_configs(bootstrap, BROKER, str(b), rates, [], timeout=timeout)
    for topic in sorted({t for t, _p in wanted}):
        leaders = [f"{p}:{b}" for (t, p), _r in sorted(wanted.items()) if t == topic for b in current[(t, p)]]
        followers = [
            f"{p}:{b}" for (t, p), r in sorted(wanted.items()) if t == topic for b in r if b not in current[(t, p)]
        ]
        configs = {LEADER_REPLICAS: ",".join(leaders)}
        if followers:
            configs[FOLLOWER_REPLICAS] = ",".join(followers)
        alter_configs(bootstrap, TOPIC, topic, configs, [], timeout=timeout)
    typer.echo(f"The inter-broker throttle limit was set to {rate} B/s")


def _verify(bootstrap: str, wanted: dict[tuple[str, int], list[int]], preserve: bool, timeout: float) -> None:
    from epochlog.client import reassignments as ra

    moving = ra.ongoing(bootstrap, timeout)
    current, live = ra.current_assignment(bootstrap, sorted({t for t, _p in wanted}), timeout)
    typer.echo("Status of partition reassignment:")
    done = True
    wrong = []
    for (t, p), target in sorted(wanted.items()):
        if (t, p) in moving:
            done = False
            typer.echo(f"Reassignment of partition {t}-{p} is still in progress.")
        elif current.get((t, p)) == target:
            typer.echo(f"Reassignment of partition {t}-{p} is completed.")
        else:
            done = False
            wrong.append(f"{t}-{p}")
            typer.echo(
                f"There is no active reassignment of partition {t}-{p}, but replica set is "
                f"{current.get((t, p))} rather than {target}."
            )
    if done and not preserve:
        _clear_throttles(bootstrap, wanted, live, timeout)
    if wrong:
        raise typer.Exit(1)


def _clear_throttles(bootstrap: str, wanted: dict[tuple[str, int], list[int]], live: list[int], timeout: float) -> None:
    from epochlog.client.configs import BROKER, TOPIC, ConfigsError
    from epochlog.client.configs import alter as alter_configs

    typer.echo("")
    typer.echo(f"Clearing broker-level throttles on brokers {','.join(str(b) for b in live)}")
    for b in live:
        alter_configs(bootstrap, BROKER, str(b), {}, [LEADER_RATE, FOLLOWER_RATE], timeout=timeout)
    for topic in sorted({t for t, _p in wanted}):
        typer.echo(f"Clearing topic-level throttles on topic {topic}")
        try:
            alter_configs(bootstrap, TOPIC, topic, {}, [LEADER_REPLICAS, FOLLOWER_REPLICAS], timeout=timeout)
        except ConfigsError as e:
            typer.echo(f"  not cleared: {e}", err=True)


def _cancel(bootstrap: str, wanted: dict[tuple[str, int], list[int]], timeout: float) -> None:
    from epochlog.client import reassignments as ra

    moving = ra.ongoing(bootstrap, timeout)
    active = [k for k in wanted if k in moving]
    if not active:
        typer.echo("None of the specified partition moves are active.")
        return
    failed = ra.alter(bootstrap, dict.fromkeys(active), timeout)
    if failed:
        lines = "\n".join(f"  {k}: {v}" for k, v in sorted(failed.items()))
        raise ra.ReassignError(f"Error cancelling partition reassignment(s):\n{lines}")
    typer.echo(f"Successfully cancelled partition reassignments for: {_names(active)}")


def register(app: typer.Typer) -> None:
    app.command("reassign-partitions")(reassign_partitions)
