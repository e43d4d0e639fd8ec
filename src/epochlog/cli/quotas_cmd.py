"""`epochlog configs --entity-type users|clients`: client quotas, as kafka-configs.sh takes them.

kafka-configs.sh pairs entity names with entity types by position, a ``--entity-default`` standing for a
name in the order it was given: ``--entity-type users --entity-default --entity-type clients --entity-name
app`` is the default user with client-id app. Types without a name match any entity of that type when
describing."""

from __future__ import annotations

import sys
from collections.abc import Sequence

QUOTA_TYPES = {"users": "user", "clients": "client-id"}
QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
_SHOWN = {"user": "user-principal", "client-id": "client-id"}


class Usage(ValueError):
    """A command line kafka-configs.sh would refuse."""


def name_order(argv: Sequence[str]) -> list[str | None]:
    """The --entity-name values and --entity-default flags (as None) in the order given."""
    out: list[str | None] = []
    it = iter(argv)
    for arg in it:
        if arg == "--entity-default":
            out.append(None)
        elif arg == "--entity-name":
            out.append(next(it, ""))
        elif arg.startswith("--entity-name="):
            out.append(arg.split("=", 1)[1])
    return out


def pair(
    types: Sequence[str], names: Sequence[str], defaults: int, argv: Sequence[str] | None = None
) -> list[tuple[str, str | None, bool]]:
    """(quota entity type, name or None for the default, named at all) per --entity-type, in order."""
    if len(set(types)) != len(types):
        raise Usage(f"Duplicate entity type(s) specified: {','.join(types)}")
    if len(types) > 1 and set(types) != set(QUOTA_TYPES):
        raise Usage("Only 'users' and 'clients' entity types may be specified together")
    order = name_order(sys.argv[1:] if argv is None else argv)
    if [n for n in order if n is not None] != list(names) or order.count(None) != defaults:
        order = [*names, *([None] * defaults)]  # not parsed from this argv (called in-process): names first
    if len(order) > len(types):
        raise Usage("More entity names specified than entity types")
    return [(QUOTA_TYPES[t], order[i] if i < len(order) else None, i < len(order)) for i, t in enumerate(types)]


def parse_values(to_set: dict[str, str]) -> dict[str, float]:
    out = {}
    for k, v in to_set.items():
        try:
            out[k] = float(v)
        except ValueError:
            raise Usage(f"Cannot parse quota configuration value for {k}: {v}") from None
    return out


def check_keys(types: Sequence[str], keys: Sequence[str], verb: str) -> None:
    unknown = [k for k in keys if k not in QUOTA_KEYS]
    if unknown:
        kind = "clients" if "clients" in types else "users"
        raise Usage(
            f"Only quota configs can be {verb} for '{kind}' using --bootstrap-server. "
            f"Unexpected config names: {','.join(unknown)}"
        )


def entity_text(entity: Sequence[tuple[str, str | None]]) -> str:
    by_type = dict(entity)
    parts = []
    for t in ("user", "client-id"):
        if t in by_type:
            n = by_type[t]
            parts.append(f"the default {_SHOWN[t]}" if n is None else f"{_SHOWN[t]} '{n}'")
    return ", ".join(parts)


def describe_lines(bootstrap: str, paired: list[tuple[str, str | None, bool]]) -> list[str]:
    from epochlog.client.quotas import MATCH_ANY, MATCH_DEFAULT, MATCH_EXACT, describe

    comps = [
        (t, (MATCH_EXACT if n is not None else MATCH_DEFAULT) if named else MATCH_ANY, n) for t, n, named in paired
    ]
    return [
        f"Quota configs for {entity_text(entity)} are " + ", ".join(f"{k}={v}" for k, v in values.items())
        for entity, values in describe(bootstrap, comps, strict=True)
    ]


def alter_quotas(
    bootstrap: str,
    types: Sequence[str],
    paired: list[tuple[str, str | None, bool]],
    to_set: dict[str, str],
    to_delete: list[str],
) -> str:
    """Alter one entity's quotas as kafka-configs.sh does; the line it prints on success."""
    from epochlog.client.configs import ConfigsError
    from epochlog.client.quotas import MATCH_DEFAULT, MATCH_EXACT, alter, describe

    if not all(named for _t, _n, named in paired):
        raise Usage("Exactly one entity name must be specified for every entity type")
    check_keys(types, list(to_set), "added")
    check_keys(types, to_delete, "deleted")
    values = parse_values(to_set)
    comps = [(t, MATCH_EXACT if n is not None else MATCH_DEFAULT, n) for t, n, _named in paired]
    if to_delete:
        found = describe(bootstrap, comps, strict=True)
        current = found[0][1] if found else {}
        missing = [k for k in to_delete if k not in current]
        if missing:
            raise ConfigsError(40, f"Invalid config(s): {','.join(missing)}")
    alter(bootstrap, tuple((t, n) for t, n, _named in paired), values, to_delete)
    head_name = paired[0][1]
    if head_name is not None:
        return f"Completed updating config for {types[0][:-1]} {head_name}."
    return f"Completed updating default config for {types[0]} in the cluster."
