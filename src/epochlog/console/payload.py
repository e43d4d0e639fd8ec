"""How a record's key, value and headers are shown: as text, JSON, or hex (when asked, or when the bytes
are not what was asked for)."""

from __future__ import annotations

import json

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
