"""The bootstrap file of a formatted data directory: metadata records the cluster starts with.

`epochlog storage format --add-scram ...` writes ``bootstrap-records.json`` in the data directory (the
controller's metadata log directory: metadata.log.dir, else the first of log.dirs); the first active
controller of that metadata log appends its records, then BootstrapApplied, so no later activation (nor
a controller restored from a snapshot) appends them again. Kafka's kafka-storage.sh format does the same
with its bootstrap checkpoint. Credentials are stored salted; the password never reaches the file.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

from epochlog.controller.records import MetadataRecord, ScramCredentialSet, UnknownRecord, from_json, to_json
from epochlog.security.scram_credentials import (
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    credential_from_password,
    credential_from_salted,
)

BOOTSTRAP_FILE = "bootstrap-records.json"
VERSION = 1


def read_bootstrap(directory: Path) -> list[MetadataRecord] | None:
    """The records of the directory's bootstrap file; None when there is none. ValueError if unreadable."""
    path = directory / BOOTSTRAP_FILE
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise ValueError(f"{path} cannot be read: {e}") from None
    if not isinstance(doc, dict) or doc.get("version") != VERSION or not isinstance(doc.get("records"), list):
        raise ValueError(f"{path} is not a version {VERSION} bootstrap file")
    try:
        return [from_json(str(r["kind"]), dict(r["data"])) for r in doc["records"]]
    except (UnknownRecord, KeyError, TypeError) as e:
        raise ValueError(f"{path}: {e}") from None


def write_bootstrap(directory: Path, records: list[MetadataRecord]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / BOOTSTRAP_FILE
    rows: list[dict[str, Any]] = []
    for r in records:
        kind, data = to_json(r)
        rows.append({"kind": kind, "data": data})
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        json.dump({"version": VERSION, "records": rows}, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def split_fields(body: str) -> dict[str, str]:
    """k=v,k="v" as kafka-storage.sh reads the inside of MECHANISM=[...]; quotes protect commas."""
    out: dict[str, str] = {}
    parts: list[str] = []
    quoted, start = False, 0
    for i, ch in enumerate(body):
        if ch == '"':
            quoted = not quoted
        elif ch == "," and not quoted:
            parts.append(body[start:i])
            start = i + 1
    if quoted:
        raise ValueError("an unterminated quote")
    parts.append(body[start:])
    for part in (p.strip() for p in parts):
        if not part:
            continue
        key, eq, value = part.partition("=")
        if not eq:
            raise ValueError(f"{key!r} is not key=value")
        key, value = key.strip().lower(), value.strip()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        if key in out:
            raise ValueError(f"{key} is given twice")
        out[key] = value
    return out


def parse_add_scram(text: str) -> ScramCredentialSet:
    """One --add-scram: MECHANISM=[name=N,password=P[,iterations=I][,salt=B64]] or with saltedpassword=B64
    (and salt) instead of the password. The error messages never repeat a password."""
    mechanism, eq, rest = text.strip().partition("=")
    mechanism = mechanism.strip().upper()
    if not eq or mechanism not in MECHANISMS:
        raise ValueError(f"expected MECHANISM=[name=...,password=...] with MECHANISM one of {', '.join(MECHANISMS)}")
    rest = rest.strip()
    if not (rest.startswith("[") and rest.endswith("]")):
        raise ValueError(f"the {mechanism} credential must be in brackets: {mechanism}=[name=...,password=...]")
    fields = split_fields(rest[1:-1])
    unknown = set(fields) - {"name", "password", "saltedpassword", "salt", "iterations"}
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(sorted(unknown))} in the {mechanism} credential")
    name = fields.get("name", "")
    if not name:
        raise ValueError(f"the {mechanism} credential needs name=...")
    try:
        iterations = int(fields.get("iterations", str(MIN_ITERATIONS)))
    except ValueError:
        raise ValueError("iterations must be a number") from None
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, got {iterations}")
    salt: bytes | None = None
    if "salt" in fields:
        try:
            salt = base64.b64decode(fields["salt"], validate=True)
        except ValueError:
            raise ValueError("salt must be base64") from None
        if not salt:
            raise ValueError("salt must not be empty")
    if ("password" in fields) == ("saltedpassword" in fields):
        raise ValueError(f"the credential of {name!r} needs exactly one of password=... or saltedpassword=...")
    if "password" in fields:
        if not fields["password"]:
            raise ValueError(f"the password of {name!r} is empty")
        c = credential_from_password(mechanism, fields["password"], iterations, salt)
    else:
        if salt is None:
            raise ValueError("saltedpassword=... needs salt=... too")
        try:
            salted = base64.b64decode(fields["saltedpassword"], validate=True)
        except ValueError:
            raise ValueError("saltedpassword must be base64") from None
        c = credential_from_salted(mechanism, salt, salted, iterations)
    return ScramCredentialSet(name, mechanism, c.salt, c.stored_key, c.server_key, c.iterations)
