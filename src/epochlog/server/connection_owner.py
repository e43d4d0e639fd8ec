"""What a client connection needs of the process that accepted it: the broker, or the controller's listener.

Both implement this Protocol explicitly, so a connection never has to probe its owner for what it has."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from epochlog.protocol.codec import RequestHeader
    from epochlog.security.scram_credentials import ScramCredential
    from epochlog.server.connection import KafkaConnection
    from epochlog.server.limits import ConnectionLimits


class RequestSizeConfig(Protocol):
    @property
    def socket_request_max_bytes(self) -> int: ...


class ConnectionOwner(Protocol):
    @property
    def config(self) -> RequestSizeConfig: ...

    @property
    def connections(self) -> set[KafkaConnection]: ...

    @property
    def limits(self) -> ConnectionLimits | None:
        """max.connections and the request memory pool; None where nothing is limited (the controller)."""

    def observe_request(self, request: str, started: float) -> None:
        """A request answered (its name, and time.monotonic() when it arrived): Kafka's TotalTimeMs."""

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        """The stored credential a SASL/SCRAM exchange on this owner's listeners checks against."""

    def on_connection_lost(self, conn: KafkaConnection) -> None: ...

    def is_supported(self, api_key: int, version: int) -> bool:
        """Whether this owner serves this version of this API (others close the connection)."""

    def dispatch_from(self, conn: KafkaConnection, header: RequestHeader, frame: memoryview) -> Any:
        """The answer to one request: a response body, a coroutine, Waiting or NO_RESPONSE."""
