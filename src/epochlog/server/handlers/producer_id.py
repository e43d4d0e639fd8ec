"""InitProducerId for idempotent producers (transactions are not supported)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from epochlog.protocol.codec import RequestHeader, decode_body
from epochlog.protocol.errors import Err

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker


def handle_init_producer_id(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
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
    return _from_controller(broker.producer_ids.allocate_async)


async def _from_controller(allocate_async: Any) -> dict[str, Any]:
    """Ids come from blocks the controller hands out, so no two brokers repeat one."""
    try:
        pid = await allocate_async()
    except Exception:
        return {
            "throttle_time": 0,
            "error_code": Err.COORDINATOR_NOT_AVAILABLE,
            "producer_id": -1,
            "producer_epoch": -1,
        }
    return {"throttle_time": 0, "error_code": Err.NONE, "producer_id": pid, "producer_epoch": 0}
