"""How a record's key, value and headers are shown: as text, or as hex when asked or when not UTF-8."""

from __future__ import annotations

FORMATS = ("text", "hex")


def show_bytes(data: bytes | None, fmt: str) -> dict[str, str | None]:
    """{"as": "text"|"hex"|"null", "data": ...}. A text request for bytes that are not UTF-8 falls back to
    hex, and says so, rather than showing replacement characters that hide what is really stored."""
    if data is None:
        return {"as": "null", "data": None}
    if fmt == "text":
        try:
            return {"as": "text", "data": data.decode("utf-8")}
        except UnicodeDecodeError:
            pass
    elif fmt != "hex":
        raise ValueError(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
    return {"as": "hex", "data": data.hex(" ")}
