"""A single node (controller and broker, as `epochlog up` runs them) on its own event loop in a thread of
the test process, with StandardAuthorizer on, so a test can hand the authorizer ACLs directly (no ACL
API in the way) and talk to the node over 127.0.0.1 with the raw wire client."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from epochlog.client.wire import Connection
from epochlog.protocol.codec import build, request_class
from epochlog.security.acl import AclBinding, Operation, PatternType, Permission, ResourceType
from tests.broker_process import free_port

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ANONYMOUS = "User:ANONYMOUS"
BROKER_USER, BROKER_PASSWORD = "broker", "broker-Secr3t-pw"


def controller_over_sasl(data_dir: Path, controller_port: int, *users: tuple[str, str, str]) -> dict[str, str]:
    """Settings (and the formatted credential) for the node's broker to reach its controller as User:broker,
    a super user, over SCRAM: the controller listener authorizes too, and the broker's requests there must
    not depend on what a test grants User:ANONYMOUS. ``users`` are formatted with it (mechanism, name,
    password)."""
    from tests.integration.security_node import format_scram

    format_scram(data_dir, ("SCRAM-SHA-512", BROKER_USER, BROKER_PASSWORD), *users)
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{BROKER_USER}" password="{BROKER_PASSWORD}";'
    )
    return {
        "listeners": f"CONTROLLER://127.0.0.1:{controller_port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.controller.protocol": "SCRAM-SHA-512",
        "listener.name.controller.scram-sha-512.sasl.jaas.config": jaas,
        "super.users": f"User:{BROKER_USER}",
    }


def acl(
    rtype: ResourceType,
    name: str,
    op: Operation,
    perm: Permission = Permission.ALLOW,
    pattern: PatternType = PatternType.LITERAL,
    principal: str = ANONYMOUS,
    host: str = "*",
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


# Everything, for setting a test's topics up before its own ACLs replace these.
EVERYTHING = [
    acl(rtype, "*", Operation.ALL) for rtype in (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID)
] + [acl(ResourceType.CLUSTER, "kafka-cluster", Operation.ALL)]


class AuthzNode:
    def __init__(self, data_dir: Path, settings: dict[str, str] | None = None) -> None:
        from epochlog.cli.up_cmd import _build_config

        self.port = free_port()
        props = {
            "authorizer.class.name": STANDARD_AUTHORIZER,
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "true",
            **controller_over_sasl(data_dir, free_port()),
            **(settings or {}),
        }
        self.broker_config, self.controller_config = _build_config(
            None, data_dir, self.port, None, [f"{k}={v}" for k, v in props.items()]
        )
        self.loop = asyncio.new_event_loop()
        self.server: Any = None
        self._thread = threading.Thread(target=self.loop.run_forever, name="authz-node", daemon=True)
        self._conn: Connection | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def call(self, coro: Any, timeout: float = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self) -> AuthzNode:
        from epochlog.server.combined import CombinedServer

        self._thread.start()

        async def start() -> Any:
            server = CombinedServer(self.broker_config, self.controller_config)
            await server.start()
            return server

        self.server = self.call(start(), timeout=60)
        return self

    def stop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self.server is not None:
            self.call(self.server.stop(), timeout=60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    @property
    def broker(self) -> Any:
        return self.server.broker

    def set_acls(self, acls: Iterable[AclBinding]) -> None:
        """Replace every ACL (on the node's loop, between two requests)."""
        wanted = {f"acl-{i}": a for i, a in enumerate(acls)}

        async def apply() -> None:
            self.broker.authorizer.set_acls(wanted)

        self.call(apply())

    def request(self, api_key: int, version: int, body: dict[str, Any], decode: Any = None) -> Any:
        """One request over a plaintext connection (principal User:ANONYMOUS), its decoded response
        (``decode(frame, correlation_id)`` for one kio cannot read)."""
        if self._conn is None:
            self._conn = Connection("127.0.0.1", self.port, timeout=20, client_id="authz-test")
        req = build(request_class(api_key, version), body)
        if decode is not None:
            return decode(*self._conn.request_frame(req))
        return self._conn.request(req)
