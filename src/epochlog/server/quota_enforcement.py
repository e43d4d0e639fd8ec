"""Carrying out client quotas on the broker (the decisions are quotas/core.py's): produce bytes and fetch
response bytes are recorded against the client's quota, the throttle time goes into the response's
throttle_time_ms, and the connection is muted (not read) for that long (KIP-219), so a client that ignores
the hint is held back all the same. The quotas come from the metadata image; `quota.window.num` and
`quota.window.size.seconds` from the broker's properties."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from epochlog.clock import now_ms
from epochlog.config_error import ConfigError
from epochlog.quotas.core import DEFAULT_WINDOW_NUM, QuotaManager
from epochlog.quotas.mutations import Decision, MutationQuotas, strict

PRODUCE, FETCH, REQUEST = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
# Never held by request_percentage: a connection must be able to set itself up (Kafka throttles neither SASL
# exchange either).
REQUEST_EXEMPT_APIS = frozenset({17, 18, 36})


def _user(session: Any) -> str:
    """Kafka's quota user: the principal's name (ANONYMOUS without authentication)."""
    principal = str(getattr(session, "principal", "") or "User:ANONYMOUS")
    return principal.split(":", 1)[1] if ":" in principal else principal


def _at_least_one(raw: dict[str, str], name: str, default: int) -> int:
    """Kafka's quota window properties: whole numbers, at least 1."""
    text = raw.get(name, str(default))
    try:
        value = int(str(text).strip())
    except ValueError:
        raise ConfigError(f"{name}={text!r}: expected a whole number") from None
    if value < 1:
        raise ConfigError(f"{name}={value}: must be at least 1")
    return value


class ClientQuotas:
    def __init__(self, raw: dict[str, str], image: Callable[[], Any]) -> None:
        self._image = image
        window_num = _at_least_one(raw, "quota.window.num", DEFAULT_WINDOW_NUM)
        window_ms = _at_least_one(raw, "quota.window.size.seconds", 1) * 1000
        self.window_ms = window_ms
        self.managers = {key: QuotaManager(key, window_num, window_ms) for key in (PRODUCE, FETCH, REQUEST)}
        self.mutations = MutationQuotas(
            _at_least_one(raw, "controller.quota.window.num", DEFAULT_WINDOW_NUM),
            _at_least_one(raw, "controller.quota.window.size.seconds", 1) * 1000,
        )
        self._version = -1

    def refresh(self, image: Any) -> None:
        """Take the image's quotas when they changed (cheap when they did not: one integer compare)."""
        if image.quota_version != self._version:
            self._version = image.quota_version
            quotas = {entity: dict(values) for entity, values in image.client_quotas.items()}
            for m in self.managers.values():
                m.update(quotas)
            self.mutations.update(quotas)

    def measuring(self, key: str) -> bool:
        """Whether any quota of this type is set: callers skip counting what nobody measures."""
        self.refresh(self._image())
        return self.managers[key].enabled

    def record(self, key: str, header: Any, value: float) -> int:
        """Record a request's bytes; the throttle time it earns (also set on the header, for the
        connection to mute itself). 0 without a quota of this type anywhere: nothing is measured."""
        self.refresh(self._image())
        m = self.managers[key]
        if not m.enabled:
            return 0
        user, client = _user(header.session), header.client_id or ""
        ms = m.record(user, client, value, now_ms())
        if ms > 0:
            m.throttled(user, client, ms)
            header.throttle_ms = max(getattr(header, "throttle_ms", 0), ms)
        return ms

    def fetch_cap(self, header: Any) -> int | None:
        """The most bytes a consumer's fetch may return under its quota (Kafka caps fetch max bytes so)."""
        self.refresh(self._image())
        m = self.managers[FETCH]
        if not m.enabled:
            return None
        cap = m.max_in_window(_user(header.session), header.client_id or "")
        return None if cap is None else max(1, int(cap))

    def admit_mutations(self, header: Any, partitions: list[int]) -> Decision | None:
        """controller_mutation_rate: which items of a CreateTopics / CreatePartitions / DeleteTopics (each the
        partitions it creates or deletes) may go to the controller; None without any such quota. The broker
        decides, as it does for authorization: the controller here does not know who asked."""
        self.refresh(self._image())
        if not self.mutations.enabled:
            return None
        user, client = _user(header.session), header.client_id or ""
        return self.mutations.admit(user, client, partitions, strict(header.api_key, header.api_version), now_ms())

    def refund_mutations(self, header: Any, partitions: int) -> None:
        if partitions > 0:
            self.mutations.refund(_user(header.session), header.client_id or "", partitions, now_ms())

    def request_throttle(self, header: Any) -> int:
        """request_percentage, checked before a request is handled: the throttle time the client's handling
        time so far earns, at most one window (Kafka bounds it so: a burst of slow requests must not lock a
        client out for long). Set on the header for the answer and the connection's mute."""
        if header.api_key in REQUEST_EXEMPT_APIS:
            return 0
        self.refresh(self._image())
        m = self.managers[REQUEST]
        if not m.enabled:
            return 0
        user, client = _user(header.session), header.client_id or ""
        ms = min(m.throttle_of(user, client, now_ms()), self.window_ms)
        if ms > 0:
            m.throttled(user, client, ms)
            header.throttle_ms = max(header.throttle_ms, ms)
        return ms

    def record_request_time(self, header: Any, seconds: float) -> None:
        """The time a request's handler took, in percent of one thread's second (Kafka's request-time)."""
        m = self.managers[REQUEST]
        if not m.enabled or header.quota_exempt or header.api_key in REQUEST_EXEMPT_APIS:
            return
        m.record(_user(header.session), header.client_id or "", seconds * 100.0, now_ms())
