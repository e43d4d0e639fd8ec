"""Java .properties files (server.properties, a tool's --command-config), read into a dict. A leaf, so that
clients read their properties files without importing the broker's configuration."""

from __future__ import annotations

from pathlib import Path

from epochlog.config_error import ConfigError


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties subset: key=value or key: value, # and ! comments, trailing-backslash joins."""
    props: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        for i, ch in enumerate(line):
            if ch in "=:":
                key, value = line[:i].strip(), line[i + 1 :].strip()
                break
        else:
            key, value = line, ""
        if not key:
            raise ConfigError(f"property line without a name: {raw!r}")
        props[key] = value
    return props


def load_properties(path: Path) -> dict[str, str]:
    try:
        return parse_properties(path.read_text())
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror}") from e
