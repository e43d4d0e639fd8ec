"""What `epochlog groups` prints, as kafka-consumer-groups.sh prints it: the same columns, their order and
widths, '-' for a value not known, and the same notices. Pure functions over client/groups.py's
descriptions, so the layouts are unit tested without a cluster."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from epochlog.client.groups import CONSUMER, SHARE, GroupDescription, GroupListing

TP = tuple[str, int]
MISSING = "-"
_TYPE_SHOWN = {"classic": "Classic", "consumer": "Consumer", "share": "Share"}


def _pad(values: list[str], widths: list[int]) -> str:
    """Kafka's %-Ns columns, each followed by one space; the last column unpadded."""
    cells = [v.ljust(w) for v, w in zip(values[:-1], widths, strict=False)] + values[-1:]
    return " ".join(cells).rstrip()


def show_type(t: str) -> str:
    return _TYPE_SHOWN.get(t, "Unknown")


# -- --list ----------------------------------------------------------------------------------------------------
def list_output(groups: list[GroupListing], with_type: bool, with_state: bool) -> str:
    """Bare group ids, or with --type / --state a GROUP column (the longest id + 10) and 20-wide columns."""
    if not with_type and not with_state:
        return "\n".join(g.group_id for g in groups)
    group_w = max([15, *(len(g.group_id) for g in groups)]) + 10
    header = ["GROUP"] + (["TYPE"] if with_type else []) + (["STATE"] if with_state else [])
    widths = [group_w] + [20] * (len(header) - 1)
    lines = [_pad([*header, ""], widths)]
    for g in groups:
        row = [g.group_id] + ([show_type(g.type)] if with_type else []) + ([g.state] if with_state else [])
        lines.append(_pad([*row, ""], widths))
    return "\n".join(lines)


# -- the notice before a group's rows ------------------------------------------------------------------------
def notice(d: GroupDescription, rows: int | None) -> tuple[str | None, bool, bool]:
    """(message, is_error, print_rows) as kafka-consumer-groups.sh (kafka-share-groups.sh for a share group)
    decides: a missing group is an error, an empty one has no active members, one between assignments is
    rebalancing; rows follow only for a group that exists and has some."""
    kind = "Share" if d.type == SHARE else "Consumer"
    if rows is None or not d.exists:
        return f"{kind} group '{d.group_id}' does not exist.", True, False
    if d.state == "Empty":
        return f"{kind} group '{d.group_id}' has no active members.", False, rows > 0
    if d.state in ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"):
        return f"Warning: {kind} group '{d.group_id}' is rebalancing.", False, rows > 0
    return None, False, rows > 0


# -- --describe --offsets ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OffsetRow:
    group: str
    topic: str | None
    partition: int | None
    offset: int | None
    end: int | None
    consumer_id: str
    host: str
    client_id: str

    @property
    def lag(self) -> int | None:
        """Kafka's lag: the log end offset minus the committed offset, unknown without either."""
        if self.offset is None or self.offset == -1 or self.end is None:
            return None
        return self.end - self.offset


def offset_rows(d: GroupDescription, committed: Mapping[TP, int], ends: Mapping[TP, int | None]) -> list[OffsetRow]:
    """A row per partition a member owns (members with the most partitions first, each member's by
    partition number), then a row per partition with a committed offset that no member owns."""
    rows: list[OffsetRow] = []
    owned: set[TP] = set()
    members = sorted((m for m in d.members if m.assignment), key=lambda m: -len(m.assignment))
    for m in members:
        for t, p in sorted(m.assignment, key=lambda tp: tp[1]):
            owned.add((t, p))
            rows.append(
                OffsetRow(d.group_id, t, p, committed.get((t, p)), ends.get((t, p)), m.member_id, m.host, m.client_id)
            )
    for t, p in sorted(tp for tp in committed if tp not in owned):
        rows.append(OffsetRow(d.group_id, t, p, committed[(t, p)], ends.get((t, p)), MISSING, MISSING, MISSING))
    return rows


def _opt(v: object) -> str:
    return MISSING if v is None else str(v)


def offsets_table(rows: list[OffsetRow]) -> str:
    headers = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST"]
    widths = [
        max([15, *(len(r.group) for r in rows)]),
        max([15, *(len(_opt(r.topic)) for r in rows)]),
        10,
        15,
        15,
        15,
        max([15, *(len(r.consumer_id) for r in rows)]),
        max([15, *(len(r.host) for r in rows)]),
    ]
    lines = [_pad([*headers, "CLIENT-ID"], widths)]
    for r in rows:
        values = [r.group, _opt(r.topic), _opt(r.partition), _opt(r.offset), _opt(r.end), _opt(r.lag)]
        lines.append(_pad([*values, r.consumer_id, r.host, r.client_id], widths))
    return "\n".join(lines)


# -- --describe --members --------------------------------------------------------------------------------------
def _assignment(tps: tuple[TP, ...] | None) -> str:
    """topic(0,1), other(2) — Kafka's verbose ASSIGNMENT; '-' for none."""
    if not tps:
        return MISSING
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    return ", ".join(f"{t}({','.join(str(p) for p in sorted(ps))})" for t, ps in sorted(by_topic.items()))


