"""Client quotas over the wire: AlterClientQuotas (49) and DescribeClientQuotas (48), for `epochlog configs
--entity-type users|clients` (neither confluent-kafka nor kafka-python exposes them)."""

from __future__ import annotations

from kio.static.primitive import f64, i8

from epochlog.client.configs import ConfigsError, _connect
from epochlog.client.wire import Connection

# An entity: (type, name) pairs, type "user" or "client-id", a name of None meaning the default.
Entity = tuple[tuple[str, str | None], ...]
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2


def alter(bootstrap: str, entity: Entity, set_: dict[str, float], delete: list[str], timeout: float = 15.0) -> None:
    """Set and remove quotas of one entity; raises ConfigsError with the broker's code and message."""
    from kio.schema.alter_client_quotas.v1.request import AlterClientQuotasRequest, EntityData, EntryData, OpData

    ops = [OpData(key=k, value=f64(v), remove=False) for k, v in set_.items()]
    ops += [OpData(key=k, value=f64(0.0), remove=True) for k in delete]
    entry = EntryData(entity=tuple(EntityData(entity_type=t, entity_name=n) for t, n in entity), ops=tuple(ops))
    with _connect(bootstrap, timeout) as conn:
        resp = conn.request(AlterClientQuotasRequest(entries=(entry,), validate_only=False))
    for row in resp.entries:
        if int(row.error_code):
            name = str(getattr(row.error_code, "name", int(row.error_code))).upper()
            raise ConfigsError(int(row.error_code), f"{name}: {row.error_message or 'refused'}")


def describe(
    bootstrap: str, components: list[tuple[str, int, str | None]], strict: bool = True, timeout: float = 15.0
) -> list[tuple[Entity, dict[str, float]]]:
    """The entities the filter matches (components: (type, match type, name)), with their quotas."""
    with _connect(bootstrap, timeout) as conn:
        return describe_on(conn, components, strict)


def describe_on(
    conn: Connection, components: list[tuple[str, int, str | None]], strict: bool = True
) -> list[tuple[Entity, dict[str, float]]]:
    """``describe`` over a connection the caller keeps (the console asks on every refresh)."""
    from kio.schema.describe_client_quotas.v1.request import ComponentData, DescribeClientQuotasRequest

    comps = tuple(ComponentData(entity_type=t, match_type=i8(m), match=x) for t, m, x in components)
    resp = conn.request(DescribeClientQuotasRequest(components=comps, strict=strict))
    if int(resp.error_code):
        name = str(getattr(resp.error_code, "name", int(resp.error_code))).upper()
        raise ConfigsError(int(resp.error_code), f"{name}: {resp.error_message or 'refused'}")
    return [
        (
            tuple((str(e.entity_type), e.entity_name) for e in row.entity),
            {str(v.key): float(v.value) for v in row.values},
        )
        for row in resp.entries or ()
    ]
