"""The exception hierarchy that carries Kafka error codes to the wire, and the codes themselves.

Err lives in epochlog.codes (a leaf the cores may import); it is re-exported here for the wire layer.
kio's ErrorCode enum is used when encoding.
"""

from __future__ import annotations

from epochlog.codes import Err

__all__ = ["Err", "InvalidRequest", "KafkaError", "MalformedFrame", "UnsupportedVersion"]


class KafkaError(Exception):
    """An error with a Kafka error code, answered on the wire rather than crashing anything."""

    code: Err = Err.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str = "", code: Err | int | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = Err(code)


class InvalidRequest(KafkaError):
    code = Err.INVALID_REQUEST


class UnsupportedVersion(KafkaError):
    code = Err.UNSUPPORTED_VERSION


class MalformedFrame(Exception):
    """The bytes on a connection cannot be a Kafka request; the connection is closed."""
