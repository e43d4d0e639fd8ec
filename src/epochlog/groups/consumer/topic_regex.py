"""Regex subscriptions (``SubscribedTopicRegex``), with RE2 syntax and semantics as Kafka's RE2/J has them.

The pattern must match a topic's whole name, and it never matches an internal topic. google-re2 (Google's
RE2, the engine RE2/J ports) does the matching, so the syntax is RE2's: no backreferences or look-around,
linear-time matching whatever the pattern. Two differences from RE2/J remain, both at the edges: RE2/J
compiles Java strings (UTF-16) where RE2 compiles UTF-8, which only matters for patterns that name
surrogate halves; and the error text for a bad pattern is RE2's, not Java's.

google-re2 is a dependency of the package (pyproject.toml). It is imported when first needed, so a
coordinator whose groups use no regex runs without it.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import Any, Protocol

from epochlog.groups.consumer.model import INTERNAL_TOPICS


class _Compiled(Protocol):
    def fullmatch(self, text: str) -> Any: ...


class InvalidRegex(ValueError):
    """The pattern is not valid RE2 (Kafka answers INVALID_REGULAR_EXPRESSION)."""


@lru_cache(maxsize=256)
def compile_topic_regex(pattern: str) -> _Compiled:
    import re2  # only groups that subscribe with a pattern load the C extension

    options = re2.Options()
    options.log_errors = False  # a bad pattern is the client's error, answered, not logged by RE2
    try:
        compiled: _Compiled = re2.compile(pattern, options)
    except re2.error as e:
        raise InvalidRegex(f"invalid regular expression {pattern!r}: {e}") from e
    return compiled


def matching_topics(pattern: str, topics: Iterable[str]) -> frozenset[str]:
    rx = compile_topic_regex(pattern)
    return frozenset(t for t in topics if t not in INTERNAL_TOPICS and rx.fullmatch(t) is not None)
