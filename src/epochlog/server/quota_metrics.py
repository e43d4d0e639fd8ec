"""Client quota metrics per quota entity, read from the quota managers at scrape time and named as
jmx_exporter spells Kafka's (kafka.server:type=Produce|Fetch|Request|ControllerMutation, user=,
client-id=): byte-rate, request-time, tokens, and the throttle time handed out (a counter of milliseconds
here, where Kafka keeps an average). Clients choose their ids, so at most MAX_CLIENT_IDS entities are shown
per quota type; the rest are summed under the client id OTHER_CLIENTS."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from epochlog.clock import now_ms
from epochlog.server.metrics import MAX_CLIENT_IDS, OTHER_CLIENTS
from epochlog.server.quota_enforcement import FETCH, PRODUCE, REQUEST

if TYPE_CHECKING:
    from epochlog.server.quota_enforcement import ClientQuotas

LABELS = ["user", "client_id"]
_TYPES = {PRODUCE: "produce", FETCH: "fetch", REQUEST: "request"}


def _bounded(values: dict[tuple[str, str], float]) -> dict[tuple[str, str], float]:
    """At most MAX_CLIENT_IDS entities, the rest summed under the client id OTHER_CLIENTS."""
    if len(values) <= MAX_CLIENT_IDS:
        return values
    kept = dict(sorted(values.items())[:MAX_CLIENT_IDS])
    rest = sum(v for k, v in values.items() if k not in kept)
    kept[("", OTHER_CLIENTS)] = kept.get(("", OTHER_CLIENTS), 0.0) + rest
    return kept


class QuotaCollector(Collector):
    def __init__(self, quotas: ClientQuotas) -> None:
        self.quotas = quotas

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        now = now_ms()
        for key, kind in _TYPES.items():
            m = self.quotas.managers[key]
            name = "request_time" if key == REQUEST else "byte_rate"
            doc = "Handler time, percent of one thread" if key == REQUEST else "Bytes per second"
            rate = GaugeMetricFamily(f"kafka_server_{kind}_{name}", f"{doc}, per quota entity", labels=LABELS)
            for tags, v in _bounded({t: r.peek(now) for t, r in list(m.rates.items())}).items():
                rate.add_metric(list(tags), v)
            yield rate
            yield self._throttle(kind, dict(m.throttle_total_ms))
        mut = self.quotas.mutations
        tokens = GaugeMetricFamily(
            "kafka_server_controllermutation_tokens", "Partition mutations left in the bucket", labels=LABELS
        )
        for tags, v in _bounded({t: b.tokens for t, b in list(mut.buckets.items())}).items():
            tokens.add_metric(list(tags), v)
        yield tokens
        yield self._throttle("controllermutation", dict(mut.throttle_total_ms))

    @staticmethod
    def _throttle(kind: str, totals: dict[tuple[str, str], int]) -> CounterMetricFamily:
        c = CounterMetricFamily(
            f"kafka_server_{kind}_throttle_time_ms", "Throttle time handed out, per quota entity", labels=LABELS
        )
        for tags, v in _bounded({t: float(ms) for t, ms in totals.items()}).items():
            c.add_metric(list(tags), v)
        return c
