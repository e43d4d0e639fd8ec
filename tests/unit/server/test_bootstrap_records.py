"""`storage format --add-scram`: kafka-storage.sh's credential syntax, the bootstrap file it writes
(salted credentials only), and what the controller reads back."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from epochlog.controller.records import ScramCredentialSet
from epochlog.security.scram_credentials import credential_from_password, salted_password
from epochlog.server.cluster.bootstrap import BOOTSTRAP_FILE, parse_add_scram, read_bootstrap, write_bootstrap

pytestmark = pytest.mark.unit


def test_password_form_with_iterations_and_salt() -> None:
    salt = base64.b64encode(b"0123456789abcdef").decode()
    r = parse_add_scram(f'SCRAM-SHA-512=[name=admin,password="a,b=c",iterations=8192,salt={salt}]')
    c = credential_from_password("SCRAM-SHA-512", "a,b=c", 8192, b"0123456789abcdef")
    assert r == ScramCredentialSet("admin", "SCRAM-SHA-512", c.salt, c.stored_key, c.server_key, 8192)


def test_salted_password_form_matches_the_password_form() -> None:
    salt = b"saltsaltsalt"
    salted = salted_password("SCRAM-SHA-256", "pw", salt, 4096)
    r = parse_add_scram(
        f"SCRAM-SHA-256=[name=u,salt={base64.b64encode(salt).decode()},"
        f"saltedpassword={base64.b64encode(salted).decode()}]"
    )
    assert r == parse_add_scram(f"SCRAM-SHA-256=[name=u,password=pw,salt={base64.b64encode(salt).decode()}]")
    assert r.iterations == 4096


@pytest.mark.parametrize(
    "text",
    [
        "SCRAM-SHA-1=[name=a,password=hunter2]",
        "SCRAM-SHA-512=name=a,password=hunter2",
        "SCRAM-SHA-512=[password=hunter2]",
        "SCRAM-SHA-512=[name=a]",
        "SCRAM-SHA-512=[name=a,password=hunter2,iterations=100]",
        "SCRAM-SHA-512=[name=a,password=hunter2,iterations=lots]",
        "SCRAM-SHA-512=[name=a,password=hunter2,colour=blue]",
        "SCRAM-SHA-512=[name=a,password=hunter2,salt=@@@]",
        'SCRAM-SHA-512=[name=a,password="hunter2]',
        "SCRAM-SHA-512=[name=a,password=hunter2,saltedpassword=AAAA]",
    ],
)
def test_malformed_credentials_are_refused_without_echoing_the_password(text: str) -> None:
    with pytest.raises(ValueError) as e:
        parse_add_scram(text)
    assert "hunter2" not in str(e.value)


def test_file_round_trip_holds_no_password(tmp_path: Path) -> None:
    assert read_bootstrap(tmp_path) is None
    r = parse_add_scram("SCRAM-SHA-512=[name=admin,password=admin-secret]")
    path = write_bootstrap(tmp_path, [r])
    assert path.name == BOOTSTRAP_FILE and "admin-secret" not in path.read_text()
    assert read_bootstrap(tmp_path) == [r]
    doc = json.loads(path.read_text())
    doc["records"][0]["data"]["password"] = "x"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError):
        read_bootstrap(tmp_path)
