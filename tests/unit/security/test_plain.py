"""SASL/PLAIN tokens against a JAAS user table, and the JAAS entry parser."""

from __future__ import annotations

import pytest

from epochlog.security.plain import (
    INVALID_CREDENTIALS,
    JaasConfig,
    PlainServer,
    parse_jaas,
    plain_client_token,
)
from epochlog.security.sasl_errors import SaslAuthenticationError

pytestmark = pytest.mark.unit

BROKER_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)


def users() -> dict[str, str]:
    return parse_jaas(BROKER_JAAS).plain_users()


def test_parse_broker_jaas() -> None:
    cfg = parse_jaas(BROKER_JAAS)
    assert cfg == JaasConfig(
        "org.apache.kafka.common.security.plain.PlainLoginModule",
        "required",
        {"username": "admin", "password": "admin-secret", "user_admin": "admin-secret", "user_alice": "alice-secret"},
    )
    assert cfg.plain_users() == {"admin": "admin-secret", "alice": "alice-secret"}


def test_parse_quotes_escapes_unquoted_and_comments() -> None:
    cfg = parse_jaas(
        'org.apache.kafka.common.security.scram.ScramLoginModule REQUIRED /* c */ a=plain b="x \\"q\\" \\\\ ;=y"'
        '\n // note\n c = "" ;  '
    )
    assert cfg.control_flag == "required"
    assert cfg.options == {"a": "plain", "b": 'x "q" \\ ;=y', "c": ""}


@pytest.mark.parametrize(
    "text, needle",
    [
        ("", "empty"),
        ("Module required a=b", "end with ';'"),
        ("Module mandatory a=b;", "control flag"),
        ("Module required a b;", "'='"),
        ("Module required a=;", "no value"),
        ('Module required a="open;', "unterminated"),
        ("Module required;Other required;", "more than one"),
        ("=x required;", "login module"),
    ],
)
def test_parse_errors(text: str, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        parse_jaas(text)


def test_plain_ok() -> None:
    srv = PlainServer(users())
    assert srv.step(plain_client_token("alice", "alice-secret")) == b""
    assert srv.complete and srv.username == "alice"


def test_plain_authzid_equal_to_user_ok() -> None:
    srv = PlainServer(users())
    srv.step(b"alice\x00alice\x00alice-secret")
    assert srv.username == "alice"


@pytest.mark.parametrize(
    "token",
    [
        b"\x00alice\x00wrong",
        b"\x00mallory\x00alice-secret",
        b"admin\x00alice\x00alice-secret",  # authzid other than the user
        b"\x00alice",
        b"\x00alice\x00alice-secret\x00extra",
        b"\x00\x00alice-secret",
        b"\x00alice\x00",
        b"\x00alice\x00\xff",
    ],
)
def test_plain_refused(token: bytes) -> None:
    srv = PlainServer(users())
    with pytest.raises(SaslAuthenticationError) as e:
        srv.step(token)
    assert not srv.complete and srv.username is None
    assert "alice-secret" not in str(e.value) and "wrong" not in str(e.value)


def test_unknown_user_and_wrong_password_same_message() -> None:
    msgs = []
    for token in (b"\x00alice\x00nope", b"\x00mallory\x00nope"):
        with pytest.raises(SaslAuthenticationError) as e:
            PlainServer(users()).step(token)
        msgs.append(str(e.value))
    assert msgs == [INVALID_CREDENTIALS, INVALID_CREDENTIALS]


def test_a_second_token_is_refused() -> None:
    srv = PlainServer(users())
    srv.step(plain_client_token("alice", "alice-secret"))
    with pytest.raises(SaslAuthenticationError):
        srv.step(plain_client_token("admin", "admin-secret"))
    assert srv.username == "alice"


def test_client_token() -> None:
    assert plain_client_token("u", "p") == b"\x00u\x00p"
    assert plain_client_token("u", "p", authzid="u") == b"u\x00u\x00p"
    with pytest.raises(ValueError):
        plain_client_token("u\x00", "p")
