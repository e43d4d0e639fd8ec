"""The cleaner's broker-level settings (Kafka's names and defaults)."""

from __future__ import annotations

from dataclasses import dataclass

from epochlog.storage.config import ConfigError

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"


@dataclass(frozen=True)
class CleanerConfig:
    enable: bool = True  # log.cleaner.enable
    threads: int = 1  # log.cleaner.threads
    backoff_ms: int = 15_000  # log.cleaner.backoff.ms: the sleep when no log needs cleaning
    io_max_bytes_per_second: float = float("inf")  # log.cleaner.io.max.bytes.per.second (Double.MAX)

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> CleanerConfig:
        def get(name: str) -> str | None:
            v = props.get(name, "").strip()
            return v or None

        enable = get("log.cleaner.enable")
        threads = get("log.cleaner.threads")
        backoff = get("log.cleaner.backoff.ms")
        rate = get("log.cleaner.io.max.bytes.per.second")
        try:
            c = cls(
                enable=cls.enable if enable is None else _bool("log.cleaner.enable", enable),
                threads=cls.threads if threads is None else int(threads),
                backoff_ms=cls.backoff_ms if backoff is None else int(backoff),
                io_max_bytes_per_second=cls.io_max_bytes_per_second if rate is None else float(rate),
            )
        except ValueError as e:
            raise ConfigError(f"log.cleaner.*: {e}") from None
        if c.threads < 0:
            raise ConfigError(f"log.cleaner.threads={c.threads} must not be negative")
        if c.backoff_ms < 0:
            raise ConfigError(f"log.cleaner.backoff.ms={c.backoff_ms} must not be negative")
        if c.io_max_bytes_per_second <= 0:
            raise ConfigError(f"log.cleaner.io.max.bytes.per.second={rate} must be positive")
        return c


def _bool(name: str, raw: str) -> bool:
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    raise ValueError(f"{name}={raw!r} must be true or false")
