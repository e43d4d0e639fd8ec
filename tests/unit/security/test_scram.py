"""SCRAM-SHA-256/512 exchanges between our client and server, RFC 7677's test vector, and the
ways a server must refuse: wrong password, unknown user (indistinguishable), altered or replayed
client-final, channel binding, extensions, malformed messages."""

from __future__ import annotations

import base64

import pytest

from epochlog.security.sasl_errors import SaslAuthenticationError, SaslClientError
from epochlog.security.scram import (
    INVALID_CREDENTIALS,
    ScramClient,
    ScramServer,
    escape_username,
    unescape_username,
)
from epochlog.security.scram_credentials import ScramCredential, credential_from_password

pytestmark = pytest.mark.unit

MECHS = ["SCRAM-SHA-256", "SCRAM-SHA-512"]

# RFC 7677 section 3.
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def store(mech: str, users: dict[str, str]) -> dict[str, ScramCredential]:
    return {u: credential_from_password(mech, p) for u, p in users.items()}


def server(mech: str, creds: dict[str, ScramCredential], nonce: str | None = None) -> ScramServer:
    return ScramServer(mech, creds.get, server_nonce=nonce)


def run(client: ScramClient, srv: ScramServer) -> None:
    client.verify(srv.step(client.final(srv.step(client.first()))))


@pytest.mark.parametrize("mech", MECHS)
def test_full_exchange(mech: str) -> None:
    creds = store(mech, {"alice": "alice-secret", "bob": "other"})
    srv = server(mech, creds)
    cli = ScramClient(mech, "alice", "alice-secret")
    run(cli, srv)
    assert srv.complete and srv.username == "alice"
    assert cli.complete


