"""A standby controller's NOT_CONTROLLER answer to the configs APIs: one row per resource, in a body every
version encodes, so the broker's ControllerChannel sees it and moves on to the active controller."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from epochlog.protocol.api_versions import supported_range
from epochlog.protocol.codec import encode_response
from epochlog.protocol.errors import Err
from epochlog.server.cluster.controller_channel import says_not_controller
from epochlog.server.cluster.not_controller import not_controller


@pytest.mark.parametrize("key", [33, 44])
def test_not_controller_rows_encode_and_are_recognised(key: int) -> None:
    topic = SimpleNamespace(resource_type=2, resource_name="t")
    default = SimpleNamespace(resource_type=4, resource_name="")
    req = SimpleNamespace(resources=[topic, default])
    low, high = supported_range(key)  # type: ignore[misc]
    for version in range(low, high + 1):
        body = not_controller(key, version, req)
        assert [r["error_code"] for r in body["responses"]] == [Err.NOT_CONTROLLER] * 2
        assert encode_response(key, version, 1, body)
    rows = [SimpleNamespace(error_code=Err.NOT_CONTROLLER)]
    assert says_not_controller(SimpleNamespace(error_code=0, responses=rows))
