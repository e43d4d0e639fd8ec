"""How a record's key, value and headers are shown: as text, JSON, or hex (when asked, or when the bytes
are not what was asked for); and how a group's type and a consumer-protocol group's epochs are shown."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from epochlog.client.groups import GroupDescription

FORMATS = ("text", "json", "hex")


def show_bytes(data: bytes | None, fmt: str) -> dict[str, str | None]:
    """{"as": "text"|"json"|"hex"|"null", "data": ...}. Bytes that are not UTF-8 fall back to hex, and UTF-8
    that is not JSON falls back to text, each saying so, rather than showing replacement characters or a
    parse error that hide what is really stored."""
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
    if data is None:
        return {"as": "null", "data": None}
    if fmt != "hex":
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return {"as": "hex", "data": data.hex(" ")}
        if fmt == "json":
            try:
                return {"as": "json", "data": json.dumps(json.loads(text), indent=2, ensure_ascii=False)}
            except ValueError:
                pass
        return {"as": "text", "data": text}
    return {"as": "hex", "data": data.hex(" ")}


def group_kind(group_type: str, simple: bool) -> str:
    """A group's type as the console lists it: classic, consumer (KIP-848) or share, as ListGroups v5 says;
    before v5 there is no type, and a group without a protocol type is a simple (offsets-only) one."""
    if group_type:
        return group_type
    return "simple" if simple else "classic"


def consumer_group_fields(d: GroupDescription) -> dict[str, Any]:
    """What ConsumerGroupDescribe adds to a consumer-protocol group's page: the group epoch, the epoch of
    its target assignment, the assignor, and each member's epoch and target beside what it owns."""
    return {
        "type": d.type,
        "state": d.state,
        "protocol": d.assignor,
        "group_epoch": d.group_epoch,
        "assignment_epoch": d.assignment_epoch,
        "members": [
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "host": m.host,
                "group_instance_id": m.instance_id,
                "member_epoch": m.member_epoch,
                "assignment": [{"topic": t, "partition": p} for t, p in m.assignment],
                "target_assignment": [{"topic": t, "partition": p} for t, p in m.target_assignment or ()],
            }
            for m in d.members
        ],
    }
