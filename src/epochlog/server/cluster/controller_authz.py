"""What a principal needs on the controller's listener, with authorizer.class.name set there too.

Kafka's ControllerApis: the quorum's own requests and the brokers' (registration, heartbeats,
AlterPartition, metadata fetches) need CLUSTER_ACTION on the cluster; DescribeQuorum needs DESCRIBE.
Admin requests reach the controller forwarded by a broker that already checked the client's ACLs, so
on the controller they need CLUSTER_ACTION (the broker's principal) or ALTER on the cluster."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from epochlog.controller.image import ClusterImage
from epochlog.protocol.codec import RequestHeader
from epochlog.security.acl import CLUSTER_NAME, Operation, ResourceType
from epochlog.security.authorizer import StandardAuthorizer
from epochlog.security.session import INTERNAL, Session

UNCHECKED = {17, 18, 36, 60}  # the SASL exchange, ApiVersions and DescribeCluster
DESCRIBE_ONLY = {55}
FORWARDED = {19, 20, 30, 31, 33, 37, 43, 44, 45, 46, 49, 51}
# A refused broker retries its registration for as long as it runs: one warning per principal and API in
# this long, with the count of the refusals not logged since, instead of one per retry.
REFUSAL_LOG_INTERVAL_S = 60.0

log = logging.getLogger("epochlog.controller")


def controller_authorizer(props: dict[str, str]) -> StandardAuthorizer | None:
    from epochlog.server.config import authorizer_settings

    name, supers, everyone = authorizer_settings(props)
    return StandardAuthorizer(set(supers), everyone) if name else None


class ControllerAccess:
    def __init__(
        self,
        authorizer: StandardAuthorizer | None,
        clock: Callable[[], float] = time.monotonic,
        refusal_log_interval_s: float = REFUSAL_LOG_INTERVAL_S,
    ) -> None:
        self.authorizer = authorizer
        self._version = -1
        self._clock = clock
        self._log_interval = refusal_log_interval_s
        # (principal, api key) -> (when its refusal was last logged, refusals since then)
        self._refusals: dict[tuple[str, int], tuple[float, int]] = {}

    def refused(self, peer: str, principal: str, key: int) -> None:
        """Log a refused request, at most once per principal and API per interval."""
        now = self._clock()
        last = self._refusals.get((principal, key))
        if last is not None and now - last[0] < self._log_interval:
            self._refusals[(principal, key)] = (last[0], last[1] + 1)
            return
        self._refusals[(principal, key)] = (now, 0)
        since = f" ({last[1]} more refusals since the last warning)" if last is not None and last[1] else ""
        log.warning(
            "closing %s: %s may not send api %d to the controller (brokers and controllers need CLUSTER_ACTION on "
            "the cluster: name their principal in super.users, or secure the controller listener with SASL)%s",
            peer,
            principal,
            key,
            since,
        )

    def allows(self, image: ClusterImage, header: RequestHeader) -> bool:
        az = self.authorizer
        key = header.api_key
        if az is None or key in UNCHECKED:
            return True
        if image.acl_version != self._version:
            az.set_acls(image.acls)
            self._version = image.acl_version
        s: Any = header.session
        session = s if isinstance(s, Session) else INTERNAL

        def may(op: Operation) -> bool:
            return az.authorize(session.principal, session.client_host, op, ResourceType.CLUSTER, CLUSTER_NAME)

        if key in DESCRIBE_ONLY:
            return may(Operation.DESCRIBE)
        if key in FORWARDED:
            return may(Operation.CLUSTER_ACTION) or may(Operation.ALTER)
        return may(Operation.CLUSTER_ACTION)
