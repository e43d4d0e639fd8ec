"""One SASL listener connection's authentication, sans-IO, after Kafka's SaslServerAuthenticator.

The connection feeds it SaslHandshake (17) and SaslAuthenticate (36) requests (or, after a v0
handshake, the raw size-prefixed tokens that follow) and sends back what it answers; the
authenticator says when the connection must close and who the client is. It never sleeps: Kafka
delays the close of a failed authentication (connection.failed.authentication.delay.ms), and that
delay is the connection's to apply when ``close`` is set.

Re-authentication (KIP-368): an authenticated client that used SaslAuthenticate v1+ may send
SaslHandshake and SaslAuthenticate again; the mechanism and the principal must stay the same.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from epochlog.codes import Err
from epochlog.security.plain import PlainServer
from epochlog.security.sasl_errors import (
    ILLEGAL_SASL_STATE,
    SASL_AUTHENTICATION_FAILED,
    UNSUPPORTED_SASL_MECHANISM,
    SaslAuthenticationError,
    SaslClientError,
)
from epochlog.security.scram import ScramServer
from epochlog.security.scram_credentials import MECHANISMS, ScramCredential
from epochlog.security.session import ANONYMOUS

__all__ = [
    "ILLEGAL_SASL_STATE",
    "SASL_AUTHENTICATION_FAILED",
    "SUPPORTED_MECHANISMS",
    "UNSUPPORTED_SASL_MECHANISM",
    "SaslAuthenticationError",
    "SaslAuthenticator",
    "SaslClientError",
    "SaslStep",
]

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
PRE_AUTH_APIS = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})
SUPPORTED_MECHANISMS = ("PLAIN", *MECHANISMS)
DEFAULT_MAX_RECEIVE_SIZE = 524288  # sasl.server.max.receive.size

TOO_LARGE = "Authentication failed: SASL token larger than sasl.server.max.receive.size"
REAUTH_MECHANISM = "Authentication failed: SASL mechanism changed during re-authentication"
REAUTH_PRINCIPAL = "Authentication failed: the principal changed during re-authentication"


class _Mechanism(Protocol):
    complete: bool
    username: str | None

    def step(self, token: bytes) -> bytes: ...


@dataclass
class SaslStep:
    """One SaslAuthenticate answer: ``response`` in kio field names, ``close`` after sending it,
    ``done`` once the client is authenticated (first time or re-authentication)."""

    response: dict[str, Any] = field(default_factory=dict)
    close: bool = False
    done: bool = False


# States, after Kafka's SaslState.
_HANDSHAKE = "handshake"  # waiting for SaslHandshake (ApiVersions may come first)
_AUTHENTICATE = "authenticate"  # mechanism chosen, tokens flowing
_COMPLETE = "complete"
_REAUTH_AUTHENTICATE = "reauth-authenticate"
_REAUTH_BAD_MECHANISM = "reauth-bad-mechanism"
_FAILED = "failed"


class SaslAuthenticator:
    def __init__(
        self,
        enabled_mechanisms: list[str],
        scram_lookup: Callable[[str, str], ScramCredential | None],
        plain_users: Mapping[str, str],
        reauth_ms: int = 0,
        max_receive_size: int = DEFAULT_MAX_RECEIVE_SIZE,
    ) -> None:
        unknown = [m for m in enabled_mechanisms if m not in SUPPORTED_MECHANISMS]
        if unknown:
            raise ValueError(
                f"SASL mechanisms {unknown} are not supported; epochlog has {', '.join(SUPPORTED_MECHANISMS)}"
            )
        self.enabled_mechanisms = list(enabled_mechanisms)
        self._scram_lookup = scram_lookup
        self._plain_users = plain_users
        self.reauth_ms = reauth_ms
        self.max_receive_size = max_receive_size
        self._state = _HANDSHAKE
        self._server: _Mechanism | None = None
        self._raw = False  # v0 handshake: tokens come unframed
        self._reauth_capable = False  # authenticated through SaslAuthenticate v1+
        self.mechanism: str | None = None
        self._username: str | None = None
        self.authenticated = False
        self.session_expires_at_ms: int | None = None
        self.should_close = False  # close the connection once the last answer is sent
        self.reauth_count = 0

    # -- what the connection asks -------------------------------------------------------------

    @property
    def principal(self) -> str:
        return f"User:{self._username}" if self.authenticated and self._username is not None else ANONYMOUS

    @property
    def username(self) -> str | None:
        return self._username if self.authenticated else None

    @property
    def expects_raw_tokens(self) -> bool:
        """After a v0 handshake the next frames are bare tokens, not Kafka requests."""
        return self._raw and self._state == _AUTHENTICATE

    @property
    def reauthenticating(self) -> bool:
        return self._state in (_REAUTH_AUTHENTICATE, _REAUTH_BAD_MECHANISM)

    @staticmethod
    def allowed_before_auth(api_key: int) -> bool:
        return api_key in PRE_AUTH_APIS

    def admits(self, api_key: int, now_ms: int) -> bool:
        """Whether a request with this api key may be served now; False means close the connection
        (Kafka drops a connection that sends other requests before authenticating, or any request
        but a re-authenticating SaslHandshake once its session has expired)."""
        if self._state == _FAILED:
            return False
        if not self.authenticated:
            if self._state == _AUTHENTICATE:
                return api_key == SASL_AUTHENTICATE and not self._raw
            return api_key in (API_VERSIONS, SASL_HANDSHAKE)
        if self.reauthenticating:
            return api_key == SASL_AUTHENTICATE
        if self.session_expired(now_ms):
            return api_key == SASL_HANDSHAKE
        return True

    def session_expired(self, now_ms: int) -> bool:
        return self.session_expires_at_ms is not None and now_ms >= self.session_expires_at_ms

    # -- SaslHandshake --------------------------------------------------------------------------

    def handshake(self, version: int, mechanism: str, now_ms: int) -> dict[str, Any]:
        """SaslHandshake v0-1's response (``error_code``, ``mechanisms``); check ``should_close``."""
        mechanisms = list(self.enabled_mechanisms)
        if self._state == _COMPLETE:
            return self._reauth_handshake(version, mechanism, mechanisms)
        if self._state != _HANDSHAKE:
            self._fail()
            return {"error_code": ILLEGAL_SASL_STATE, "mechanisms": mechanisms}
        if mechanism not in self.enabled_mechanisms:
            self._fail()
            return {"error_code": UNSUPPORTED_SASL_MECHANISM, "mechanisms": mechanisms}
        self.mechanism = mechanism
        self._server = self._new_server(mechanism)
        self._raw = version == 0
        self._state = _AUTHENTICATE
        return {"error_code": Err.NONE, "mechanisms": mechanisms}

    def _reauth_handshake(self, version: int, mechanism: str, mechanisms: list[str]) -> dict[str, Any]:
        if version < 1 or not self._reauth_capable:
            # Kafka's KafkaApis answers a handshake on an authenticated connection that cannot
            # re-authenticate this way and keeps the connection.
            return {"error_code": ILLEGAL_SASL_STATE, "mechanisms": mechanisms}
        if mechanism != self.mechanism:
            # Kafka answers the handshake and refuses the SaslAuthenticate that follows.
            self._state = _REAUTH_BAD_MECHANISM
            return {"error_code": Err.NONE, "mechanisms": mechanisms}
        self._server = self._new_server(mechanism)
        self._state = _REAUTH_AUTHENTICATE
        return {"error_code": Err.NONE, "mechanisms": mechanisms}

    def _new_server(self, mechanism: str) -> _Mechanism:
        if mechanism == "PLAIN":
            return PlainServer(self._plain_users)
        lookup = self._scram_lookup
        return ScramServer(mechanism, lambda user: lookup(user, mechanism))

    # -- SaslAuthenticate -----------------------------------------------------------------------

    def authenticate(self, version: int, auth_bytes: bytes, now_ms: int) -> SaslStep:
        if self._state == _COMPLETE:
            # After success Kafka's KafkaApis answers this itself and keeps the connection.
            return SaslStep(
                self._response(ILLEGAL_SASL_STATE, "SaslAuthenticate request received after successful authentication")
            )
        if self._state == _REAUTH_BAD_MECHANISM:
            return self._failure(REAUTH_MECHANISM)
        if self._state not in (_AUTHENTICATE, _REAUTH_AUTHENTICATE) or self._raw:
            self._fail()
            return SaslStep(
                self._response(ILLEGAL_SASL_STATE, "Unexpected SaslAuthenticate request in this SASL state"), close=True
            )
        try:
            challenge = self._evaluate(auth_bytes)
        except SaslAuthenticationError as e:
            return self._failure(str(e))
        server = self._server
        assert server is not None
        if not server.complete:
            return SaslStep(self._response(Err.NONE, None, challenge))
        try:
            lifetime = self._complete(now_ms, server)
        except SaslAuthenticationError as e:
            return self._failure(str(e))
        self._reauth_capable = version >= 1
        return SaslStep(self._response(Err.NONE, None, challenge, lifetime), done=True)

    def raw_token(self, token: bytes, now_ms: int) -> bytes | None:
        """A bare token after a v0 handshake: the bare reply to send size-prefixed, or None when
        authentication failed (Kafka closes without an answer). ``authenticated`` says when done."""
        if not self.expects_raw_tokens:
            self._fail()
            return None
        try:
            reply = self._evaluate(token)
            server = self._server
            assert server is not None
            if server.complete:
                self._complete(now_ms, server)
                self._raw = False
        except SaslAuthenticationError:
            self._fail()
            return None
        return reply

    def _evaluate(self, token: bytes) -> bytes:
        if len(token) > self.max_receive_size:
            raise SaslAuthenticationError(TOO_LARGE)
        assert self._server is not None
        return self._server.step(token)

    def _complete(self, now_ms: int, server: _Mechanism) -> int:
        """Finish a successful exchange; the session lifetime to report (0: no re-authentication)."""
        username = server.username
        assert username is not None
        if self.authenticated and username != self._username:
            raise SaslAuthenticationError(REAUTH_PRINCIPAL)
        if self.authenticated:
            self.reauth_count += 1
        self._username = username
        self.authenticated = True
        self._state = _COMPLETE
        self._server = None
        if self.reauth_ms > 0:
            self.session_expires_at_ms = now_ms + self.reauth_ms
            return self.reauth_ms
        self.session_expires_at_ms = None
        return 0

    def _fail(self) -> None:
        self._state = _FAILED
        self._server = None
        self.authenticated = False
        self.should_close = True

    def _failure(self, reason: str) -> SaslStep:
        self._fail()
        mech = self.mechanism or "unknown"
        message = f"{reason} (SASL mechanism {mech})"
        return SaslStep(self._response(SASL_AUTHENTICATION_FAILED, message), close=True)

    @staticmethod
    def _response(
        error_code: int, message: str | None, auth_bytes: bytes = b"", lifetime_ms: int = 0
    ) -> dict[str, Any]:
        # kio calls the field session_lifetime (a timedelta); the codec takes milliseconds as an int.
        return {
            "error_code": error_code,
            "error_message": message,
            "auth_bytes": auth_bytes,
            "session_lifetime": lifetime_ms,
            "session_lifetime_ms": lifetime_ms,
        }
