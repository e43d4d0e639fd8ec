"""`epochlog dump-log PATH`: the batches of a segment file or partition directory; the records of
the metadata log and its snapshots, decoded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    @app.command("dump-log")
    def dump_log(
        path: Path,
        as_json: Annotated[bool, typer.Option("--json", help="one JSON object per batch")] = False,
        metadata: Annotated[
            bool | None,
            typer.Option(
                "--cluster-metadata-decoder/--no-cluster-metadata-decoder",
                help="decode metadata records (default: on for __cluster_metadata-0 and .checkpoint files)",
            ),
        ] = None,
    ) -> None:
        """Print every batch: offsets, leader epoch, CRC status; a torn tail is reported, not fatal."""
        from epochlog.storage.dump_log import dump, format_dump, is_metadata_path

        if not path.exists():
            typer.echo(f"error: {path} does not exist", err=True)
            raise typer.Exit(1)
        decode = is_metadata_path(path) if metadata is None else metadata
        if as_json:
            for entry in dump(path, decode):
                typer.echo(json.dumps(entry, default=str))
        else:
            for line in format_dump(dump(path, decode)):
                typer.echo(line)
