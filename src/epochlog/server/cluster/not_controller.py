"""NOT_CONTROLLER answers: what a standby controller (or one that lost the leadership before a decision
committed) says to a request only the active controller may decide. Brokers then look for the active
controller and send it again (Kafka's NodeToControllerChannelManager does the same)."""

from __future__ import annotations

from typing import Any

from epochlog.protocol.errors import Err
from epochlog.server.handlers.item_errors import error_on_every_item

MESSAGE = "this controller is not the active controller"


def not_controller(key: int, version: int, req: Any) -> dict[str, Any]:
    code = Err.NOT_CONTROLLER
    if key == 62:
        return {"throttle_time": 0, "error_code": code, "broker_epoch": -1}
    if key == 63:
        return {
            "throttle_time": 0,
            "error_code": code,
            "is_caught_up": False,
            "is_fenced": True,
            "should_shut_down": False,
        }
    if key == 56:
        return {"throttle_time": 0, "error_code": code, "topics": []}
    if key == 67:
        return {"throttle_time": 0, "error_code": code, "producer_id_start": -1, "producer_id_len": 0}
    if key == 73:
        return {"throttle_time": 0, "error_code": code, "directories": []}
    if key == 43:
        return {"throttle_time": 0, "error_code": code, "replica_election_results": []}
    if key in (19, 20, 37, 33, 44, 45, 46, 30, 31, 49, 51):
        return error_on_every_item(key, version, req, code, MESSAGE)
    raise ValueError(f"api {key} has no NOT_CONTROLLER answer")
