"""Client quotas in the metadata log: deciding AlterClientQuotas (49) and answering DescribeClientQuotas (48)
over the image's quotas (Kafka's ClientQuotaControlManager and ClientQuotasImage.describe).

An entity is a set of (type, name) pairs, a name of ``None`` meaning the type's default: ``user``,
``client-id`` (alone or together) or ``ip``. It is kept as a tuple sorted by type so that equal entities
are equal keys whatever order a request named their parts in.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from epochlog.codes import Err
from epochlog.controller.records import ClientQuotaRecord

USER, CLIENT_ID, IP = "user", "client-id", "ip"
QuotaEntity = tuple[tuple[str, str | None], ...]

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# The keys each kind of entity takes and their Java types (QuotaConfig): a LONG or INT must be whole.
_LONG_MAX, _INT_MAX = float(2**63 - 1), float(2**31 - 1)
CLIENT_KEYS: dict[str, tuple[str, float | None]] = {
    PRODUCER_BYTE_RATE: ("LONG", _LONG_MAX),
    CONSUMER_BYTE_RATE: ("LONG", _LONG_MAX),
    REQUEST_PERCENTAGE: ("DOUBLE", None),
    CONTROLLER_MUTATION_RATE: ("DOUBLE", None),
}
IP_KEYS: dict[str, tuple[str, float | None]] = {CONNECTION_CREATION_RATE: ("INT", _INT_MAX)}

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


@dataclass(frozen=True)
class QuotaAlteration:
    """One entry of AlterClientQuotas: the entity as named (in request order) and its ops, a value of
    ``None`` removing the key."""

    entity: tuple[tuple[str, str | None], ...]
    ops: tuple[tuple[str, float | None], ...]


@dataclass(frozen=True)
class QuotaOutcome:
    entity: tuple[tuple[str, str | None], ...]
    error_code: int = Err.NONE
    message: str | None = None


def entity_key(parts: Sequence[tuple[str, str | None]]) -> QuotaEntity:
    return tuple(sorted(parts, key=lambda p: p[0]))


def describe_entity(entity: Sequence[tuple[str, str | None]]) -> str:
    return "{" + ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in entity) + "}"


def _check_entity(entity: Sequence[tuple[str, str | None]]) -> tuple[int, str] | dict[str, tuple[str, float | None]]:
    """The keys the entity takes, or why it is refused."""
    if not entity:
        return Err.INVALID_REQUEST, "Invalid empty client quota entity"
    seen: set[str] = set()
    for etype, name in entity:
        if etype in seen:
            return Err.INVALID_REQUEST, f"Invalid client quota entity, duplicate entity entry {etype}"
        seen.add(etype)
        if etype not in (USER, CLIENT_ID, IP):
            return Err.INVALID_REQUEST, f"Unhandled client quota entity type: {etype}"
        if name is not None and not name:
            return Err.INVALID_REQUEST, f"Empty {etype} not supported"
    if IP in seen:
        if len(seen) > 1:
            return (
                Err.INVALID_REQUEST,
                "Invalid quota entity combination, IP entity should not be combined with User or ClientId",
            )
        ip = dict(entity)[IP]
        if ip is not None:
            try:
                ipaddress.ip_address(ip)
            except ValueError:
                # Kafka also accepts a host name it can resolve; a sans-IO core cannot resolve, so only
                # literal addresses are taken.
                return Err.INVALID_REQUEST, f"{ip} is not a valid IP or resolvable host."
        return IP_KEYS
    return CLIENT_KEYS


def check_value(keys: Mapping[str, tuple[str, float | None]], key: str, value: float) -> tuple[int, str] | None:
    """Kafka's checks of one quota value (ClientQuotaControlManager.validateQuotaKeyValue)."""
    spec = keys.get(key)
    if spec is None:
        return Err.INVALID_REQUEST, f"Invalid configuration key {key}"
    if math.isnan(value) or math.isinf(value):
        return Err.INVALID_REQUEST, f"Quota {key} must be a finite number"
    if value <= 0.0:
        return Err.INVALID_REQUEST, f"Quota {key} must be greater than 0"
    java_type, limit = spec
    if limit is not None and value > limit:
        article = "an" if java_type == "INT" else "a"
        return Err.INVALID_REQUEST, f"Proposed value for {key} is too large for {article} {java_type}."
    if java_type != "DOUBLE" and abs(math.fmod(value, 1.0)) > 1e-6:
        return Err.INVALID_REQUEST, f"{key} cannot be a fractional value."
    return None


