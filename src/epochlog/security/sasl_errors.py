"""The errors of a SASL exchange, shared by the mechanisms and the per-connection authenticator."""

from __future__ import annotations

from epochlog.protocol.errors import Err

# The SASL codes, from the one error-code module, under the names the SASL modules use.
UNSUPPORTED_SASL_MECHANISM = Err.UNSUPPORTED_SASL_MECHANISM
ILLEGAL_SASL_STATE = Err.ILLEGAL_SASL_STATE
SASL_AUTHENTICATION_FAILED = Err.SASL_AUTHENTICATION_FAILED


class SaslAuthenticationError(Exception):
    """Authentication failed. The message is sent to the client as SaslAuthenticate's error_message,
    so it is always one of a few fixed texts: never the password, a token's bytes, or whether the
    user exists."""


class SaslClientError(Exception):
    """Our side of an exchange failed: the broker refused us, or answered something a correct server
    would not (a wrong server signature)."""
