"""The per-connection SaslAuthenticator: handshake, authenticate, v0 raw tokens, failures that close,
re-authentication (KIP-368), which requests a connection may send, and the response shapes on the
wire for every SaslHandshake / SaslAuthenticate version. Our SaslClientSession drives it too."""

from __future__ import annotations

from typing import Any

import pytest

from epochlog.client.wire import decode_response
from epochlog.protocol.codec import encode_response, response_class
from epochlog.security.plain import plain_client_token
from epochlog.security.sasl import (
    ILLEGAL_SASL_STATE,
    SASL_AUTHENTICATION_FAILED,
    UNSUPPORTED_SASL_MECHANISM,
    SaslAuthenticator,
    SaslStep,
)
from epochlog.security.sasl_client import SaslClientSession
from epochlog.security.sasl_errors import SaslClientError
from epochlog.security.scram import ScramClient
from epochlog.security.scram_credentials import ScramCredential, credential_from_password

pytestmark = pytest.mark.unit

PLAIN_USERS = {"alice": "alice-secret", "bob": "bob-secret"}
ALL = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
_CREDS: dict[tuple[str, str], ScramCredential] = {
    (u, m): credential_from_password(m, p) for u, p in PLAIN_USERS.items() for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")
}


def lookup(user: str, mech: str) -> ScramCredential | None:
    return _CREDS.get((user, mech))


def auth(mechanisms: list[str] | None = None, reauth_ms: int = 0, max_receive_size: int = 524288) -> SaslAuthenticator:
    return SaslAuthenticator(mechanisms or ALL, lookup, PLAIN_USERS, reauth_ms, max_receive_size)


def login(a: SaslAuthenticator, mech: str, user: str, password: str, now: int = 0, version: int = 2) -> SaslStep:
    """Handshake v1 then SaslAuthenticate until done or failed; the last step."""
    assert a.handshake(1, mech, now)["error_code"] == 0
    if mech == "PLAIN":
        return a.authenticate(version, plain_client_token(user, password), now)
    cli = ScramClient(mech, user, password)
    step = a.authenticate(version, cli.first(), now)
    if step.close:
        return step
    step = a.authenticate(version, cli.final(step.response["auth_bytes"]), now)
    if step.done:
        cli.verify(step.response["auth_bytes"])
    return step


def versions(api_key: int) -> list[int]:
    out = []
    for v in range(10):
        try:
            response_class(api_key, v)
        except Exception:
            break
        out.append(v)
    return out


def on_the_wire(api_key: int, version: int, body: dict[str, Any]) -> Any:
    frame = encode_response(api_key, version, 7, body)
    return decode_response(api_key, version, frame[4:], 7)


@pytest.mark.parametrize("mech", ALL)
def test_login_each_mechanism(mech: str) -> None:
    a = auth()
    assert a.principal == "User:ANONYMOUS" and not a.authenticated
    step = login(a, mech, "alice", "alice-secret")
    assert step.done and not step.close and step.response["error_code"] == 0
    assert a.authenticated and a.principal == "User:alice" and a.mechanism == mech
    assert a.session_expires_at_ms is None and step.response["session_lifetime_ms"] == 0


@pytest.mark.parametrize("mech", ALL)
def test_wrong_password_fails_closes_and_does_not_leak(mech: str) -> None:
    a = auth()
    step = login(a, mech, "alice", "hunter2-wrong")
    assert step.close and not step.done and a.should_close
    assert step.response["error_code"] == SASL_AUTHENTICATION_FAILED
    msg = step.response["error_message"]
    assert "hunter2" not in msg and "alice-secret" not in msg
    assert not a.authenticated and a.principal == "User:ANONYMOUS"
    assert not a.admits(3, 0)


@pytest.mark.parametrize("mech", ALL)
def test_unknown_user_same_message_as_wrong_password(mech: str) -> None:
    wrong = login(auth(), mech, "alice", "nope").response["error_message"]
    unknown = login(auth(), mech, "mallory", "nope").response["error_message"]
    assert wrong == unknown


