"""A broker the controller refuses backs off exponentially (capped, with jitter) instead of retrying every
50 ms, and the controller logs the refusal once per principal and API per interval, not once per retry."""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import time
from types import SimpleNamespace

import pytest

from epochlog.server.cluster.backoff import ExponentialBackoff
from epochlog.server.cluster.broker_session import BrokerSession
from epochlog.server.cluster.controller_authz import ControllerAccess, controller_authorizer
from epochlog.server.cluster.controller_channel import ControllerChannel

pytestmark = pytest.mark.unit


def test_backoff_doubles_from_the_initial_pause_up_to_the_cap() -> None:
    b = ExponentialBackoff(initial_s=0.1, max_s=1.0, jitter=0)
    assert [round(b.next(), 6) for _ in range(7)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]
    b.reset()
    assert b.next() == 0.1


def test_backoff_jitter_stays_within_its_fraction_of_each_step() -> None:
    b = ExponentialBackoff(initial_s=0.1, max_s=1.0, jitter=0.2, rng=random.Random(7))
    pauses = [b.next() for _ in range(200)]
    bases = [0.1, 0.2, 0.4, 0.8] + [1.0] * 196
    assert all(base * 0.8 <= p <= base * 1.2 for p, base in zip(pauses, bases, strict=True))
    assert len({round(p, 9) for p in pauses[4:]}) > 1, "capped pauses must still be jittered"


def test_backoff_refuses_nonsense() -> None:
    with pytest.raises(ValueError):
        ExponentialBackoff(initial_s=2.0, max_s=1.0)


class _Refuser:
    """A controller whose authorizer refuses everyone: it accepts, reads the request, closes."""

    def __init__(self) -> None:
        self.times: list[float] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.times.append(time.monotonic())
        await reader.read(4)
        writer.close()


async def _register_against_refuser(seconds: float) -> list[float]:
    refuser = _Refuser()
    server = await asyncio.start_server(refuser.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    channel = ControllerChannel(1, [(100, "127.0.0.1", port)])
    broker = SimpleNamespace(
        config=SimpleNamespace(node_id=1, registered_listeners=lambda: [], broker_rack=None),
        cluster_id="c1",
        controller=channel,
    )
    session = BrokerSession(broker)  # type: ignore[arg-type]
    try:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(session.register(True), seconds)
    finally:
        channel.close()
        server.close()
        await server.wait_closed()
    return refuser.times


def test_a_refused_registration_backs_off_instead_of_retrying_every_50_ms() -> None:
    times = asyncio.run(_register_against_refuser(3.5))
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # 0.1, 0.2, 0.4, 0.8, 1.0, 1.0 s (each +-20%) fit about 7 tries in 3.5 s; every 50 ms would be about 70.
    assert 3 <= len(times) <= 10, gaps
    assert gaps[0] >= 0.07, gaps
    assert max(gaps) >= 0.6, gaps
    assert all(g <= 1.5 for g in gaps), f"the pause is capped near 1 s: {gaps}"


def test_the_controller_logs_a_refusal_once_per_interval_with_the_count_held_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    access = ControllerAccess(controller_authorizer({}), clock=lambda: now[0], refusal_log_interval_s=60)
    caplog.set_level(logging.WARNING, logger="epochlog.controller")
    for _ in range(100):  # a broker retrying for 5 s at 50 ms
        access.refused("127.0.0.1:5000", "User:mallory", 62)
        now[0] += 0.05
    assert len(caplog.records) == 1
    assert "User:mallory may not send api 62" in caplog.records[0].getMessage()
    access.refused("127.0.0.1:5000", "User:eve", 62)  # another principal is not held back by mallory's
    access.refused("127.0.0.1:5000", "User:mallory", 63)  # nor another API
    assert len(caplog.records) == 3
    now[0] = 61.0
    access.refused("127.0.0.1:5000", "User:mallory", 62)
    assert len(caplog.records) == 4
    assert "(99 more refusals since the last warning)" in caplog.records[-1].getMessage()
