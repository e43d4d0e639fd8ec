"""InitProducerId: a fresh id for an idempotent producer; for a transactional one, the transaction
coordinator's answer (a bumped epoch, fencing the previous incarnation)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from epochlog.protocol.codec import RequestHeader, decode_body
from epochlog.protocol.errors import Err
from epochlog.security.acl import Operation, ResourceType
from epochlog.server import authz

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker


def handle_init_producer_id(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = decode_body(frame, header)
    if req.transactional_id is not None:
        if not authz.txn_allowed(broker, header, Operation.WRITE, req.transactional_id):
            return _refused(Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        return _transactional(broker, header, req)
    # KIP-679: an idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic.
    if not authz.cluster_allowed(broker, header, Operation.IDEMPOTENT_WRITE) and not authz.any_allowed(
        broker, header, Operation.WRITE, ResourceType.TOPIC
    ):
        return _refused(Err.CLUSTER_AUTHORIZATION_FAILED)
    # A producer that asks again with its id (KIP-360, after a fatal sequence error) gets a
    # fresh id: with no transactional state there is nothing to fence.
    return _from_controller(broker.producer_ids.allocate_async)


def _refused(code: Err) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}


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


async def _transactional(broker: Broker, header: RequestHeader, req: Any) -> dict[str, Any]:
    from epochlog.clock import now_ms
    from epochlog.server.handlers.transactions import client_error

    expected = None
    if header.api_version >= 3 and int(req.producer_id) >= 0:
        expected = (int(req.producer_id), int(req.producer_epoch))
    reply = await broker.txn.init_producer_id(
        req.transactional_id, int(req.transaction_timeout.total_seconds() * 1000), expected, now_ms()
    )
    return {
        "throttle_time": 0,
        "error_code": client_error(reply.error, header.api_version, fenced_from=4),
        "producer_id": reply.producer_id,
        "producer_epoch": reply.producer_epoch,
    }