def test_disabled_mechanism_is_refused_and_closes() -> None:
    a = auth(["SCRAM-SHA-512"])
    resp = a.handshake(1, "PLAIN", 0)
    assert resp == {"error_code": UNSUPPORTED_SASL_MECHANISM, "mechanisms": ["SCRAM-SHA-512"]}
    assert a.should_close
    b = auth(["SCRAM-SHA-512"])
    assert b.handshake(1, "GSSAPI", 0)["error_code"] == UNSUPPORTED_SASL_MECHANISM


def test_enabled_mechanism_is_accepted_so_the_refusal_test_means_something() -> None:
    a = auth(["SCRAM-SHA-512"])
    assert a.handshake(1, "SCRAM-SHA-512", 0)["error_code"] == 0 and not a.should_close


def test_mechanisms_we_do_not_implement_cannot_be_enabled() -> None:
    with pytest.raises(ValueError, match="GSSAPI"):
        auth(["PLAIN", "GSSAPI"])


def test_handshake_twice_is_illegal_state() -> None:
    a = auth()
    a.handshake(1, "PLAIN", 0)
    assert a.handshake(1, "PLAIN", 0)["error_code"] == ILLEGAL_SASL_STATE
    assert a.should_close


def test_authenticate_before_handshake_is_illegal_state() -> None:
    a = auth()
    step = a.authenticate(2, plain_client_token("alice", "alice-secret"), 0)
    assert step.response["error_code"] == ILLEGAL_SASL_STATE and step.close
    assert not a.authenticated


def test_authenticate_after_success_is_answered_not_closed() -> None:
    a = auth()
    login(a, "PLAIN", "alice", "alice-secret")
    step = a.authenticate(2, plain_client_token("bob", "bob-secret"), 0)
    assert step.response["error_code"] == ILLEGAL_SASL_STATE and not step.close
    assert a.principal == "User:alice"


def test_oversized_token_fails_and_closes() -> None:
    users = {"carol": "c" * 100}  # a valid token of 107 bytes: only its size can refuse it
    token = plain_client_token("carol", "c" * 100)
    small = SaslAuthenticator(["PLAIN"], lookup, users, max_receive_size=64)
    small.handshake(1, "PLAIN", 0)
    step = small.authenticate(2, token, 0)
    assert step.close and step.response["error_code"] == SASL_AUTHENTICATION_FAILED
    assert "c" * 10 not in step.response["error_message"] and not small.authenticated
    big = SaslAuthenticator(["PLAIN"], lookup, users, max_receive_size=len(token))
    big.handshake(1, "PLAIN", 0)
    assert big.authenticate(2, token, 0).done
    raw = SaslAuthenticator(["PLAIN"], lookup, users, max_receive_size=64)
    raw.handshake(0, "PLAIN", 0)
    assert raw.raw_token(token, 0) is None and raw.should_close


def test_v0_handshake_then_raw_tokens() -> None:
    a = auth()
    assert a.handshake(0, "SCRAM-SHA-256", 0)["error_code"] == 0
    assert a.expects_raw_tokens
    cli = ScramClient("SCRAM-SHA-256", "bob", "bob-secret")
    server_first = a.raw_token(cli.first(), 0)
    assert server_first is not None and not a.authenticated
    server_final = a.raw_token(cli.final(server_first), 0)
    assert server_final is not None
    cli.verify(server_final)
    assert a.authenticated and a.principal == "User:bob" and not a.expects_raw_tokens


def test_v0_raw_plain_failure_returns_none() -> None:
    a = auth()
    a.handshake(0, "PLAIN", 0)
    assert a.raw_token(b"\x00alice\x00bad", 0) is None
    assert a.should_close and not a.authenticated
    b = auth()
    b.handshake(0, "PLAIN", 0)
    assert b.raw_token(b"\x00alice\x00alice-secret", 0) == b""
    assert b.authenticated


