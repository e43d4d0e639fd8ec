"""Request forwarding (KIP-590): the admin requests only the controller decides, sent on to it by the
broker, retried while the controller is unreachable and answered with an error on every item when it
never decides."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from epochlog.protocol.codec import RequestHeader
from epochlog.protocol.errors import Err
from epochlog.server.handlers.item_errors import error_on_every_item

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker

log = logging.getLogger("epochlog.admin")

FORWARD_RETRY_S = 0.25


async def forward(broker: Broker, header: RequestHeader, req: Any, names: list[str] | None, present: bool) -> Any:
    from epochlog.server.cluster.peer import PeerBadResponse, PeerError

    # As Kafka's forwarding does: keep trying the controller for request.timeout.ms (a controller
    # restart takes a moment), then answer REQUEST_TIMED_OUT on every item rather than drop the client.
    # An answer that cannot be read is not retried (the controller may have acted on the request):
    # UNKNOWN_SERVER_ERROR, as Kafka answers when it cannot parse the controller's response.
    deadline = time.monotonic() + broker.config.request_timeout_ms / 1000
    while True:
        try:
            resp = await broker.forward(req, timeout=max(deadline - time.monotonic(), 0.001))
            break
        except PeerBadResponse as e:
            log.warning("api %d forwarded to the controller: unreadable answer: %s", header.api_key, e)
            return unanswered(header, req, Err.UNKNOWN_SERVER_ERROR, f"unreadable answer from the controller: {e}")
        except PeerError as e:
            if time.monotonic() + FORWARD_RETRY_S >= deadline:
                log.warning("api %d forwarded to the controller failed: %s", header.api_key, e)
                return unanswered(header, req, Err.REQUEST_TIMED_OUT, f"the controller is not reachable: {e}")
            await asyncio.sleep(FORWARD_RETRY_S)
    names = _done_by_controller(resp, names) if names else names
    if names:
        # Answer once this broker's metadata shows the change, so the client's next request works.
        await broker.wait_for_topics(names, present)
    return resp


def _done_by_controller(resp: Any, names: list[str]) -> list[str]:
    """The names the controller answered without an error: a topic it refused never appears (or goes), and
    waiting for it held the answer for the full wait (found by the protocol fuzzer)."""
    rows = answer_field(resp, "topics")
    if rows is None:
        rows = answer_field(resp, "responses")
    if rows is None:
        return names
    ok = {answer_field(r, "name") for r in rows if int(answer_field(r, "error_code") or 0) == 0}
    return [n for n in names if n in ok]


def answer_field(obj: Any, key: str) -> Any:
    """A field of a forwarded answer: the controller's decoded response, or the dict a broker built."""
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def unanswered(header: RequestHeader, req: Any, code: Err, message: str) -> dict[str, Any]:
    """The answer to a forwarded admin request that the controller never decided: `code` on every item."""
    return error_on_every_item(header.api_key, header.api_version, req, code, message)
