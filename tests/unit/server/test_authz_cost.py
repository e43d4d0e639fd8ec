"""The hot paths ask the authorizer once per topic, not once per partition, and not at all without one."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from epochlog.controller.image import ClusterImage
from epochlog.protocol.codec import RequestHeader, build, request_class
from epochlog.protocol.errors import Err
from epochlog.protocol.records import build_batch
from epochlog.replication.fetch_sessions import FetchSessionCache
from epochlog.security.acl import Operation, ResourceType
from epochlog.server.handlers.fetch import handle_fetch
from epochlog.server.handlers.produce import handle_produce
from epochlog.server.metrics import BrokerMetrics
from epochlog.server.quota_enforcement import ClientQuotas
from epochlog.server.responses import Waiting

pytestmark = pytest.mark.unit

PARTITIONS = 100


class _Counting:
    """An authorizer that allows ``allowed`` and counts the questions."""

    def __init__(self, allowed: bool) -> None:
        self.allowed, self.asked = allowed, []

    def authorize(self, principal: str, host: str, op: Operation, rtype: ResourceType, name: str) -> bool:
        self.asked.append((op, rtype, name))
        return self.allowed


def _broker(authorizer: Any) -> Any:
    return SimpleNamespace(
        authorizer=authorizer,
        partition=lambda name, i: None,
        topic_name_for_id=lambda _id: None,
        config=SimpleNamespace(
            transaction_partition_verification_enable=True, fetch_max_bytes=1 << 20, replica_fetch_response_max_bytes=1
        ),
        metrics=BrokerMetrics(),
        image=SimpleNamespace(states={}, brokers={}),
        fetch_sessions=FetchSessionCache(),
        client_quotas=ClientQuotas({}, ClusterImage),
    )


def _frame(api: int, version: int, body: dict[str, Any]) -> tuple[RequestHeader, memoryview]:
    from io import BytesIO

    from kio.serial import entity_writer

    cls = request_class(api, version)
    out = BytesIO()
    entity_writer(cls)(out, build(cls, body))
    header = RequestHeader(api_key=api, api_version=version, correlation_id=1, client_id="c", size=0)
    return header, memoryview(out.getvalue())


def _run(result: Any) -> Any:
    async def run() -> Any:
        if isinstance(result, Waiting):
            return await result.coro
        return await result if asyncio.iscoroutine(result) else result

    return asyncio.run(run())


def _produce(broker: Any) -> bytes:
    batch = build_batch([(None, b"x")])
    header, frame = _frame(
        0,
        9,
        {
            "acks": 1,
            "timeout": 1000,
            "topic_data": [
                {"name": "t", "partition_data": [{"index": i, "records": batch} for i in range(PARTITIONS)]}
            ],
        },
    )
    return bytes(_run(handle_produce(broker, header, frame)))


def _codes_in(raw: bytes, version: int) -> list[int]:
    from kio.serial import entity_reader

    from epochlog.protocol.codec import response_class

    cls = response_class(0, version)
    resp, _ = entity_reader(cls)(raw[4 + 4 + 1 :], 0)
    return [int(p.error_code) for t in resp.responses for p in t.partition_responses]


@pytest.mark.parametrize("allowed", [True, False])
def test_produce_asks_once_per_topic(allowed: bool) -> None:
    az = _Counting(allowed)
    codes = _codes_in(_produce(_broker(az)), 9)
    assert az.asked == [(Operation.WRITE, ResourceType.TOPIC, "t")]
    want = Err.UNKNOWN_TOPIC_OR_PARTITION if allowed else Err.TOPIC_AUTHORIZATION_FAILED
    assert codes == [want] * PARTITIONS


def test_produce_without_an_authorizer_asks_nothing() -> None:
    assert _codes_in(_produce(_broker(None)), 9) == [Err.UNKNOWN_TOPIC_OR_PARTITION] * PARTITIONS


@pytest.mark.parametrize("allowed", [True, False])
def test_fetch_asks_once_per_topic(allowed: bool) -> None:
    az = _Counting(allowed)
    parts = [{"partition": i, "fetch_offset": 0, "partition_max_bytes": 1024} for i in range(PARTITIONS)]
    header, frame = _frame(1, 12, {"max_wait": 0, "min_bytes": 0, "topics": [{"topic": "t", "partitions": parts}]})
    _run(handle_fetch(_broker(az), header, frame))
    assert az.asked == [(Operation.READ, ResourceType.TOPIC, "t")]