def test_rfc7677_vector() -> None:
    cred = credential_from_password("SCRAM-SHA-256", "pencil", 4096, RFC_SALT)
    cli = ScramClient("SCRAM-SHA-256", "user", "pencil", client_nonce=RFC_CLIENT_NONCE)
    srv = ScramServer("SCRAM-SHA-256", {"user": cred}.get, server_nonce=RFC_SERVER_NONCE)
    assert cli.first() == RFC_CLIENT_FIRST
    assert srv.step(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert cli.final(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    assert srv.step(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    cli.verify(RFC_SERVER_FINAL)
    assert srv.username == "user"


def test_rfc7677_vector_with_another_password_fails() -> None:
    cred = credential_from_password("SCRAM-SHA-256", "pencil", 4096, RFC_SALT)
    cli = ScramClient("SCRAM-SHA-256", "user", "pen", client_nonce=RFC_CLIENT_NONCE)
    assert cli.final(RFC_SERVER_FIRST) != RFC_CLIENT_FINAL
    srv = ScramServer("SCRAM-SHA-256", {"user": cred}.get, server_nonce=RFC_SERVER_NONCE)
    srv.step(RFC_CLIENT_FIRST)
    with pytest.raises(SaslAuthenticationError):
        srv.step(cli.final(RFC_SERVER_FIRST))


def failure(cli: ScramClient, srv: ScramServer) -> str:
    with pytest.raises(SaslAuthenticationError) as e:
        srv.step(cli.final(srv.step(cli.first())))
    assert not srv.complete and srv.username is None
    return str(e.value)


@pytest.mark.parametrize("mech", MECHS)
def test_wrong_password_and_unknown_user_look_the_same(mech: str) -> None:
    creds = store(mech, {"alice": "alice-secret"})
    wrong = failure(ScramClient(mech, "alice", "guess"), server(mech, creds))
    unknown = failure(ScramClient(mech, "mallory", "guess"), server(mech, creds))
    assert wrong == unknown == INVALID_CREDENTIALS
    assert "guess" not in wrong and "alice" not in wrong and "mallory" not in unknown


@pytest.mark.parametrize("mech", MECHS)
def test_unknown_user_gets_a_stable_plausible_server_first(mech: str) -> None:
    creds = store(mech, {"alice": "alice-secret"})
    known = server(mech, creds).step(ScramClient(mech, "alice", "x").first()).decode()
    a = server(mech, creds).step(ScramClient(mech, "mallory", "x").first()).decode()
    b = server(mech, creds).step(ScramClient(mech, "mallory", "x").first()).decode()
    salt_of = {kv[:2]: kv[2:] for kv in a.split(",")}
    assert [kv[:2] for kv in a.split(",")] == [kv[:2] for kv in known.split(",")] == ["r=", "s=", "i="]
    assert salt_of["s="] == {kv[:2]: kv[2:] for kv in b.split(",")}["s="]  # same fake salt each time
    assert len(base64.b64decode(salt_of["s="])) == len(creds["alice"].salt)
    assert int(salt_of["i="]) == creds["alice"].iterations


def test_credential_for_another_mechanism_is_not_used() -> None:
    creds = store("SCRAM-SHA-512", {"alice": "pw"})
    msg = failure(ScramClient("SCRAM-SHA-256", "alice", "pw"), server("SCRAM-SHA-256", creds))
    assert msg == INVALID_CREDENTIALS


def test_altered_nonce_in_client_final_fails() -> None:
    creds = store("SCRAM-SHA-256", {"alice": "pw"})
    srv, cli = server("SCRAM-SHA-256", creds), ScramClient("SCRAM-SHA-256", "alice", "pw")
    final = cli.final(srv.step(cli.first()))
    head, rest = final.split(b",r=", 1)
    nonce, tail = rest.split(b",", 1)
    tampered = head + b",r=" + nonce[:-1] + (b"A" if nonce[-1:] != b"A" else b"B") + b"," + tail
    with pytest.raises(SaslAuthenticationError):
        srv.step(tampered)
    assert not srv.complete


def test_altered_proof_fails() -> None:
    creds = store("SCRAM-SHA-256", {"alice": "pw"})
    srv, cli = server("SCRAM-SHA-256", creds), ScramClient("SCRAM-SHA-256", "alice", "pw")
    final = cli.final(srv.step(cli.first()))
    head, proof = final.rsplit(b",p=", 1)
    raw = bytearray(base64.b64decode(proof))
    raw[0] ^= 1
    with pytest.raises(SaslAuthenticationError, match="Invalid user credentials"):
        srv.step(head + b",p=" + base64.b64encode(bytes(raw)))


def test_unaltered_final_passes_so_the_tamper_tests_mean_something() -> None:
    creds = store("SCRAM-SHA-256", {"alice": "pw"})
    srv, cli = server("SCRAM-SHA-256", creds), ScramClient("SCRAM-SHA-256", "alice", "pw")
    final = cli.final(srv.step(cli.first()))
    srv.step(final)
    assert srv.complete


def test_replayed_client_final_into_a_new_session_fails() -> None:
    creds = store("SCRAM-SHA-256", {"alice": "pw"})
    cli = ScramClient("SCRAM-SHA-256", "alice", "pw")
    first = cli.first()
    srv1 = server("SCRAM-SHA-256", creds)
    final = cli.final(srv1.step(first))
    srv1.step(final)
    assert srv1.complete
    # An eavesdropper replays both client messages: the new server nonce makes the final stale.
    srv2 = server("SCRAM-SHA-256", creds)
    srv2.step(first)
    with pytest.raises(SaslAuthenticationError, match="nonce"):
        srv2.step(final)
    assert not srv2.complete


def test_steps_after_completion_or_failure_are_refused() -> None:
    creds = store("SCRAM-SHA-256", {"alice": "pw"})
    srv, cli = server("SCRAM-SHA-256", creds), ScramClient("SCRAM-SHA-256", "alice", "pw")
    final = cli.final(srv.step(cli.first()))
    srv.step(final)
    with pytest.raises(SaslAuthenticationError):
        srv.step(final)
    bad = server("SCRAM-SHA-256", creds)
    with pytest.raises(SaslAuthenticationError):
        bad.step(b"garbage")
    with pytest.raises(SaslAuthenticationError):
        bad.step(cli.first())  # a failed exchange stays failed


@pytest.mark.parametrize(
    "first",
    [
        b"p=tls-server-end-point,,n=alice,r=abc",  # channel binding requested
        b"n,,n=alice,r=abc,tokenauth=true",  # delegation token: not supported
        b"n,,n=alice,r=abc,x=1",  # any other extension
        b"n,,m=ext,n=alice,r=abc",  # mandatory extension
        b"n,,n=al=ice,r=abc",  # bad saslname escape
        b"n,,n=,r=abc",  # empty name
        b"n,,r=abc",
        b"x,,n=alice,r=abc",
        b"n,,n=alice,r=a,b",
        b"n,a=bob,n=alice,r=abc",  # authzid other than the user
        b"\xff\xfe",
        b"",
    ],
)
def test_bad_client_first(first: bytes) -> None:
    srv = server("SCRAM-SHA-256", store("SCRAM-SHA-256", {"alice": "pw"}))
    with pytest.raises(SaslAuthenticationError):
        srv.step(first)


def test_gs2_y_flag_and_matching_authzid_are_accepted() -> None:
    creds = store("SCRAM-SHA-256", {"alice": "pw"})
    for gs2 in (b"y,,", b"n,a=alice,"):
        srv = server("SCRAM-SHA-256", creds)
        assert srv.step(gs2 + b"n=alice,r=abc").startswith(b"r=abc")


def test_client_final_must_echo_the_gs2_header() -> None:
    creds = store("SCRAM-SHA-256", {"alice": "pw"})
    srv, cli = server("SCRAM-SHA-256", creds), ScramClient("SCRAM-SHA-256", "alice", "pw")
    final = cli.final(srv.step(cli.first()))
    assert final.startswith(b"c=biws,")
    with pytest.raises(SaslAuthenticationError):
        srv.step(b"c=eSws," + final[len(b"c=biws,") :])  # "y,," instead of the "n,," sent first


def test_client_final_with_a_valid_proof_but_another_gs2_header_fails() -> None:
    # The proof covers client-first-bare only, so a first sent with "y,," and a final bound to
    # "n,," is consistent for the proof: only the channel-binding check can refuse it.
    creds = store("SCRAM-SHA-256", {"alice": "pw"})
    srv, cli = server("SCRAM-SHA-256", creds), ScramClient("SCRAM-SHA-256", "alice", "pw")
    first = b"y,," + cli.first()[len(b"n,,") :]
    with pytest.raises(SaslAuthenticationError, match="channel binding"):
        srv.step(cli.final(srv.step(first)))


def test_usernames_with_escaped_characters() -> None:
    name = "a,b=c"
    assert escape_username(name) == "a=2Cb=3Dc"
    assert unescape_username("a=2Cb=3Dc") == name
    creds = store("SCRAM-SHA-512", {name: "pw"})
    srv, cli = server("SCRAM-SHA-512", creds), ScramClient("SCRAM-SHA-512", name, "pw")
    assert b"n=a=2Cb=3Dc," in cli.first()
    run(cli, srv)
    assert srv.username == name


def test_client_rejects_a_wrong_server_signature() -> None:
    creds = store("SCRAM-SHA-256", {"alice": "pw"})
    srv, cli = server("SCRAM-SHA-256", creds), ScramClient("SCRAM-SHA-256", "alice", "pw")
    final_msg = srv.step(cli.final(srv.step(cli.first())))
    sig = bytearray(base64.b64decode(final_msg[2:]))
    sig[-1] ^= 0x80
    with pytest.raises(SaslClientError, match="signature"):
        cli.verify(b"v=" + base64.b64encode(bytes(sig)))
    assert not cli.complete
    with pytest.raises(SaslClientError, match="invalid-proof"):
        cli.verify(b"e=invalid-proof")


def test_client_rejects_a_server_nonce_not_extending_its_own_and_low_iterations() -> None:
    cli = ScramClient("SCRAM-SHA-256", "user", "pencil", client_nonce=RFC_CLIENT_NONCE)
    with pytest.raises(SaslClientError, match="nonce"):
        cli.final(b"r=somethingelse,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    with pytest.raises(SaslClientError, match="nonce"):
        cli.final(b"r=" + RFC_CLIENT_NONCE.encode() + b",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    with pytest.raises(SaslClientError, match="iterations"):
        cli.final(RFC_SERVER_FIRST.replace(b"i=4096", b"i=1"))


def test_unknown_mechanism() -> None:
    with pytest.raises(ValueError):
        ScramServer("SCRAM-SHA-1", {}.get)
    with pytest.raises(ValueError):
        ScramClient("SCRAM-MD5", "a", "b")


def _final_with_nonce(mech: str, password: str, client_first_bare: str, server_first: str, nonce: str) -> bytes:
    """A client-final carrying ``nonce`` with a proof that is valid for exactly that message."""
    import hashlib
    import hmac

    from epochlog.security.scram_credentials import salted_password

    attrs = dict(kv.split("=", 1) for kv in server_first.split(","))
    salted = salted_password(mech, password, base64.b64decode(attrs["s"]), int(attrs["i"]))
    name = "sha256" if mech == "SCRAM-SHA-256" else "sha512"
    client_key = hmac.new(salted, b"Client Key", name).digest()
    stored_key = hashlib.new(name, client_key).digest()
    without_proof = f"c=biws,r={nonce}"
    auth = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth, name).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


@pytest.mark.parametrize("prefix,accepted", [("client", True), ("", True), ("other", False)])
def test_librdkafka_doubled_nonce_is_the_one_other_form_accepted(prefix: str, accepted: bool) -> None:
    """librdkafka before 2.6.1 sends client nonce + server-first nonce; nothing else may precede it."""
    creds = store("SCRAM-SHA-512", {"alice": "pw"})
    srv = server("SCRAM-SHA-512", creds)
    cnonce = "Cl1entNonce-x"
    server_first = srv.step(f"n,,n=alice,r={cnonce}".encode()).decode()
    full = server_first.split(",")[0][2:]
    lead = {"client": cnonce, "": "", "other": "someoneElse"}[prefix]
    final = _final_with_nonce("SCRAM-SHA-512", "pw", f"n=alice,r={cnonce}", server_first, lead + full)
    if accepted:
        assert srv.step(final).startswith(b"v=")
    else:
        with pytest.raises(SaslAuthenticationError, match="nonce"):
            srv.step(final)