def members_table(d: GroupDescription, verbose: bool) -> str:
    """GROUP CONSUMER-ID [GROUP-INSTANCE-ID] HOST CLIENT-ID #PARTITIONS, and with --verbose the assignment:
    for a consumer-protocol group each member's epoch and current assignment beside its target (Kafka 4)."""
    ms = list(d.members)
    with_instance = any(m.instance_id for m in ms)
    consumer = d.type == CONSUMER
    cols: list[tuple[str, int, list[str]]] = [
        ("GROUP", 15, [d.group_id for _ in ms]),
        ("CONSUMER-ID", 15, [m.member_id for m in ms]),
    ]
    if with_instance:
        cols.append(("GROUP-INSTANCE-ID", 17, [m.instance_id or "" for m in ms]))
    cols += [
        ("HOST", 15, [m.host for m in ms]),
        ("CLIENT-ID", 15, [m.client_id for m in ms]),
        ("#PARTITIONS", 15, [str(len(m.assignment)) for m in ms]),
    ]
    if verbose and consumer:
        cols += [
            ("CURRENT-EPOCH", 15, [_opt(m.member_epoch) for m in ms]),
            ("CURRENT-ASSIGNMENT", 30, [_assignment(m.assignment) for m in ms]),
            ("TARGET-EPOCH", 15, [_opt(d.assignment_epoch) for m in ms]),
            ("TARGET-ASSIGNMENT", 0, [_assignment(m.target_assignment) for m in ms]),
        ]
    elif verbose:
        cols.append(("ASSIGNMENT", 0, [_assignment(m.assignment) for m in ms]))
    else:
        cols.append(("", 0, ["" for _ in ms]))
    widths = [max([w, len(h), *(len(v) for v in vs)]) for h, w, vs in cols[:-1]]
    lines = [_pad([h for h, _, _ in cols], widths)]
    lines += [_pad([vs[i] for _, _, vs in cols], widths) for i in range(len(ms))]
    return "\n".join(lines)


# -- --describe --state --------------------------------------------------------------------------------------
def state_table(d: GroupDescription, verbose: bool) -> str:
    """GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE #MEMBERS; with --verbose a consumer-protocol group
    adds its GROUP-EPOCH and TARGET-ASSIGNMENT-EPOCH (Kafka 4). A share group has no ASSIGNMENT-STRATEGY
    column and with --verbose adds GROUP-EPOCH and ASSIGNMENT-EPOCH, as kafka-share-groups.sh prints it."""
    c = d.coordinator
    coordinator = f"{c.host}:{c.port}  ({c.id})" if c is not None else MISSING
    group_w = max(25, len(coordinator), len(d.group_id))
    if d.type == SHARE:
        headers = ["GROUP", "COORDINATOR (ID)", "STATE", "#MEMBERS"]
        values = [d.group_id, coordinator, d.state, str(len(d.members))]
        widths = [group_w, max(25, len(coordinator)), 15]
        if verbose:
            headers += ["GROUP-EPOCH", "ASSIGNMENT-EPOCH"]
            values += [_opt(d.group_epoch), _opt(d.assignment_epoch)]
            widths += [15, 15]
        return "\n".join([_pad(headers, widths), _pad(values, widths)])
    headers = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
    values = [d.group_id, coordinator, d.assignor or "", d.state, str(len(d.members))]
    widths = [group_w, max(25, len(coordinator)), 20, 15]
    if verbose and d.type == CONSUMER:
        headers += ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"]
        values += [_opt(d.group_epoch), _opt(d.assignment_epoch)]
        widths += [15, 15]
    return "\n".join([_pad(headers, widths), _pad(values, widths)])


# -- --reset-offsets, --delete-offsets -------------------------------------------------------------------------
def reset_table(plans: Mapping[str, Mapping[TP, int]]) -> str:
    """GROUP TOPIC PARTITION NEW-OFFSET, a row per partition to reset; nothing when there is none."""
    if not plans:
        return ""
    widths = [30, 30, 10]
    lines = [_pad(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], widths)]
    for group, plan in plans.items():
        for (t, p), o in sorted(plan.items()):
            lines.append(_pad([group, t, str(p), str(o)], widths))
    return "\n".join(lines)


def delete_offsets_table(rows: Mapping[TP, str | None]) -> str:
    widths = [30, 15]
    lines = [_pad(["TOPIC", "PARTITION", "STATUS"], widths)]
    for (t, p), err in sorted(rows.items()):
        lines.append(_pad([t, str(p) if p >= 0 else "Not Provided", f"Error: {err}" if err else "Successful"], widths))
    return "\n".join(lines)


# -- kafka-share-groups.sh --describe --offsets, --delete-offsets ------------------------------------------------
def share_offsets_table(group: str, rows: Mapping[TP, tuple[int | None, int | None, int | None]]) -> str:
    """GROUP TOPIC PARTITION LEADER-EPOCH START-OFFSET LAG, a row per (topic, partition): (leader epoch, start
    offset, lag), '-' for one not known (a partition a member is assigned that the group never consumed)."""
    widths = [max([15, len(group)]), max([15, *(len(t) for t, _p in rows)]), 10, 15, 15]
    lines = [_pad(["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG"], widths)]
    for (t, p), (epoch, start, lag) in sorted(rows.items()):
        shown = [None if v is None or v < 0 else v for v in (epoch, start, lag)]
        lines.append(_pad([group, t, str(p), *map(_opt, shown)], widths))
    return "\n".join(lines)


def delete_share_offsets_table(rows: Mapping[str, str | None]) -> str:
    widths = [30]
    lines = [_pad(["TOPIC", "STATUS"], widths)]
    for t, err in sorted(rows.items()):
        lines.append(_pad([t, f"Error: {err}" if err else "Successful"], widths))
    return "\n".join(lines)
