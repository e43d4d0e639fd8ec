"""What a handler may answer besides a response: ``NO_RESPONSE`` and ``Waiting``.

A leaf: handlers return these and the connection checks for them, and neither imports the other or the
dispatch table for it.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

# A request the client expects no answer to (Produce with acks=0).
NO_RESPONSE = object()


class Waiting:
    """A handler's answer once the request has taken effect and only waiting is left (for replication,
    for data to fetch, for a commit): the coroutine yields the response.

    A connection handles its requests one after another, as Kafka does, so that pipelined requests take
    effect in the order they were sent; a handler returning a bare coroutine holds the requests behind it
    until the coroutine is done. A ``Waiting`` (returned directly, or as a coroutine's result) lets the
    next requests go on meanwhile: what they could race with has already happened.
    """

    __slots__ = ("coro",)

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self.coro = coro