def plan_alter(
    quotas: Mapping[QuotaEntity, Mapping[str, float]], alterations: Sequence[QuotaAlteration]
) -> tuple[list[QuotaOutcome], list[ClientQuotaRecord]]:
    """One outcome per distinct entity (in the order first named) and the records of the accepted ones.

    An entity named twice, or naming a key twice, is refused with INVALID_REQUEST and changes nothing
    (Kafka refuses it too, with the same message). Only values that change are recorded; removing a key
    the entity does not have records nothing."""
    outcomes: dict[QuotaEntity, QuotaOutcome] = {}
    planned: dict[QuotaEntity, list[ClientQuotaRecord]] = {}
    for alt in alterations:
        key = entity_key(alt.entity)
        if key in outcomes:
            planned.pop(key, None)
            message = f"Ignoring duplicate entity {describe_entity(key)}"
            outcomes[key] = QuotaOutcome(alt.entity, Err.INVALID_REQUEST, message)
            continue
        ops: dict[str, float | None] = {}
        refused: tuple[int, str] | None = None
        for k, v in alt.ops:
            if k in ops:
                refused = Err.INVALID_REQUEST, f"Ignoring duplicate entity {describe_entity(key)}"
            ops[k] = v
        checked = refused or _check_entity(alt.entity)
        if isinstance(checked, tuple):
            outcomes[key] = QuotaOutcome(alt.entity, *checked)
            continue
        current = quotas.get(key, {})
        records: list[ClientQuotaRecord] = []
        for k, v in ops.items():
            if v is None:
                if k in current:
                    records.append(ClientQuotaRecord(key, k, remove=True))
                continue
            bad = check_value(checked, k, v)
            if bad is not None:
                refused = bad
                break
            if current.get(k) != float(v):
                records.append(ClientQuotaRecord(key, k, float(v)))
        if refused is not None:
            outcomes[key] = QuotaOutcome(alt.entity, *refused)
            continue
        outcomes[key] = QuotaOutcome(alt.entity)
        planned[key] = records
    return list(outcomes.values()), [r for rs in planned.values() for r in rs]


class DescribeError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _filter(components: Sequence[tuple[str, int, str | None]]) -> tuple[dict[str, str | None], set[str]]:
    exact: dict[str, str | None] = {}
    typed: set[str] = set()
    for etype, match_type, match in components:
        if not etype:
            raise DescribeError(Err.INVALID_REQUEST, "Invalid empty entity type.")
        if etype in exact or etype in typed:
            raise DescribeError(Err.INVALID_REQUEST, f"Entity type {etype} cannot appear more than once in the filter.")
        if etype not in (USER, CLIENT_ID, IP):
            raise DescribeError(Err.UNSUPPORTED_VERSION, f"Unsupported entity type {etype}")
        if match_type == MATCH_EXACT:
            if match is None:
                raise DescribeError(
                    Err.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match string to null."
                )
            exact[etype] = match
        elif match_type == MATCH_DEFAULT:
            if match is not None:
                raise DescribeError(
                    Err.INVALID_REQUEST, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                )
            exact[etype] = None
        elif match_type == MATCH_SPECIFIED:
            if match is not None:
                raise DescribeError(
                    Err.INVALID_REQUEST, "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                )
            typed.add(etype)
        else:
            raise DescribeError(Err.INVALID_REQUEST, f"Unknown match type {match_type}")
    if (IP in exact or IP in typed) and ({USER, CLIENT_ID} & (set(exact) | typed)):
        raise DescribeError(
            Err.INVALID_REQUEST,
            "Invalid entity filter component combination. IP filter component should not be used with "
            "user or clientId filter component.",
        )
    return exact, typed


def describe(
    quotas: Mapping[QuotaEntity, Mapping[str, float]],
    components: Sequence[tuple[str, int, str | None]],
    strict: bool,
) -> list[tuple[QuotaEntity, dict[str, float]]]:
    """The entities a DescribeClientQuotas filter matches, with their quotas; raises ``DescribeError``
    for a filter Kafka refuses. ``components`` are (entity type, match type, match)."""
    exact, typed = _filter(components)
    out = []
    for entity, values in sorted(quotas.items(), key=lambda kv: [(t, n or "") for t, n in kv[0]]):
        names = dict(entity)
        if strict and len(names) != len(exact) + len(typed):
            continue
        if any(t not in names or names[t] != n for t, n in exact.items()):
            continue
        if any(t not in names for t in typed):
            continue
        out.append((entity, dict(values)))
    return out
