"""InitProducerId for idempotent producers (transactions are not supported)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from epochlog.protocol.codec import RequestHeader, decode_body
from epochlog.protocol.errors import Err

if TYPE_CHECKING:
    from epochlog.server.broker import Broker


def handle_init_producer_id(broker: Broker, header: RequestHeader, frame: memoryview) -> dict[str, Any]:
    req = decode_body(frame, header)
    if req.transactional_id is not None:
        return {
            "throttle_time": 0,
            "error_code": Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            "producer_id": -1,
            "producer_epoch": -1,
        }
    # A producer that asks again with its id (KIP-360, after a fatal sequence error) gets a
    # fresh id: with no transactional state there is nothing to fence.
    return {
        "throttle_time": 0,
        "error_code": Err.NONE,
        "producer_id": broker.producer_ids.allocate(),
        "producer_epoch": 0,
    }
