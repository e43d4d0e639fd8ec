"""`epochlog groups --reset-offsets`: which partitions, and the new offset of each, by kafka-consumer-groups.sh's
rules: explicit offsets (--to-offset, --shift-by) are clamped into [log start, log end]; --to-datetime and
--by-duration take the first offset at or after that time, or the log end where no record is that late;
--all-topics means every partition the group has an offset for."""

from __future__ import annotations

import datetime
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

TP = tuple[str, int]
SCENARIOS = ("to-earliest", "to-latest", "to-current", "to-offset", "shift-by", "to-datetime", "by-duration")
_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$", re.IGNORECASE)


class ResetError(Exception):
    """The reset cannot be planned (no offset to shift from, a log offset that cannot be read, bad input)."""


class Offsets(Protocol):
    def log_offsets(self, tps: list[TP], spec: str | int) -> Mapping[TP, int | None]: ...


@dataclass(frozen=True)
class Scenario:
    kind: str  # one of SCENARIOS
    value: str | None = None


def parse_topic(arg: str) -> tuple[str, list[int] | None]:
    """'orders' (every partition) or 'orders:0,2'."""
    if ":" not in arg:
        return arg, None
    topic, _, parts = arg.partition(":")
    if not topic or ":" in parts:
        raise ResetError(f"Invalid topic arg '{arg}', expected topic name and partitions")
    try:
        return topic, [int(p) for p in parts.split(",")]
    except ValueError:
        raise ResetError(f"Invalid partition specified in topic arg '{arg}'") from None


def parse_datetime(text: str) -> int:
    """'YYYY-MM-DDTHH:mm:SS.sss', with an optional zone (Z, +hh:mm); without one, this machine's local time.
    Milliseconds since the epoch."""
    try:
        dt = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise ResetError(f"Error parsing timestamp '{text}': expected YYYY-MM-DDTHH:mm:SS.sss") from None
    if dt.tzinfo is None:
        dt = dt.astimezone()  # local time, as Kafka's tool reads a time without a zone
    return int(dt.timestamp() * 1000)


def parse_duration(text: str) -> int:
    """An ISO-8601 duration 'PnDTnHnMnS' in milliseconds."""
    m = _DURATION.match(text.strip())
    if not m or not any(m.groups()):
        raise ResetError(f"Error parsing duration '{text}': expected PnDTnHnMnS")
    d, h, mi, s = (float(g) if g else 0.0 for g in m.groups())
    return int(((d * 24 + h) * 60 + mi) * 60_000 + s * 1000)


def _known(found: Mapping[TP, int | None], what: str) -> dict[TP, int]:
    missing = [f"{t}-{p}" for (t, p), o in sorted(found.items()) if o is None or o < 0]
    if missing:
        raise ResetError(f"Error getting {what} offset of topic partition: {', '.join(missing)}")
    return {tp: int(o) for tp, o in found.items() if o is not None}


def clamp(requested: Mapping[TP, int], starts: Mapping[TP, int | None], ends: Mapping[TP, int | None]) -> dict[TP, int]:
    """An offset past the log end becomes the log end; one before the log start becomes the log start."""
    out = {}
    for tp, o in requested.items():
        end, start = ends.get(tp), starts.get(tp)
        if end is not None and end >= 0 and o > end:
            o = end
        elif start is not None and start >= 0 and o < start:
            o = start
        out[tp] = o
    return out


def plan(
    client: Offsets, partitions: list[TP], scenario: Scenario, committed: Mapping[TP, int], now_ms: int | None = None
) -> dict[TP, int]:
    """The new committed offset of each partition."""
    tps = sorted(set(partitions))
    kind = scenario.kind
    if kind in ("to-earliest", "to-latest"):
        return _known(client.log_offsets(tps, kind[3:]), "starting" if kind == "to-earliest" else "ending")
    if kind == "to-current":
        without = [tp for tp in tps if tp not in committed]
        ends = _known(client.log_offsets(without, "latest"), "ending") if without else {}
        return {tp: committed[tp] if tp in committed else ends[tp] for tp in tps}
    if kind in ("to-offset", "shift-by"):
        try:
            n = int(scenario.value or "")
        except ValueError:
            raise ResetError(f"--{kind} needs a number, not {scenario.value!r}") from None
        if kind == "to-offset":
            requested = dict.fromkeys(tps, n)
        else:
            lacking = [f"{t}-{p}" for t, p in tps if (t, p) not in committed]
            if lacking:
                raise ResetError(
                    f"Cannot shift offset for partition {', '.join(lacking)} since there is no current committed offset"
                )
            requested = {tp: committed[tp] + n for tp in tps}
        return clamp(requested, client.log_offsets(tps, "earliest"), client.log_offsets(tps, "latest"))
    if kind in ("to-datetime", "by-duration"):
        value = scenario.value or ""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        ts = parse_datetime(value) if kind == "to-datetime" else now - parse_duration(value)
        found = dict(client.log_offsets(tps, ts))
        # No record that late: the log end, as Kafka's tool falls back to (it warns about each).
        late = [tp for tp, o in found.items() if o is not None and o < 0]
        if late:
            found.update(client.log_offsets(late, "latest"))
        return _known(found, "timestamp")
    raise ResetError(f"--reset-offsets needs one of: {', '.join('--' + s for s in SCENARIOS)}")
