"""DescribeClientQuotas (48) and AlterClientQuotas (49).

Quotas live in the metadata log: Describe answers from this broker's image; Alter is the controller's,
forwarded and answered once this broker's image shows the accepted changes, so that the client's next
Describe (and the broker's enforcement) sees them. As in Kafka, Describe needs DESCRIBE_CONFIGS on the
cluster and Alter ALTER_CONFIGS.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from epochlog.controller.client_quotas import DescribeError, describe, entity_key
from epochlog.protocol.codec import RequestHeader, decode_body
from epochlog.protocol.errors import Err
from epochlog.security.acl import Operation
from epochlog.server.authz import cluster_allowed
from epochlog.server.handlers.acls import NOT_ALLOWED
from epochlog.server.handlers.forwarding import forward
from epochlog.server.handlers.item_errors import error_on_every_item

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker


def describe_answer(quotas: Any, req: Any) -> dict[str, Any]:
    components = [(str(c.entity_type), int(c.match_type), c.match) for c in req.components]
    try:
        found = describe(quotas, components, bool(req.strict))
    except DescribeError as e:
        return {"throttle_time": 0, "error_code": e.code, "error_message": e.message, "entries": None}
    entries = [
        {
            "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
            "values": [{"key": k, "value": v} for k, v in sorted(values.items())],
        }
        for entity, values in found
    ]
    return {"throttle_time": 0, "error_code": Err.NONE, "error_message": None, "entries": entries}


def handle_describe_client_quotas(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = decode_body(frame, header)
    if not cluster_allowed(broker, header, Operation.DESCRIBE_CONFIGS):
        code = Err.CLUSTER_AUTHORIZATION_FAILED
        return {"throttle_time": 0, "error_code": code, "error_message": NOT_ALLOWED, "entries": None}
    return describe_answer(broker.image.cluster.client_quotas, req)


def handle_alter_client_quotas(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = decode_body(frame, header)
    if not cluster_allowed(broker, header, Operation.ALTER_CONFIGS):
        return error_on_every_item(49, header.api_version, req, Err.CLUSTER_AUTHORIZATION_FAILED, NOT_ALLOWED)

    async def go() -> Any:
        resp = await forward(broker, header, req, None, True)
        if req.validate_only:
            return resp
        ok = {
            entity_key([(str(e.entity_type), e.entity_name) for e in row.entity])
            for row in getattr(resp, "entries", ()) or ()
            if not int(row.error_code)
        }
        wanted: list[tuple[Any, str, float | None]] = []
        for entry in req.entries:
            key = entity_key([(str(e.entity_type), e.entity_name) for e in entry.entity])
            if key in ok:
                wanted.extend((key, str(op.key), None if op.remove else float(op.value)) for op in entry.ops)

        def shown() -> bool:
            quotas = broker.image.cluster.client_quotas
            return all(quotas.get(key, {}).get(k) == v for key, k, v in wanted)

        if wanted:
            await broker.wait_for_metadata(shown)
        return resp

    return go()