def test_requests_admitted_before_and_after_auth() -> None:
    a = auth()
    assert SaslAuthenticator.allowed_before_auth(18) and SaslAuthenticator.allowed_before_auth(17)
    assert SaslAuthenticator.allowed_before_auth(36) and not SaslAuthenticator.allowed_before_auth(3)
    assert a.admits(18, 0) and a.admits(17, 0) and not a.admits(3, 0) and not a.admits(0, 0)
    a.handshake(1, "PLAIN", 0)
    assert a.admits(36, 0) and not a.admits(18, 0) and not a.admits(3, 0)
    a.authenticate(2, plain_client_token("alice", "alice-secret"), 0)
    assert a.admits(3, 0) and a.admits(0, 0)


def test_session_lifetime_and_expiry() -> None:
    a = auth(reauth_ms=60_000)
    step = login(a, "SCRAM-SHA-256", "alice", "alice-secret", now=1_000)
    assert step.response["session_lifetime_ms"] == 60_000
    assert step.response["session_lifetime"] == 60_000
    assert a.session_expires_at_ms == 61_000
    assert a.admits(3, 60_999) and not a.session_expired(60_999)
    assert a.session_expired(61_000) and not a.admits(3, 61_000)
    assert a.admits(17, 61_000)  # only a re-authenticating handshake


@pytest.mark.parametrize("mech", ALL)
def test_reauthentication_same_user(mech: str) -> None:
    a = auth(reauth_ms=10_000)
    assert login(a, mech, "alice", "alice-secret", now=0).done
    step = login(a, mech, "alice", "alice-secret", now=9_000)
    assert step.done and not step.close
    assert a.principal == "User:alice" and a.session_expires_at_ms == 19_000 and a.reauth_count == 1
    assert a.admits(3, 18_000)


@pytest.mark.parametrize("mech", ALL)
def test_reauthentication_as_another_user_fails_and_closes(mech: str) -> None:
    a = auth(reauth_ms=10_000)
    login(a, mech, "alice", "alice-secret")
    step = login(a, mech, "bob", "bob-secret", now=5_000)
    assert step.close and not step.done and step.response["error_code"] == SASL_AUTHENTICATION_FAILED
    assert "bob-secret" not in step.response["error_message"]
    assert not a.authenticated and a.should_close


def test_reauthentication_with_another_mechanism_fails() -> None:
    a = auth(reauth_ms=10_000)
    login(a, "PLAIN", "alice", "alice-secret")
    assert a.handshake(1, "SCRAM-SHA-256", 1)["error_code"] == 0  # Kafka refuses at the next step
    step = a.authenticate(2, ScramClient("SCRAM-SHA-256", "alice", "alice-secret").first(), 1)
    assert step.close and step.response["error_code"] == SASL_AUTHENTICATION_FAILED


def test_reauthentication_needs_authenticate_v1() -> None:
    a = auth(reauth_ms=10_000)
    login(a, "PLAIN", "alice", "alice-secret", version=0)
    assert a.handshake(1, "PLAIN", 1)["error_code"] == ILLEGAL_SASL_STATE
    assert not a.should_close and a.authenticated


def test_failed_reauth_with_wrong_password_drops_the_session() -> None:
    a = auth(reauth_ms=10_000)
    login(a, "SCRAM-SHA-512", "alice", "alice-secret")
    step = login(a, "SCRAM-SHA-512", "alice", "not-it", now=1)
    assert step.close and not a.authenticated and a.principal == "User:ANONYMOUS"


def test_no_failure_message_contains_secrets() -> None:
    secret = "pa55-Secret-xyz"
    cases = []
    for mech in ALL:
        for user, pw in (("alice", secret), ("nobody", secret)):
            cases.append(login(auth(), mech, user, pw).response["error_message"])
    for msg in cases:
        assert msg and secret not in msg and "pa55" not in msg


