"""Deciding AlterUserScramCredentials (KIP-554) over the image's credentials (Kafka's ScramControlManager).

Outcomes are per user: a request may alter each user once (one deletion or one upsertion, whatever the
mechanism), and naming a user twice refuses every change of that user with DUPLICATE_RESOURCE. The
client salts the password; the controller keeps only what a server needs to check a proof.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from epochlog.codes import Err
from epochlog.controller.records import ScramCredentialRemoved, ScramCredentialSet
from epochlog.security.scram_credentials import (
    MAX_ITERATIONS,
    MECHANISM_BY_CODE,
    MIN_ITERATIONS,
    ScramCredential,
    credential_from_salted,
)

TWICE = "A user credential cannot be altered twice in the same request"


@dataclass(frozen=True)
class ScramDeletion:
    name: str
    mechanism: int  # AlterUserScramCredentials' code: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512


@dataclass(frozen=True)
class ScramUpsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True)
class ScramOutcome:
    user: str
    error_code: int = Err.NONE
    message: str | None = None


def _name_and_mechanism(name: str, mechanism: int) -> tuple[int, str] | None:
    if mechanism not in MECHANISM_BY_CODE:
        return Err.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if not name:
        return Err.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    return None


def plan_alter(
    credentials: Mapping[tuple[str, str], ScramCredential],
    deletions: Sequence[ScramDeletion],
    upsertions: Sequence[ScramUpsertion],
) -> tuple[list[ScramOutcome], list[ScramCredentialSet | ScramCredentialRemoved]]:
    """Outcomes in Kafka's order (accepted deletions, accepted upsertions, then the refused users) and
    the records carrying out the accepted ones."""
    errors: dict[str, tuple[int, str]] = {}
    to_delete: dict[str, ScramDeletion] = {}
    to_upsert: dict[str, ScramUpsertion] = {}
    for d in deletions:
        if d.name in errors:
            continue
        if to_delete.pop(d.name, None) is not None:
            errors[d.name] = (Err.DUPLICATE_RESOURCE, TWICE)
            continue
        err = _name_and_mechanism(d.name, d.mechanism)
        if err is None and (d.name, MECHANISM_BY_CODE[d.mechanism]) not in credentials:
            err = Err.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
        if err is not None:
            errors[d.name] = err
        else:
            to_delete[d.name] = d
    for u in upsertions:
        if u.name in errors:
            continue
        if to_delete.pop(u.name, None) is not None or to_upsert.pop(u.name, None) is not None:
            errors[u.name] = (Err.DUPLICATE_RESOURCE, TWICE)
            continue
        err = _name_and_mechanism(u.name, u.mechanism)
        if err is None and u.iterations < MIN_ITERATIONS:
            err = Err.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
        elif err is None and u.iterations > MAX_ITERATIONS:
            err = Err.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
        if err is not None:
            errors[u.name] = err
        else:
            to_upsert[u.name] = u
    outcomes: list[ScramOutcome] = []
    records: list[ScramCredentialSet | ScramCredentialRemoved] = []
    for d in to_delete.values():
        outcomes.append(ScramOutcome(d.name))
        records.append(ScramCredentialRemoved(d.name, MECHANISM_BY_CODE[d.mechanism]))
    for u in to_upsert.values():
        outcomes.append(ScramOutcome(u.name))
        c = credential_from_salted(MECHANISM_BY_CODE[u.mechanism], u.salt, u.salted_password, u.iterations)
        records.append(ScramCredentialSet(u.name, c.mechanism, c.salt, c.stored_key, c.server_key, c.iterations))
    for user, (code, message) in errors.items():
        outcomes.append(ScramOutcome(user, code, message))
    return outcomes, records
