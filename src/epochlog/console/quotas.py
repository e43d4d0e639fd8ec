"""The Quotas page: client quotas as configured in the metadata log (DescribeClientQuotas, API 48) beside what
each broker measures for them (its Prometheus quota metrics, named as jmx_exporter spells Kafka's
kafka.server:type=Produce|Fetch|Request|ControllerMutation with user= and client-id= tags).

A broker measures a client under the tags of the quota entity that applies to it, by Kafka's precedence:
(user, client id) when the quota is on a user and client id (or a default of either), (user, "") when on a
user alone, ("", client id) when on a client id alone. So measured tags name an entity of one shape, either
configured itself or covered by a default (a client throttled by the default client-id quota is measured
under its own client id). Every such entity gets a row, with each quota that applies to it and the entity
it comes from. Quotas hold per broker, so the live figures stay per broker.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from epochlog.client.configs import ConfigsError
from epochlog.client.quotas import describe_on
from epochlog.client.wire import Connection, WireError
from epochlog.console.broker_metrics import EndpointError, MetricsEndpoints
from epochlog.console.metadata import ClusterMetadata, MetadataClient

Entity = tuple[tuple[str, str | None], ...]  # (type, name) pairs sorted by type; a name of None is the default
Tags = tuple[str, str]  # (user, client id) as a broker's metrics label them, "" for a part not in the entity
USER, CLIENT_ID, IP = "user", "client-id", "ip"
QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
# Prometheus family -> field of a row's live figures. Byte rates and request time are the broker's own
# windowed rates (gauges); throttle times are counters of milliseconds handed out since the broker started.
METRICS = {
    "kafka_server_produce_byte_rate": "produce_byte_rate",
    "kafka_server_fetch_byte_rate": "fetch_byte_rate",
    "kafka_server_request_request_time": "request_time",
    "kafka_server_produce_throttle_time_ms": "produce_throttle_ms",
    "kafka_server_fetch_throttle_time_ms": "fetch_throttle_ms",
    "kafka_server_request_throttle_time_ms": "request_throttle_ms",
    "kafka_server_controllermutation_throttle_time_ms": "mutation_throttle_ms",
}
THROTTLE_FIELDS = ("produce_throttle_ms", "fetch_throttle_ms", "request_throttle_ms", "mutation_throttle_ms")


def quota_metrics_of(text: str) -> dict[Tags, dict[str, float]]:
    """{(user, client id): {field: value}} from one broker's Prometheus page (pure, for tests)."""
    out: dict[Tags, dict[str, float]] = {}
    for fam in text_string_to_metric_families(text):
        field = METRICS.get(fam.name)
        if field is None:
            continue
        for s in fam.samples:
            if s.name.endswith("_created"):
                continue
            tags = (s.labels.get("user", ""), s.labels.get("client_id", ""))
            out.setdefault(tags, {})[field] = s.value
    return out


def entity_of(tags: Tags) -> Entity:
    """The entity whose shape measured tags have (quotas/core.py's resolve gives a part "" when the quota
    applying is not on it). A client with an empty client id under a client-id quota has ("", "")."""
    user, client = tags
    if not user:
        return ((CLIENT_ID, client),)
    return ((CLIENT_ID, client), (USER, user)) if client else ((USER, user),)


def _candidates(entity: Entity) -> list[Entity]:
    """The configured entities whose quotas a client measured as ``entity`` gets, first match winning: the
    part of Kafka's precedence that keeps the shape (user+client id, user+default client, default
    user+client id, default user+default client; user, default user; client id, default client). An entity
    naming a default is a configuration, not a client: only its own quotas apply to it."""
    names = dict(entity)
    if any(n is None for n in names.values()) or IP in names:
        return [entity]
    user, client = names.get(USER), names.get(CLIENT_ID)
    if user is not None and client is not None:
        pairs = [(user, client), (user, None), (None, client), (None, None)]
        return [((CLIENT_ID, c), (USER, u)) for u, c in pairs]
    if user is not None:
        return [((USER, user),), ((USER, None),)]
    return [((CLIENT_ID, client),), ((CLIENT_ID, None),)]


def entity_name(entity: Entity) -> str:
    """`user=alice, client-id=<default>`: user first, as kafka-configs.sh names them."""
    order = {USER: 0, CLIENT_ID: 1, IP: 2}
    parts = sorted(entity, key=lambda p: order.get(p[0], 3))
    return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in parts)


