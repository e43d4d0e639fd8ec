"""The client side of SASL for epochlog's own connections (inter-broker, CLI tools), sans-IO.

SaslHandshake v1 then SaslAuthenticate v2 requests as kio objects; the caller sends each one and
hands back the decoded response::

    session = SaslClientSession("SCRAM-SHA-256", "alice", "secret")
    resp = send(session.handshake_request())
    session.handshake_response(resp)
    request = session.first_authenticate_request()
    while request is not None:
        request = session.authenticate_response(send(request))
"""

from __future__ import annotations

from typing import Any

from kio.index import load_request_schema

from epochlog.security.plain import plain_client_token
from epochlog.security.sasl_errors import SaslClientError
from epochlog.security.scram import ScramClient
from epochlog.security.scram_credentials import MECHANISMS

HANDSHAKE_VERSION = 1
AUTHENTICATE_VERSION = 2
CLIENT_MECHANISMS = ("PLAIN", *MECHANISMS)

_ERROR_NAMES = {33: "UNSUPPORTED_SASL_MECHANISM", 34: "ILLEGAL_SASL_STATE", 58: "SASL_AUTHENTICATION_FAILED"}


def _code(value: Any) -> int:
    return int(getattr(value, "value", value))


class SaslClientSession:
    """One authentication of one connection. Raises SaslClientError on any refusal; the password
    never appears in an error."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        if mechanism not in CLIENT_MECHANISMS:
            raise SaslClientError(
                f"SASL mechanism {mechanism!r} is not supported; use one of {', '.join(CLIENT_MECHANISMS)}"
            )
        self.mechanism, self.username = mechanism, username
        self._password = password
        self._scram = ScramClient(mechanism, username, password) if mechanism != "PLAIN" else None
        self._step = "handshake"
        self.done = False
        self.session_lifetime_ms = 0  # KIP-368: re-authenticate (here: reconnect) before it runs out

    def handshake_request(self) -> Any:
        cls: Any = load_request_schema(17, HANDSHAKE_VERSION)
        return cls(mechanism=self.mechanism)

    def handshake_response(self, response: Any) -> None:
        code = _code(response.error_code)
        if code != 0:
            offered = ", ".join(response.mechanisms) or "none"
            raise SaslClientError(
                f"the broker refused SASL mechanism {self.mechanism} "
                f"({_ERROR_NAMES.get(code, code)}); it offers: {offered}"
            )
        self._step = "first"

    def first_authenticate_request(self) -> Any:
        if self._step != "first":
            raise SaslClientError("SaslAuthenticate before a successful SaslHandshake")
        if self._scram is None:
            token = plain_client_token(self.username, self._password)
            self._step = "plain-sent"
        else:
            token = self._scram.first()
            self._step = "scram-first-sent"
        return self._authenticate(token)

    def authenticate_response(self, response: Any) -> Any | None:
        """The next SaslAuthenticate request, or None once authenticated."""
        code = _code(response.error_code)
        if code != 0:
            detail = response.error_message or _ERROR_NAMES.get(code, str(code))
            raise SaslClientError(f"SASL {self.mechanism} authentication as {self.username!r} failed: {detail}")
        token = bytes(response.auth_bytes)
        if self._step == "plain-sent":
            self._finish(response)
            return None
        if self._step == "scram-first-sent":
            assert self._scram is not None
            self._step = "scram-final-sent"
            return self._authenticate(self._scram.final(token))
        if self._step == "scram-final-sent":
            assert self._scram is not None
            self._scram.verify(token)
            self._finish(response)
            return None
        raise SaslClientError(f"unexpected SaslAuthenticate response in state {self._step}")

    def _finish(self, response: Any) -> None:
        lifetime = getattr(response, "session_lifetime", None)
        if lifetime is not None:
            self.session_lifetime_ms = int(lifetime.total_seconds() * 1000)
        self._step = "done"
        self.done = True

    @staticmethod
    def _authenticate(token: bytes) -> Any:
        cls: Any = load_request_schema(36, AUTHENTICATE_VERSION)
        return cls(auth_bytes=token)
