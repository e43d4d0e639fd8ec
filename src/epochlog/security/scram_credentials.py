"""SCRAM credentials as stored (RFC 5802 section 3): salt, StoredKey, ServerKey and iterations per
(user, mechanism); the password itself is never kept."""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# mechanism name -> (hash, AlterUserScramCredentials' mechanism code)
MECHANISMS: dict[str, tuple[Callable[..., Any], int]] = {
    "SCRAM-SHA-256": (hashlib.sha256, 1),
    "SCRAM-SHA-512": (hashlib.sha512, 2),
}
MECHANISM_BY_CODE = {code: name for name, (_h, code) in MECHANISMS.items()}
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism minimum
MAX_ITERATIONS = 16384  # and the controller's upper bound


@dataclass(frozen=True)
class ScramCredential:
    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hash_name(mechanism: str) -> str:
    if mechanism not in MECHANISMS:
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r}")
    return "sha256" if mechanism == "SCRAM-SHA-256" else "sha512"


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_hash_name(mechanism), password.encode("utf-8"), salt, iterations)


def credential_from_salted(mechanism: str, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
    """What AlterUserScramCredentials sends (the client salts the password) turned into what is stored."""
    name = _hash_name(mechanism)
    client_key = hmac.new(salted, b"Client Key", name).digest()
    stored_key = hashlib.new(name, client_key).digest()
    server_key = hmac.new(salted, b"Server Key", name).digest()
    return ScramCredential(mechanism, salt, stored_key, server_key, iterations)


def credential_from_password(
    mechanism: str, password: str, iterations: int = MIN_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    salt = salt if salt is not None else os.urandom(32)
    return credential_from_salted(mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations)
