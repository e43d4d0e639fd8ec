"""The errors of a SASL exchange, shared by the mechanisms and the per-connection authenticator."""

from __future__ import annotations

# Kafka's codes for SASL (clients/.../protocol/Errors.java); kept here so the SASL modules do not
# depend on which codes protocol.errors.Err happens to list.
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58


class SaslAuthenticationError(Exception):
    """Authentication failed. The message is sent to the client as SaslAuthenticate's error_message,
    so it is always one of a few fixed texts: never the password, a token's bytes, or whether the
    user exists."""


class SaslClientError(Exception):
    """Our side of an exchange failed: the broker refused us, or answered something a correct server
    would not (a wrong server signature)."""
