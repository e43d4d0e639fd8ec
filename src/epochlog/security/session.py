"""Who is on the other end of one connection, as the authorizer sees it."""

from __future__ import annotations

from dataclasses import dataclass

ANONYMOUS = "User:ANONYMOUS"


@dataclass(slots=True)
class Session:
    """A connection's principal and where it came from.

    ``authenticated`` is False on a SASL listener until SaslAuthenticate succeeds: until then the
    connection may send ApiVersions, SaslHandshake and SaslAuthenticate only. ``expires_at_ms`` is the
    KIP-368 session end (connections.max.reauth.ms), None when re-authentication is off."""

    principal: str = ANONYMOUS
    listener: str = "PLAINTEXT"
    protocol: str = "PLAINTEXT"  # PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    client_host: str = ""
    authenticated: bool = True
    mechanism: str | None = None
    expires_at_ms: int | None = None


# The session of a request that did not come over a client connection (the broker's own calls).
INTERNAL = Session(principal="User:ANONYMOUS", listener="", protocol="PLAINTEXT")
