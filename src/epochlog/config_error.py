"""The error for a configuration value that cannot be used. A leaf: security/ raises it while it checks
listener and TLS properties, server/ and the CLI raise and catch it, and none of them owns the others."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the property."""
