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
    # log.cleaner.dedupe.buffer.size, shared by the threads. Kafka's offset map holds 24 bytes a key
    # (MD5 + offset) filled to log.cleaner.io.buffer.load.factor (0.9); we map as many keys as it
    # would, in a dict (more bytes a key), and stop a cleaning's dirty range at a segment boundary
    # once the map is that full.
    dedupe_buffer_size: int = 134_217_728
    # epochlog.log.cleaner.process: clean in a child process (storage/cleaner/process.py) rather than
    # on the cleaner thread. Off by default: measured, it is no better on an idle machine and worse on
    # a busy one (docs/operations.md, "Log compaction").
    process: bool = False

    @property
    def max_map_entries(self) -> int:
        return max(1, int(self.dedupe_buffer_size / max(self.threads, 1) / 24 * 0.9))

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> CleanerConfig:
        def get(name: str) -> str | None:
            v = props.get(name, "").strip()
            return v or None

        enable = get("log.cleaner.enable")
        threads = get("log.cleaner.threads")
        backoff = get("log.cleaner.backoff.ms")
        rate = get("log.cleaner.io.max.bytes.per.second")
        dedupe = get("log.cleaner.dedupe.buffer.size")
        in_process = get("epochlog.log.cleaner.process")
        try:
            c = cls(
                enable=cls.enable if enable is None else _bool("log.cleaner.enable", enable),
                threads=cls.threads if threads is None else int(threads),
                backoff_ms=cls.backoff_ms if backoff is None else int(backoff),
                io_max_bytes_per_second=cls.io_max_bytes_per_second if rate is None else float(rate),
                dedupe_buffer_size=cls.dedupe_buffer_size if dedupe is None else int(dedupe),
                process=cls.process if in_process is None else _bool("epochlog.log.cleaner.process", in_process),
            )
        except ValueError as e:
            raise ConfigError(f"log.cleaner.*: {e}") from None
        if c.threads < 0:
            raise ConfigError(f"log.cleaner.threads={c.threads} must not be negative")
        if c.backoff_ms < 0:
            raise ConfigError(f"log.cleaner.backoff.ms={c.backoff_ms} must not be negative")
        if c.dedupe_buffer_size < 24:
            raise ConfigError(f"log.cleaner.dedupe.buffer.size={c.dedupe_buffer_size} is too small")
        if c.io_max_bytes_per_second <= 0:
            raise ConfigError(f"log.cleaner.io.max.bytes.per.second={rate} must be positive")
        return c


def _bool(name: str, raw: str) -> bool:
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    raise ValueError(f"{name}={raw!r} must be true or false")