@pytest.mark.parametrize("version", versions(17))
def test_handshake_response_shape_every_version(version: int) -> None:
    a = auth(["PLAIN", "SCRAM-SHA-256"])
    ok = on_the_wire(17, version, a.handshake(version, "PLAIN", 0))
    assert int(ok.error_code) == 0 and list(ok.mechanisms) == ["PLAIN", "SCRAM-SHA-256"]
    bad = on_the_wire(17, version, auth(["PLAIN"]).handshake(version, "SCRAM-SHA-512", 0))
    assert int(bad.error_code) == UNSUPPORTED_SASL_MECHANISM and list(bad.mechanisms) == ["PLAIN"]


@pytest.mark.parametrize("version", versions(36))
def test_authenticate_response_shape_every_version(version: int) -> None:
    a = auth(reauth_ms=30_000)
    a.handshake(1, "SCRAM-SHA-256", 0)
    cli = ScramClient("SCRAM-SHA-256", "alice", "alice-secret")
    first = a.authenticate(version, cli.first(), 0)
    wire_first = on_the_wire(36, version, first.response)
    assert int(wire_first.error_code) == 0 and wire_first.error_message is None
    final = a.authenticate(version, cli.final(bytes(wire_first.auth_bytes)), 0)
    wire_final = on_the_wire(36, version, final.response)
    cli.verify(bytes(wire_final.auth_bytes))
    if version >= 1:
        assert wire_final.session_lifetime.total_seconds() == 30
    failed = on_the_wire(36, version, login(auth(), "PLAIN", "alice", "wrong", version=version).response)
    assert int(failed.error_code) == SASL_AUTHENTICATION_FAILED and "Authentication failed" in failed.error_message


def test_versions_are_known() -> None:
    assert versions(17) == [0, 1] and versions(36) == [0, 1, 2]


# --- our client session against the authenticator, through the codec both ways ---------------


def drive(session: SaslClientSession, a: SaslAuthenticator, now: int = 0) -> None:
    req = session.handshake_request()
    assert type(req).__api_key__ == 17 and type(req).__version__ == 1
    session.handshake_response(on_the_wire(17, 1, a.handshake(1, req.mechanism, now)))
    req = session.first_authenticate_request()
    while req is not None:
        assert type(req).__api_key__ == 36 and type(req).__version__ == 2
        req = session.authenticate_response(on_the_wire(36, 2, a.authenticate(2, req.auth_bytes, now).response))


@pytest.mark.parametrize("mech", ALL)
def test_client_session_logs_in(mech: str) -> None:
    a = auth(reauth_ms=45_000)
    s = SaslClientSession(mech, "bob", "bob-secret")
    drive(s, a)
    assert s.done and s.session_lifetime_ms == 45_000 and a.principal == "User:bob"


@pytest.mark.parametrize("mech", ALL)
def test_client_session_wrong_password_raises_without_the_password(mech: str) -> None:
    s = SaslClientSession(mech, "bob", "bob-wrong-pw")
    with pytest.raises(SaslClientError) as e:
        drive(s, auth())
    assert "SASL_AUTHENTICATION_FAILED" in str(e.value) or "Authentication failed" in str(e.value)
    assert "bob-wrong-pw" not in str(e.value) and not s.done


def test_client_session_disabled_mechanism() -> None:
    s = SaslClientSession("SCRAM-SHA-512", "bob", "bob-secret")
    with pytest.raises(SaslClientError, match=r"UNSUPPORTED_SASL_MECHANISM.*PLAIN"):
        drive(s, auth(["PLAIN"]))


def test_client_session_unknown_mechanism() -> None:
    with pytest.raises(SaslClientError, match="GSSAPI"):
        SaslClientSession("GSSAPI", "a", "b")
