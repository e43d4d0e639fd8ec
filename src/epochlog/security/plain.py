"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer does it, and the JAAS entries brokers and clients
take their users and passwords from (``sasl.jaas.config`` / ``listener.name.<l>.plain.sasl.jaas.config``)."""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field

from epochlog.security.sasl_errors import SaslAuthenticationError

CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")

INVALID_CREDENTIALS = "Authentication failed: Invalid username or password"
MALFORMED = "Invalid SASL/PLAIN response: expected 3 tokens"
NO_USERNAME = "Authentication failed: username not specified"
NO_PASSWORD = "Authentication failed: password not specified"
AUTHZID_MISMATCH = "Authentication failed: Client requested an authorization id that is different from username"
OUT_OF_ORDER = "Authentication failed: unexpected SASL/PLAIN message"

# Compared against when the user is unknown, so a miss costs what a wrong password costs.
_NO_PASSWORD = b"\x00" * 32


@dataclass(frozen=True)
class JaasConfig:
    login_module: str
    control_flag: str
    options: dict[str, str] = field(default_factory=dict)

    def plain_users(self) -> dict[str, str]:
        """A PlainLoginModule's ``user_<name>="<password>"`` options: the broker's user table."""
        return {k[len("user_") :]: v for k, v in self.options.items() if k.startswith("user_") and len(k) > 5}


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, value) with kind 'word', 'quoted', '=' or ';'. Comments are Java's // and /* */."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise ValueError("JAAS config: unterminated /* comment")
            i = j + 2
        elif c in "=;":
            out.append((c, c))
            i += 1
        elif c == '"':
            buf = []
            i += 1
            while True:
                if i >= n:
                    raise ValueError("JAAS config: unterminated quoted value")
                c = text[i]
                if c == '"':
                    i += 1
                    break
                if c == "\\":
                    if i + 1 >= n:
                        raise ValueError("JAAS config: unterminated quoted value")
                    nxt = text[i + 1]
                    buf.append(_ESCAPES.get(nxt, nxt))
                    i += 2
                    continue
                buf.append(c)
                i += 1
            out.append(("quoted", "".join(buf)))
        else:
            j = i
            while j < n and not text[j].isspace() and text[j] not in '=;"' and not text.startswith("//", j):
                j += 1
            out.append(("word", text[i:j]))
            i = j
    return out


def parse_jaas(text: str) -> JaasConfig:
    """One JAAS entry as Kafka's ``sasl.jaas.config`` holds it:
    ``<LoginModule class> <flag> key=value key="quoted value" ... ;``"""
    toks = _tokens(text)
    if not toks:
        raise ValueError("JAAS config is empty")
    if toks[0][0] != "word":
        raise ValueError("JAAS config must start with a login module class name")
    if len(toks) < 2 or toks[1][0] != "word" or toks[1][1].lower() not in CONTROL_FLAGS:
        got = toks[1][1] if len(toks) > 1 else "nothing"
        raise ValueError(
            f"JAAS config: expected a control flag ({'|'.join(CONTROL_FLAGS)}) after the login module, got {got!r}"
        )
    module, flag = toks[0][1], toks[1][1].lower()
    options: dict[str, str] = {}
    i = 2
    while True:
        if i >= len(toks):
            raise ValueError("JAAS config must end with ';'")
        kind, value = toks[i]
        if kind == ";":
            i += 1
            break
        if kind != "word":
            raise ValueError(f"JAAS config: expected an option name, got {value!r}")
        if i + 1 >= len(toks) or toks[i + 1][0] != "=":
            raise ValueError(f"JAAS config: expected '=' after option {value!r}")
        if i + 2 >= len(toks) or toks[i + 2][0] not in ("word", "quoted"):
            raise ValueError(f"JAAS config: option {value!r} has no value")
        options[value] = toks[i + 2][1]
        i += 3
    if i != len(toks):
        raise ValueError("JAAS config holds more than one login module; Kafka takes exactly one")
    return JaasConfig(module, flag, options)


def split_token(token: bytes) -> tuple[str, str, str]:
    """``authzid NUL authcid NUL passwd`` -> its three parts; exactly two NULs."""
    parts = token.split(b"\x00")
    if len(parts) != 3:
        raise SaslAuthenticationError(MALFORMED)
    try:
        authzid, user, password = (p.decode("utf-8") for p in parts)
    except UnicodeDecodeError:
        raise SaslAuthenticationError(MALFORMED) from None
    return authzid, user, password


class PlainServer:
    """One PLAIN exchange: a single client token, an empty answer."""

    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.complete = False
        self.username: str | None = None
        self._used = False

    def step(self, token: bytes) -> bytes:
        if self._used:
            raise SaslAuthenticationError(OUT_OF_ORDER)
        self._used = True
        authzid, user, password = split_token(token)
        if not user:
            raise SaslAuthenticationError(NO_USERNAME)
        if not password:
            raise SaslAuthenticationError(NO_PASSWORD)
        if authzid and authzid != user:
            raise SaslAuthenticationError(AUTHZID_MISMATCH)
        expected = self._users.get(user)
        ok = hmac.compare_digest(
            password.encode("utf-8"), expected.encode("utf-8") if expected is not None else _NO_PASSWORD
        )
        if not ok or expected is None:
            raise SaslAuthenticationError(INVALID_CREDENTIALS)
        self.complete = True
        self.username = user
        return b""


def plain_client_token(username: str, password: str, authzid: str = "") -> bytes:
    if "\x00" in username or "\x00" in password or "\x00" in authzid:
        raise ValueError("PLAIN usernames and passwords cannot contain NUL")
    return f"{authzid}\x00{username}\x00{password}".encode()
