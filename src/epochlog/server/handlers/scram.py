"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), KIP-554.

Credentials live in the metadata log: Describe answers from this broker's image (mechanism and
iterations only, never salts or keys); Alter is the controller's, forwarded and answered once this
broker's image shows the outcome. Describe needs the cluster DESCRIBE permission, Alter ALTER.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from epochlog.protocol.codec import RequestHeader, decode_body
from epochlog.protocol.errors import Err
from epochlog.security.acl import Operation
from epochlog.security.scram_credentials import MECHANISM_BY_CODE, MECHANISMS
from epochlog.server.authz import cluster_allowed
from epochlog.server.handlers.acls import NOT_ALLOWED
from epochlog.server.handlers.forwarding import forward
from epochlog.server.handlers.item_errors import error_on_every_item

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker


def describe(scram: dict[tuple[str, str], Any], users: list[str] | None) -> list[dict[str, Any]]:
    """One row per user asked (all users with a credential when none are named): its mechanisms and
    iterations, RESOURCE_NOT_FOUND for a user without any, DUPLICATE_RESOURCE for one named twice."""
    named: dict[str, bool] = {}  # user -> named more than once
    if not users:
        named = dict.fromkeys(sorted({u for u, _m in scram}), False)
    else:
        for u in users:
            named[u] = u in named
    rows = []
    for user, twice in named.items():
        row: dict[str, Any] = {"user": user, "error_code": Err.NONE, "error_message": None, "credential_infos": []}
        if twice:
            row.update(
                error_code=Err.DUPLICATE_RESOURCE,
                error_message=f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}",
            )
        else:
            infos = [
                {"mechanism": code, "iterations": scram[(user, mech)].iterations}
                for mech, (_h, code) in MECHANISMS.items()
                if (user, mech) in scram
            ]
            if infos:
                row["credential_infos"] = infos
            else:
                row.update(
                    error_code=Err.RESOURCE_NOT_FOUND, error_message=f"attemptToDescribeUserThatDoesNotExist: {user}"
                )
        rows.append(row)
    return rows


def handle_describe_user_scram_credentials(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = decode_body(frame, header)
    users = None if req.users is None else [u.name for u in req.users]
    if not cluster_allowed(broker, header, Operation.DESCRIBE):
        code = Err.CLUSTER_AUTHORIZATION_FAILED
        rows = [
            {"user": u, "error_code": code, "error_message": NOT_ALLOWED, "credential_infos": []}
            for u in dict.fromkeys(users or [])
        ]
        return {"throttle_time": 0, "error_code": code, "error_message": NOT_ALLOWED, "results": rows}
    rows = describe(broker.image.cluster.scram, users)
    return {"throttle_time": 0, "error_code": Err.NONE, "error_message": None, "results": rows}


def handle_alter_user_scram_credentials(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = decode_body(frame, header)
    if not cluster_allowed(broker, header, Operation.ALTER):
        return error_on_every_item(51, header.api_version, req, Err.CLUSTER_AUTHORIZATION_FAILED, NOT_ALLOWED)

    async def go() -> Any:
        resp = await forward(broker, header, req, None, True)
        ok = {str(getattr(r, "user", "")) for r in getattr(resp, "results", ()) or () if not int(r.error_code)}
        gone = [
            (d.name, MECHANISM_BY_CODE[int(d.mechanism)])
            for d in req.deletions
            if d.name in ok and int(d.mechanism) in MECHANISM_BY_CODE
        ]
        set_ = [
            ((u.name, MECHANISM_BY_CODE[int(u.mechanism)]), bytes(u.salt))
            for u in req.upsertions
            if u.name in ok and int(u.mechanism) in MECHANISM_BY_CODE
        ]

        def shown() -> bool:
            scram = broker.image.cluster.scram
            if any(key in scram for key in gone):
                return False
            return all(key in scram and scram[key].salt == salt for key, salt in set_)

        if gone or set_:
            await broker.wait_for_metadata(shown)
        return resp

    return go()
