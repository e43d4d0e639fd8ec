"""A realistic stream of page views generated on the fly: users, sessions, urls, countries, devices.

Every event has a unique `id` ("<run>-<seq>") so the output can be checked against what the producer
had acknowledged, independent of offsets. Deterministic for a given seed.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass

# Weights roughly like a global site's traffic; the aggregation shows them back.
COUNTRIES = (
    ("US", 30),
    ("IN", 12),
    ("DE", 8),
    ("GB", 8),
    ("BR", 7),
    ("FR", 6),
    ("JP", 6),
    ("CA", 5),
    ("NG", 4),
    ("AU", 4),
    ("MX", 4),
    ("KR", 3),
    ("ZA", 3),
)
PAGES = (
    ("/", 25),
    ("/search", 15),
    ("/products", 12),
    ("/products/{id}", 20),
    ("/cart", 6),
    ("/checkout", 3),
    ("/blog/{slug}", 8),
    ("/account", 4),
    ("/help", 3),
    ("/pricing", 4),
)
SLUGS = ("leader-epochs", "exactly-once", "kip-101", "compaction", "isr-explained", "spark-streaming")
DEVICES = (("mobile", 55), ("desktop", 38), ("tablet", 7))
REFERRERS = (("direct", 40), ("search", 35), ("social", 15), ("email", 10))


def _choices(pairs: tuple[tuple[str, int], ...]) -> tuple[list[str], list[int]]:
    return [p[0] for p in pairs], [p[1] for p in pairs]


@dataclass
class PageViewGenerator:
    """Page views from a population of users, each with a home country, device and a current session."""

    run_id: str
    seed: int = 7
    users: int = 5000

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._seq = 0
        c, cw = _choices(COUNTRIES)
        d, dw = _choices(DEVICES)
        self._user_country = self._rng.choices(c, cw, k=self.users)
        self._user_device = self._rng.choices(d, dw, k=self.users)
        self._pages, self._page_w = _choices(PAGES)
        self._refs, self._ref_w = _choices(REFERRERS)
        self._sessions: dict[int, int] = {}

    @property
    def produced(self) -> int:
        return self._seq

    def next(self, now_ms: int | None = None) -> tuple[str, bytes, bytes]:
        """(event id, key, JSON value); the key is the user, so a user's views stay in order in one partition."""
        rng = self._rng
        # A few heavy users and a long tail, as real traffic has.
        u = min(int(rng.paretovariate(1.2)) - 1, self.users - 1) if rng.random() < 0.3 else rng.randrange(self.users)
        if u not in self._sessions or rng.random() < 0.05:
            self._sessions[u] = rng.getrandbits(40)
        page = rng.choices(self._pages, self._page_w)[0]
        if "{id}" in page:
            page = page.replace("{id}", str(rng.randrange(1, 400)))
        elif "{slug}" in page:
            page = page.replace("{slug}", rng.choice(SLUGS))
        event_id = f"{self.run_id}-{self._seq}"
        self._seq += 1
        ts = now_ms if now_ms is not None else int(time.time() * 1000)
        user = f"u{u:05d}"
        value = {
            "id": event_id,
            "ts": ts,
            "user": user,
            "session": f"{self._sessions[u]:010x}",
            "url": page,
            "country": self._user_country[u],
            "device": self._user_device[u],
            "referrer": rng.choices(self._refs, self._ref_w)[0],
            "load_ms": int(rng.lognormvariate(5.3, 0.6)),
        }
        return event_id, user.encode(), json.dumps(value, separators=(",", ":")).encode()


# The Spark schema of the JSON value above (DDL), used by from_json.
EVENT_DDL = (
    "id string, ts long, user string, session string, url string, country string, device string, "
    "referrer string, load_ms int"
)
