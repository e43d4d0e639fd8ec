"""The answer a broker gives to a forwarded admin request when the controller cannot be reached."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest

from epochlog.protocol.api_versions import supported_range
from epochlog.protocol.codec import RequestHeader, encode_response
from epochlog.protocol.errors import Err
from epochlog.server.handlers.forwarding import unanswered

TOPIC = SimpleNamespace(name="t", topic_id=uuid.UUID(int=7), configs=[], count=4)
REQUESTS = {
    19: SimpleNamespace(topics=[TOPIC]),
    20: SimpleNamespace(topics=[TOPIC], topic_names=["t"]),
    37: SimpleNamespace(topics=[TOPIC]),
    43: SimpleNamespace(topic_partitions=[SimpleNamespace(topic="t", partitions=[0, 1])]),
    33: SimpleNamespace(resources=[SimpleNamespace(resource_type=2, resource_name="t")]),
    44: SimpleNamespace(resources=[SimpleNamespace(resource_type=4, resource_name="")]),
    45: SimpleNamespace(topics=[SimpleNamespace(name="t", partitions=[SimpleNamespace(partition_index=0)])]),
}


def _header(key: int, version: int) -> RequestHeader:
    return RequestHeader(api_key=key, api_version=version, correlation_id=1, client_id="c", size=0)


@pytest.mark.parametrize("key", sorted(REQUESTS))
def test_every_item_carries_the_error_and_every_version_encodes(key: int) -> None:
    low, high = supported_range(key)  # type: ignore[misc]
    for version in range(low, high + 1):
        body = unanswered(_header(key, version), REQUESTS[key], Err.REQUEST_TIMED_OUT, "no controller")
        rows = body.get("topics") or body.get("responses") or body.get("results")
        if key == 43:
            rows = [r for t in body["replica_election_results"] for r in t["partition_result"]]
            assert len(rows) == 2
        if key == 45:
            rows = [p for t in body["responses"] for p in t["partitions"]]
        assert rows and all(r["error_code"] == Err.REQUEST_TIMED_OUT for r in rows)
        assert encode_response(key, version, 1, body)


def test_list_reassignments_carries_the_error_at_the_top() -> None:
    body = unanswered(_header(46, 0), SimpleNamespace(topics=None), Err.NOT_CONTROLLER, "standby")
    assert body["error_code"] == Err.NOT_CONTROLLER and body["topics"] == []
    assert encode_response(46, 0, 1, body)


def test_other_apis_are_refused() -> None:
    with pytest.raises(ValueError):
        unanswered(_header(3, 12), SimpleNamespace(), Err.REQUEST_TIMED_OUT, "x")


class _Broker:
    """Just what forward() uses: the config and a forward() that fails the way it is told."""

    def __init__(self, errors: list[Exception], timeout_ms: int = 2000) -> None:
        self.config = SimpleNamespace(request_timeout_ms=timeout_ms)
        self.errors = errors
        self.calls = 0

    async def forward(self, req: object, timeout: float) -> object:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return {"ok": True}


def test_an_unreachable_controller_is_retried_then_answered() -> None:
    import asyncio

    from epochlog.server.cluster.peer import PeerError
    from epochlog.server.handlers.forwarding import forward

    broker = _Broker([PeerError("refused"), PeerError("refused")])
    assert asyncio.run(forward(broker, _header(19, 7), REQUESTS[19], None, True)) == {"ok": True}
    assert broker.calls == 3


def test_an_unreadable_answer_is_not_retried_and_is_an_unknown_server_error() -> None:
    import asyncio

    from epochlog.server.cluster.peer import PeerBadResponse
    from epochlog.server.handlers.forwarding import forward

    broker = _Broker([PeerBadResponse("garbage")])
    body = asyncio.run(forward(broker, _header(19, 7), REQUESTS[19], None, True))
    assert broker.calls == 1
    assert [r["error_code"] for r in body["topics"]] == [Err.UNKNOWN_SERVER_ERROR]
