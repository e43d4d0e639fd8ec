"""SCRAM-SHA-256/512 (RFC 5802, RFC 7677) as Kafka speaks it, sans-IO: each side turns the peer's
message bytes into its own next message.

Kafka's dialect: no channel binding (gs2 flag ``n`` or ``y``), no SASLprep (passwords are hashed as
their UTF-8 bytes), and the only extension it knows is ``tokenauth`` for delegation tokens, which
epochlog does not have, so every extension is refused.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable

from epochlog.security.sasl_errors import SaslAuthenticationError, SaslClientError
from epochlog.security.scram_credentials import (
    MECHANISMS,
    MIN_ITERATIONS,
    ScramCredential,
    salted_password,
)

# The texts a client can see. A missing user and a wrong password share one, so the answer does not
# tell which usernames exist.
INVALID_CREDENTIALS = "Authentication failed: Invalid user credentials"
MALFORMED = "Authentication failed: invalid SCRAM message"
CHANNEL_BINDING = "Authentication failed: channel binding is not supported"
EXTENSIONS = "Authentication failed: unsupported SCRAM extensions"
TOKEN_AUTH = "Authentication failed: delegation token authentication is not supported"
NONCE_MISMATCH = "Authentication failed: invalid client nonce in the final client message"
AUTHZID_MISMATCH = "Authentication failed: Client requested an authorization id that is different from username"
OUT_OF_ORDER = "Authentication failed: unexpected SCRAM message"

_SASLNAME = r"(?:[^=,\x00]|=2C|=3D)+"
_NONCE = r"[\x21-\x2b\x2d-\x7e]+"  # RFC 5802 'printable': visible ASCII without ','
_CLIENT_FIRST = re.compile(
    rf"(?P<gs2>(?P<flag>[ny]),(?:a=(?P<authzid>{_SASLNAME}))?,)"
    rf"(?P<bare>n=(?P<user>{_SASLNAME}),r=(?P<nonce>{_NONCE})(?P<ext>(?:,[A-Za-z]+=[^,]*)*))",
    re.DOTALL,
)
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<cbind>[A-Za-z0-9+/=]*),r=(?P<nonce>{_NONCE})(?P<ext>(?:,[A-Za-z]+=[^,]*)*)),"
    r"p=(?P<proof>[A-Za-z0-9+/=]+)",
    re.DOTALL,
)
_SERVER_FIRST = re.compile(
    rf"r=(?P<nonce>{_NONCE}),s=(?P<salt>[A-Za-z0-9+/=]+),i=(?P<iterations>[0-9]+)(?:,[A-Za-z]+=[^,]*)*", re.DOTALL
)
_SERVER_FINAL = re.compile(r"(?:v=(?P<signature>[A-Za-z0-9+/=]+)|e=(?P<error>[^,]*))(?:,[A-Za-z]+=[^,]*)*", re.DOTALL)

# Unknown users get a salt derived from this per-process key and their name: stable across attempts
# (a salt that changes per attempt would give the absence away) and unrelated to any real credential.
_FAKE_KEY = secrets.token_bytes(32)
_FAKE_ITERATIONS = MIN_ITERATIONS


def escape_username(name: str) -> str:
    """RFC 5802 saslname: '=' and ',' cannot appear raw in a message."""
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_username(saslname: str) -> str:
    if re.search(r"=(?!2C|3D)", saslname):
        raise SaslAuthenticationError(MALFORMED)
    return saslname.replace("=2C", ",").replace("=3D", "=")


def _hash_name(mechanism: str) -> str:
    if mechanism not in MECHANISMS:
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r}")
    return "sha256" if mechanism == "SCRAM-SHA-256" else "sha512"


def _hmac(hash_name: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hash_name).digest()


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def _b64decode(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise SaslAuthenticationError(MALFORMED) from None


def _text(token: bytes) -> str:
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslAuthenticationError(MALFORMED) from None


def _nonce_matches(sent: str, client_nonce: str, nonce: str) -> bool:
    """RFC 5802 wants the client-final nonce to be the server-first one. librdkafka before 2.6.1 (Debian's
    kcat among them) sends its own nonce in front of it a second time; Kafka 3.8.1 to 3.9 accept that (a
    suffix check) and Kafka 4 does not. That one form is accepted as well: it still ends with the server's
    fresh nonce, so a replayed message fails, and the proof signs the message as sent."""
    if hmac.compare_digest(sent.encode(), nonce.encode()):
        return True
    return hmac.compare_digest(sent.encode(), (client_nonce + nonce).encode())


def _new_nonce() -> str:
    return secrets.token_urlsafe(24)  # base64url: printable and never ','


def _fake_credential(mechanism: str, username: str) -> ScramCredential:
    name = _hash_name(mechanism)
    seed = f"{mechanism}\x00{username}".encode()
    salt = _hmac("sha256", _FAKE_KEY, b"salt\x00" + seed)
    stored = _hmac(name, _FAKE_KEY, b"stored\x00" + seed)
    server = _hmac(name, _FAKE_KEY, b"server\x00" + seed)
    return ScramCredential(mechanism, salt, stored, server, _FAKE_ITERATIONS)


def _check_extensions(ext: str) -> None:
    if not ext:
        return
    keys = [item.split("=", 1)[0] for item in ext.lstrip(",").split(",")]
    if "tokenauth" in keys:
        raise SaslAuthenticationError(TOKEN_AUTH)
    raise SaslAuthenticationError(EXTENSIONS)


class ScramServer:
    """One server-side exchange: client-first -> server-first, client-final -> server-final.

    ``lookup(username)`` gives the stored credential for this mechanism, or None. Any failure raises
    SaslAuthenticationError and leaves the exchange failed; a new exchange needs a new object."""

    def __init__(
        self,
        mechanism: str,
        lookup: Callable[[str], ScramCredential | None],
        server_nonce: str | None = None,  # tests inject RFC vectors; otherwise from secrets
    ) -> None:
        self.mechanism = mechanism
        self._hash = _hash_name(mechanism)
        self._lookup = lookup
        self._server_nonce = server_nonce
        self._state = "first"
        self.complete = False
        self.username: str | None = None  # set once authenticated
        self._claimed_user = ""
        self._credential: ScramCredential | None = None
        self._known = False
        self._gs2 = ""
        self._nonce = ""
        self._client_nonce = ""
        self._client_first_bare = ""
        self._server_first = ""

    def step(self, token: bytes) -> bytes:
        state, self._state = self._state, "failed"  # any exception below leaves the exchange failed
        if state == "first":
            reply = self._first(token)
            self._state = "final"
            return reply
        if state == "final":
            reply = self._final(token)
            self._state = "done"
            return reply
        raise SaslAuthenticationError(OUT_OF_ORDER)

    def _first(self, token: bytes) -> bytes:
        text = _text(token)
        if text.startswith("p="):
            raise SaslAuthenticationError(CHANNEL_BINDING)
        m = _CLIENT_FIRST.fullmatch(text)
        if m is None:
            raise SaslAuthenticationError(MALFORMED)
        _check_extensions(m["ext"])
        user = unescape_username(m["user"])
        if m["authzid"] is not None and unescape_username(m["authzid"]) != user:
            raise SaslAuthenticationError(AUTHZID_MISMATCH)
        cred = self._lookup(user)
        if cred is not None and cred.mechanism != self.mechanism:
            cred = None
        self._known = cred is not None
        self._credential = cred if cred is not None else _fake_credential(self.mechanism, user)
        self._claimed_user = user
        self._gs2 = m["gs2"]
        self._client_first_bare = m["bare"]
        self._client_nonce = m["nonce"]
        self._nonce = m["nonce"] + (self._server_nonce or _new_nonce())
        salt = base64.b64encode(self._credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={self._credential.iterations}"
        return self._server_first.encode()

    def _final(self, token: bytes) -> bytes:
        text = _text(token)
        m = _CLIENT_FINAL.fullmatch(text)
        if m is None:
            raise SaslAuthenticationError(MALFORMED)
        _check_extensions(m["ext"])
        if _b64decode(m["cbind"]) != self._gs2.encode():
            raise SaslAuthenticationError(CHANNEL_BINDING)
        if not _nonce_matches(m["nonce"], self._client_nonce, self._nonce):
            raise SaslAuthenticationError(NONCE_MISMATCH)
        proof = _b64decode(m["proof"])
        cred = self._credential
        assert cred is not None
        auth_message = f"{self._client_first_bare},{self._server_first},{m['without_proof']}".encode()
        client_signature = _hmac(self._hash, cred.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise SaslAuthenticationError(INVALID_CREDENTIALS)
        client_key = _xor(proof, client_signature)
        ok = hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), cred.stored_key)
        if not (ok and self._known):
            raise SaslAuthenticationError(INVALID_CREDENTIALS)
        self.complete = True
        self.username = self._claimed_user
        server_signature = _hmac(self._hash, cred.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)


class ScramClient:
    """Our side of an exchange: first() -> final(server_first) -> verify(server_final).

    Raises SaslClientError when the server's messages are wrong; an exchange is used once."""

    def __init__(self, mechanism: str, username: str, password: str, client_nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._hash = _hash_name(mechanism)
        self.username = username
        self._password = password
        self._nonce = client_nonce or _new_nonce()
        self._client_first_bare = f"n={escape_username(username)},r={self._nonce}"
        self._server_signature: bytes | None = None
        self.complete = False

    def first(self) -> bytes:
        return b"n,," + self._client_first_bare.encode()

    def final(self, server_first: bytes) -> bytes:
        try:
            text = server_first.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslClientError("invalid SCRAM server-first message") from None
        m = _SERVER_FIRST.fullmatch(text)
        if m is None:
            raise SaslClientError("invalid SCRAM server-first message")
        nonce = m["nonce"]
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise SaslClientError("the server's SCRAM nonce does not extend ours")
        iterations = int(m["iterations"])
        if iterations < MIN_ITERATIONS:
            raise SaslClientError(f"the server asks {iterations} SCRAM iterations, below the minimum {MIN_ITERATIONS}")
        try:
            salt = base64.b64decode(m["salt"], validate=True)
        except (binascii.Error, ValueError):
            raise SaslClientError("invalid salt in the SCRAM server-first message") from None
        salted = salted_password(self.mechanism, self._password, salt, iterations)
        client_key = _hmac(self._hash, salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        proof = _xor(client_key, _hmac(self._hash, stored_key, auth_message))
        server_key = _hmac(self._hash, salted, b"Server Key")
        self._server_signature = _hmac(self._hash, server_key, auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        if self._server_signature is None:
            raise SaslClientError("SCRAM server-final before the client-final was sent")
        m = _SERVER_FINAL.fullmatch(server_final.decode("utf-8", "replace"))
        if m is None:
            raise SaslClientError("invalid SCRAM server-final message")
        if m["error"] is not None:
            raise SaslClientError(f"the server refused SCRAM authentication: {m['error']}")
        try:
            signature = base64.b64decode(m["signature"], validate=True)
        except (binascii.Error, ValueError):
            raise SaslClientError("invalid SCRAM server signature") from None
        if not hmac.compare_digest(signature, self._server_signature):
            raise SaslClientError("the server's SCRAM signature is wrong: it does not know our credential")
        self.complete = True
