"""The `epochlog` command."""

from __future__ import annotations

import typer

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="epochlog: a Kafka-protocol commit log",
)


def _register_subcommands() -> None:
    # Each command group lives in its own module and adds itself to the app.
    import importlib

    for name in (
        "up_cmd",
        "cluster_cmd",
        "topics_cmd",
        "dump_log_cmd",
        "sim_cmd",
        "demo_cmd",
        "chaos_cmd",
        "metadata_quorum_cmd",
        "configs_cmd",
        "transactions_cmd",
        "reassign_partitions_cmd",
        "console_cmd",
        "acls_cmd",
        "scram_cmd",
        "storage_cmd",
        "groups_cmd",
        "share_groups_cmd",
    ):
        try:
            mod = importlib.import_module(f"epochlog.cli.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"epochlog.cli.{name}":
                continue
            raise
        mod.register(app)


_register_subcommands()

if __name__ == "__main__":
    app()
