"""SaslHandshake and SaslAuthenticate on a listener without SASL: answered, never honoured.

On a SASL listener the connection's authenticator answers them before dispatch (connection.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from epochlog.protocol.codec import RequestHeader
from epochlog.protocol.errors import Err

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker


def sasl_on_plain_listener(header: RequestHeader) -> dict[str, Any]:
    if header.api_key == 17:
        return {"error_code": Err.ILLEGAL_SASL_STATE, "mechanisms": []}
    return {
        "error_code": Err.ILLEGAL_SASL_STATE,
        "error_message": "this listener does not use SASL",
        "auth_bytes": b"",
        "session_lifetime_ms": 0,
    }


def handle_sasl(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    return sasl_on_plain_listener(header)
