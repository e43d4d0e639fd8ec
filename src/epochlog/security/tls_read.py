"""TLS listeners read every whole record waiting in one call instead of one record per call.

uvloop's TLS transport feeds each socket read into the incoming memory BIO and then calls
``SSLObject.read`` until it raises SSLWantReadError. One call returns one TLS record, and librdkafka
writes a 1 KiB message as two records (about 16 B + 1 KiB), so over SASL_SSL the broker paid Python's
method dispatch, a GIL release and OpenSSL's per-call setup about once per 1.8 KB
(docs/performance-profile.md, section 4). ``DrainingSSLObject.read`` hands the whole loop to
security/_native/tls_drain.c, which calls ``SSL_read_ex`` until the buffer is full or OpenSSL wants more
bytes, with the GIL released once. A server context opts in with ``drain_records(ctx)``: uvloop builds
its ``SSLObject`` through ``SSLContext.wrap_bio``, which uses the context's ``sslobject_class``.

Only reads into a caller's buffer (uvloop's path for a BufferedProtocol, which every listener's
connection is) are drained. Handshakes, writes, errors, close_notify and "want more bytes" all still go
through ``ssl.SSLObject``: when the drain stops on anything but data, this class calls the ordinary
``read``, which sees the same state and answers as it always did.
"""

from __future__ import annotations

import ssl
from typing import Any

try:
    from epochlog.security._native import _tls_drain  # type: ignore[attr-defined]

    _STOP_OTHER = _tls_drain.STOP_OTHER
except ImportError:  # no C compiler or no OpenSSL headers at install: uvloop's one-record reads
    _tls_drain = None


class DrainingSSLObject(ssl.SSLObject):
    # Set when a drain returned data but stopped on something else (close_notify, an alert, a broken
    # record): that state is sticky in OpenSSL, so the next read meets it again. pending() says so,
    # because uvloop reads again only while the memory BIO or pending() report bytes, and the drain has
    # already taken the record that caused the stop out of the BIO.
    _stopped_on_other = False

    def read(self, len: int = 1024, buffer: Any = None) -> Any:
        if buffer is None:
            return super().read(len)
        self._stopped_on_other = False
        got, stop = _tls_drain.drain(self._sslobj, buffer, len)  # type: ignore[attr-defined]
        if got:
            self._stopped_on_other = stop == _STOP_OTHER
            return got
        # Nothing decrypted: want more bytes, close_notify, an alert or a broken record. The ordinary read
        # raises SSLWantReadError, returns 0 or raises the SSLError it always raised.
        return super().read(len, buffer)

    def pending(self) -> int:
        return super().pending() or int(self._stopped_on_other)


def available() -> bool:
    """Whether this interpreter's ``_ssl`` objects are ones tls_drain.c can read (checked on a real one)."""
    if _tls_drain is None:
        return False
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO())
    return bool(_tls_drain.usable(probe._sslobj))  # type: ignore[attr-defined]


_AVAILABLE: bool | None = None


def drain_records(ctx: ssl.SSLContext) -> ssl.SSLContext:
    """Have ``ctx``'s memory-BIO connections read all whole records per call, where that is possible."""
    global _AVAILABLE
    if _AVAILABLE is None:
        _AVAILABLE = available()
    if _AVAILABLE:
        ctx.sslobject_class = DrainingSSLObject
    return ctx
