"""controller_mutation_rate on the topic changes a broker forwards (CreateTopics 19, DeleteTopics 20,
CreatePartitions 37): the items over the client's quota are answered THROTTLING_QUOTA_EXCEEDED by the broker
(strict versions) and the rest forwarded; the answer carries the throttle time and the connection is muted
for it (quotas/mutations.py decides)."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from epochlog.codes import Err
from epochlog.protocol.codec import RequestHeader
from epochlog.server.handlers.forwarding import answer_field
from epochlog.server.handlers.item_errors import error_on_every_item

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker

THROTTLED_MESSAGE = "The throttling quota has been exceeded."


@dataclass
class Held:
    """A request's items split by the quota: ``req`` keeps those that go to the controller."""

    req: Any
    refused: list[dict[str, Any]]
    throttle_ms: int
    decided: float  # time.monotonic() of the decision: the throttle time counts from it
    counts: dict[str, int]  # forwarded item name -> partitions it was charged


def _items_field(api_key: int, version: int) -> str:
    return "topic_names" if api_key == 20 and version < 6 else "topics"


def _count(broker: Broker, api_key: int, item: Any) -> tuple[str | None, int]:
    """An item's name and the partitions it would create or delete (0 when the controller will refuse it
    anyway: an unknown topic is no mutation)."""
    if api_key == 19:
        if item.assignments:
            return item.name, len(item.assignments)
        return item.name, item.num_partitions if item.num_partitions > 0 else broker.config.num_partitions
    if api_key == 37:
        info = broker.image.topics.get(item.name)
        return item.name, max(0, int(item.count) - len(info.partitions)) if info else 0
    name = item if isinstance(item, str) else item.name
    if not name and getattr(item, "topic_id", None) is not None:
        name = broker.topic_name_for_id(item.topic_id)
    info = broker.image.topics.get(name) if name else None
    return name, len(info.partitions) if info else 0


def hold(broker: Broker, header: RequestHeader, req: Any) -> Held | None:
    """Charge the request's items to the client's quota; None without one (or for validate_only, which
    changes nothing)."""
    if getattr(req, "validate_only", False):
        return None
    key, version = header.api_key, header.api_version
    items = list(getattr(req, _items_field(key, version)))
    counted = [_count(broker, key, item) for item in items]
    decision = broker.client_quotas.admit_mutations(header, [n for _, n in counted])
    if decision is None:
        return None
    kept = [i for i, ok in zip(items, decision.admitted, strict=True) if ok]
    refused_items = [i for i, ok in zip(items, decision.admitted, strict=True) if not ok]
    refused: list[dict[str, Any]] = []
    if refused_items:
        rows_req = dataclasses.replace(req, **{_items_field(key, version): tuple(refused_items)})
        rows = error_on_every_item(key, version, rows_req, Err.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MESSAGE)
        refused = next(v for k, v in rows.items() if k != "throttle_time")
    counts = {name: n for (name, n), ok in zip(counted, decision.admitted, strict=True) if ok and name is not None}
    kept_req = dataclasses.replace(req, **{_items_field(key, version): tuple(kept)})
    return Held(kept_req, refused, decision.throttle_ms, time.monotonic(), counts)


def has_items(held: Held, header: RequestHeader) -> bool:
    return bool(getattr(held.req, _items_field(header.api_key, header.api_version)))


def settle(broker: Broker, header: RequestHeader, held: Held, rows: list[Any]) -> int:
    """Give back what the controller refused, and the throttle time left for the answer (it counts from
    the decision, as Kafka deducts the time a request waited); the connection is muted for it."""
    refunded = 0
    for r in rows:
        name = answer_field(r, "name")
        if int(answer_field(r, "error_code") or 0) and name in held.counts:
            refunded += held.counts.pop(name)
    broker.client_quotas.refund_mutations(header, refunded)
    left = max(0, held.throttle_ms - int((time.monotonic() - held.decided) * 1000))
    if left:
        header.throttle_ms = max(header.throttle_ms, left)
    return left