def _sum(per_broker: dict[str, dict[str, float]]) -> dict[str, float]:
    total: dict[str, float] = {}
    for figures in per_broker.values():
        for k, v in figures.items():
            total[k] = total.get(k, 0.0) + v
    total["throttle_ms"] = sum(total.get(k, 0.0) for k in THROTTLE_FIELDS)
    return total


def quota_rows(
    configured: list[tuple[Entity, dict[str, float]]], measured: dict[int, dict[Tags, dict[str, float]]]
) -> dict[str, Any]:
    """The page's rows from DescribeClientQuotas' entities and each broker's quota metrics (pure, for
    tests): every configured client entity and every measured one, with its own quotas ("configured"),
    those that apply to it and where each comes from ("applied"), and its live figures per broker and
    summed. IP entities (connection_creation_rate) are listed apart: no metric is kept per IP."""
    quotas = {tuple(sorted(e, key=lambda p: p[0])): v for e, v in configured}
    per_entity: dict[Entity, dict[str, dict[str, float]]] = {e: {} for e in quotas if IP not in dict(e)}
    for broker, by_tags in measured.items():
        for tags, figures in by_tags.items():
            per_entity.setdefault(entity_of(tags), {})[str(broker)] = dict(figures)
    rows: list[dict[str, Any]] = []
    for entity, per_broker in per_entity.items():
        applied: dict[str, dict[str, Any]] = {}
        for cand in _candidates(entity):
            for k, v in quotas.get(cand, {}).items():
                applied.setdefault(k, {"value": v, "from": entity_name(cand), "own": cand == entity})
        rows.append(
            {
                "entity": dict(entity),
                "name": entity_name(entity),
                "configured": dict(quotas.get(entity, {})),
                "applied": applied,
                "brokers": dict(sorted(per_broker.items(), key=lambda kv: int(kv[0]))),
                "total": _sum(per_broker) if per_broker else None,
            }
        )
    rows.sort(key=lambda r: str(r["name"]))
    ip = [
        {"entity": dict(e), "name": entity_name(e), "configured": dict(v)}
        for e, v in sorted(quotas.items(), key=lambda kv: entity_name(kv[0]))
        if IP in dict(e)
    ]
    return {"entities": rows, "ip": ip}


class QuotaReader:
    """Asks any live broker for the configured quotas and every broker's endpoint for the live figures."""

    def __init__(
        self,
        metadata: MetadataClient,
        conn: Callable[[tuple[str, int]], Connection],
        endpoints: MetricsEndpoints,
        pool: Executor,
    ) -> None:
        self.metadata, self.conn, self.endpoints, self.pool = metadata, conn, endpoints, pool

    def configured(self, md: ClusterMetadata) -> list[tuple[Entity, dict[str, float]]]:
        """Every entity with a quota (an empty filter, not strict, matches all). A refusal (ConfigsError,
        e.g. not authorized) is the cluster's answer and is raised; a broker that does not answer is
        passed over for the next."""
        last: Exception | None = None
        for b in md.brokers:
            try:
                return describe_on(self.conn((b.host, b.port)), [], strict=False)
            except WireError as e:
                last = e
        raise WireError(f"no broker answered DescribeClientQuotas: {last}")

    def measured(self, md: ClusterMetadata) -> tuple[dict[int, dict[Tags, dict[str, float]]], dict[str, str]]:
        """Each broker's quota metrics, scraped in parallel, and the endpoints that did not answer."""
        urls = {b.node_id: self.endpoints.base_url(b.node_id, b.host) for b in md.brokers}
        futs = {n: self.pool.submit(self.endpoints.metrics_text, u) for n, u in urls.items() if u is not None}
        out: dict[int, dict[Tags, dict[str, float]]] = {}
        errors: dict[str, str] = {}
        for n, f in futs.items():
            try:
                out[n] = quota_metrics_of(f.result())
            except (EndpointError, ValueError) as e:  # ValueError: a page that is not Prometheus text
                errors[str(n)] = str(e)
        return out, errors

    def view(self) -> dict[str, Any]:
        md = self.metadata.fetch([])
        error = None
        try:
            configured = self.configured(md)
        except (WireError, ConfigsError) as e:
            # The live figures are still worth showing when the quotas cannot be read.
            configured, error = [], f"{type(e).__name__}: {e}"
        measured, endpoint_errors = self.measured(md) if self.endpoints.configured else ({}, {})
        return {
            **quota_rows(configured, measured),
            "configured_error": error,
            "metrics": self.endpoints.configured,
            "endpoint_errors": endpoint_errors,
            "brokers": [b.node_id for b in md.brokers],
        }
