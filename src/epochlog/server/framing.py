"""Cutting a TCP byte stream into Kafka's size-prefixed frames with as few copies as possible.

Both ends of every epochlog connection (a broker serving clients and followers, a follower reading
fetch answers) move frames of about a megabyte. With a plain ``asyncio.Protocol`` each of those bytes
was copied three times in user space before any handler saw it (the loop's read buffer into a new
``bytes``, that into the frame's buffer, and a zero-fill before that), and on this machine a user-space
pass over a megabyte costs 0.1-0.2 ms: a quarter of an RF=3 follower's CPU (perf, 2026-11-23). As an
``asyncio.BufferedProtocol`` the kernel writes a large frame straight into the buffer the frame will
live in, and that buffer is not zero-filled first.

Small frames are read into one scratch buffer shared by every connection of the thread (an event loop
fills it and reports it within one callback, so no two connections can use it at once) and copied out,
one copy each, as before.
"""

from __future__ import annotations

import asyncio
import ctypes
import struct
import threading

# A frame at least this large that arrives in pieces gets a buffer of its own, read into directly.
BIG_FRAME = 64 * 1024
SCRATCH_BYTES = 128 * 1024

_SIZE = struct.Struct(">i")
_per_thread = threading.local()  # one scratch buffer per thread, so per event loop


def _scratch() -> memoryview:
    view: memoryview | None = getattr(_per_thread, "scratch", None)
    if view is None:
        view = _per_thread.scratch = memoryview(bytearray(SCRATCH_BYTES))
    return view


def _uninitialized_allocator() -> object:
    try:
        new = ctypes.pythonapi.PyByteArray_FromStringAndSize
    except AttributeError:
        return None
    new.restype = ctypes.py_object
    new.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t)
    return new


_new_bytearray = _uninitialized_allocator()


def frame_buffer(size: int) -> bytearray:
    """A bytearray of ``size`` bytes whose contents are not set: the caller overwrites every byte before
    reading any (CPython's C API allows a NULL source for exactly this; ``bytearray(n)`` zero-fills)."""
    if _new_bytearray is None:
        return bytearray(size)
    return _new_bytearray(None, size)  # type: ignore[operator, no-any-return]


class FramedProtocol(asyncio.BufferedProtocol):
    """Hands every whole frame (without its size prefix) to ``frame_received``: ``bytes`` for a frame
    that was read whole with others, or a writable ``memoryview`` of a buffer the frame owns."""

    def __init__(self) -> None:
        self._fr_partial = bytearray()  # the start of a small frame (or of a size prefix) that is not whole yet
        self._fr_big_view: memoryview | None = None  # the buffer of the large frame being read, if any
        self._fr_fill = 0
        self._fr_stopped = False
        self._fr_scratch = _scratch()

    # -- hooks for subclasses -------------------------------------------------------------
    def frame_size_limit(self) -> int:
        return 0x7FFFFFFF

    def frame_received(self, frame: bytes | memoryview) -> None:
        raise NotImplementedError

    def bad_frame_size(self, size: int) -> None:
        """A size prefix outside [0, frame_size_limit()]: nothing after it can be trusted."""
        raise NotImplementedError

    def stop_framing(self) -> None:
        """Hand out no more frames from bytes already read (the connection is closing)."""
        self._fr_stopped = True

    # -- asyncio.BufferedProtocol -----------------------------------------------------------
    def get_buffer(self, sizehint: int) -> memoryview:
        if self._fr_big_view is not None:
            return self._fr_big_view[self._fr_fill :]
        return self._fr_scratch  # this thread's, taken when the connection was made on it

    def buffer_updated(self, nbytes: int) -> None:
        if self._fr_big_view is not None:
            self._fr_fill += nbytes
            if self._fr_fill < len(self._fr_big_view):
                return
            frame = self._fr_big_view
            self._fr_big_view = None
            if not self._fr_stopped:
                self.frame_received(frame)
            return
        scratch = self._fr_scratch
        if self._fr_partial:
            self._fr_partial += scratch[:nbytes]
            self._cut(self._fr_partial, len(self._fr_partial), own=True)
        else:
            self._cut(scratch, nbytes, own=False)

    def _cut(self, src: bytearray | memoryview, n: int, own: bool) -> None:
        view = memoryview(src)
        pos = 0
        limit = self.frame_size_limit()
        try:
            while n - pos >= 4 and not self._fr_stopped:
                (size,) = _SIZE.unpack_from(src, pos)
                if size < 0 or size > limit:
                    self._fr_stopped = True
                    self.bad_frame_size(size)
                    return
                have = n - pos - 4
                if have < size:
                    if size >= BIG_FRAME:
                        big = frame_buffer(size)
                        big[:have] = view[pos + 4 : n]
                        self._fr_big_view, self._fr_fill = memoryview(big), have
                        pos = n
                    break
                frame = bytes(view[pos + 4 : pos + 4 + size])  # the source is reused: copy the frame out
                pos += 4 + size
                self.frame_received(frame)
        finally:
            view.release()
        if self._fr_stopped:
            self._fr_partial = bytearray()
        elif own:
            del src[:pos]  # type: ignore[union-attr]
        elif pos < n:
            self._fr_partial = bytearray(src[pos:n])
