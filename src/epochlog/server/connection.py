"""One client connection: dispatch, requests in order, responses in request order, backpressure.

Protocol-style (every whole frame read is handled at once; framing.py cuts them): the notes measured the
Streams style 5-10x slower on small frames. A frame that cannot be a Kafka request closes this
connection only; nothing a client sends can stop the broker.

Requests take effect in the order they were sent, as in Kafka, which handles one request per connection
at a time: a handler that answers with a coroutine holds the frames behind it until the coroutine is
done, unless it answers ``Waiting`` (server/responses.py) once the request has taken effect and only the
answer is pending (acks=all replication, a long-polling Fetch). A pipelined Produce cannot overtake one
that is still asking the transaction coordinator, and so cannot break its producer's sequence order.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import functools
import logging
import socket
import time
from collections import deque
from typing import TYPE_CHECKING, Any, cast

from epochlog.clock import now_ms
from epochlog.protocol import codec
from epochlog.protocol.api_versions import SERVED, api_versions_v0_error_frame
from epochlog.protocol.errors import KafkaError, MalformedFrame, UnsupportedVersion
from epochlog.security.session import Session
from epochlog.server.framing import BIG_FRAME, FramedProtocol
from epochlog.server.listener_security import PLAINTEXT, ListenerSecurity
from epochlog.server.responses import NO_RESPONSE, Waiting
from epochlog.server.sendfile_writer import SendfileWriter, close_regions, has_region, read_regions
from epochlog.storage.file_region import RegionTruncated

if TYPE_CHECKING:
    from epochlog.server.connection_owner import ConnectionOwner
    from epochlog.server.limits import ConnectionLimits

log = logging.getLogger("epochlog.connection")

MAX_IN_FLIGHT = 64
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
HIGH_WATER = 8 * 1024 * 1024


class _Slot:
    __slots__ = ("api_key", "data", "size", "started")

    def __init__(self, size: int = 0, api_key: int = -1) -> None:
        self.api_key = api_key
        self.started = time.monotonic()
        # ready bytes, or the buffers of one response (a Fetch with records spliced in)
        self.data: bytes | list[Any] | None = None
        self.size = size  # the request's bytes, held in the memory pool until the answer is written


class KafkaConnection(FramedProtocol):
    def __init__(self, broker: ConnectionOwner, security: ListenerSecurity = PLAINTEXT) -> None:
        super().__init__()
        self.broker = broker
        self.security = security
        self.session: Session = security.new_session("")
        # A SASL listener's authenticator (security/sasl.py); None on PLAINTEXT and SSL listeners.
        self.sasl: Any = None
        self._auth_failed = False
        self._writev = False
        # Writes answers holding file regions with sendfile (plaintext sockets only); None elsewhere.
        self.sender: SendfileWriter | None = None
        self.transport: asyncio.Transport | None = None
        self.pending: deque[_Slot] = deque()
        # True while a request has not taken effect yet; frames that arrive meanwhile wait in _held.
        self._ordering = False
        self._held: deque[bytes | memoryview] = deque()
        self.peer = "?"
        self.closed = False
        self._reading_paused = False
        self._writing_paused = False
        # The owner's connection limits (a broker's; the controller has none).
        self.limits: ConnectionLimits | None = broker.limits
        self._ip: str | None = None  # counted against max.connections.per.ip while set
        self._pool_paused = False
        self._muted = False  # over a client quota: not read until the throttle time has passed (KIP-219)
        self._taking_held = False  # _next_held is running: a nested call (an answer written) leaves it to it
        self.last_active = time.monotonic()

    # -- asyncio.Protocol ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream listener's transport (asyncio's or uvloop's, plain or TLS): one that writes.
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.session = self.security.new_session(peer[0] if peer else "")
        if self.security.ssl_context is not None:
            from epochlog.security.tls import principal_from_peer_cert

            # asyncio calls connection_made once the TLS handshake is done: the peer's certificate is known.
            self.session.principal = principal_from_peer_cert(transport.get_extra_info("ssl_object"))
        if self.security.sasl:
            self.sasl = self.security.new_authenticator(self.broker.scram_credential)
        self.transport.set_write_buffer_limits(high=HIGH_WATER)
        # uvloop's writelines sends every piece with one writev and copies nothing; asyncio's joins them.
        self._writev = type(transport).__module__.startswith("uvloop")
        if sock is not None and self.security.ssl_context is None and transport.get_extra_info("sslcontext") is None:
            self.sender = SendfileWriter(self, self.transport, sock.fileno())
        if self.limits is not None and peer:
            refused = self.limits.admit(peer[0])
            if refused is not None:
                log.warning("closing %s: %s", self.peer, refused)
                self.close()
                return
            self._ip = peer[0]
        self.broker.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.sender is not None:
            self.sender.close()
        if self.limits is not None:
            if self._ip is not None:
                self.limits.release(self._ip)
                self._ip = None
            self.limits.paused.discard(self)
            held = sum(s.size for s in self.pending) + sum(len(f) for f in self._held)
            self.pending.clear()
            if held:
                self.limits.give_back(held)
        self._held.clear()
        self.broker.connections.discard(self)
        self.broker.on_connection_lost(self)

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._next_held()

    def buffer_updated(self, nbytes: int) -> None:
        super().buffer_updated(nbytes)
        self._update_reading()

    def frame_size_limit(self) -> int:
        if self.sasl is not None and not self.session.authenticated:
            return self.security.max_receive_size  # sasl.server.max.receive.size before authentication
        return int(self.broker.config.socket_request_max_bytes)

    def bad_frame_size(self, size: int) -> None:
        log.warning(
            "closing %s: frame size %d outside [0, %d] (socket.request.max.bytes)",
            self.peer,
            size,
            self.frame_size_limit(),
        )
        self.close()

    def frame_received(self, frame: bytes | memoryview) -> None:
        self.last_active = time.monotonic()
        if self._ordering or self._held or self._muted or self._backlogged():
            # An earlier request has not taken effect yet, or the client is not taking its answers: this
            # one waits its turn, and its bytes count against queued.max.request.bytes meanwhile (the
            # frame owns its buffer: framing.py copies frames out of the shared scratch buffer).
            self._held.append(frame)
            self._hold(len(frame))
            self._update_reading()
            return
        self._handle_frame(frame)

    def _backlogged(self) -> bool:
        """The client is not reading its answers (the transport's buffer is over its high-water mark) or
        MAX_IN_FLIGHT requests are unanswered. Pausing reading alone does not bound what the broker builds:
        one socket read can hold a thousand small pipelined Fetch requests, and each answer may be
        megabytes. So frames already read wait too, as Kafka mutes a connection while an answer is sent."""
        return self._writing_paused or len(self.pending) >= MAX_IN_FLIGHT

    @property
    def busy(self) -> bool:
        """Requests still being answered (a long-polling Fetch) or waiting their turn: not idle, whatever
        the clock says."""
        return bool(self.pending or self._held or (self.sender is not None and self.sender.busy))

    def pool_has_room(self) -> None:
        self._pool_paused = False
        self._update_reading()

    def _hold(self, size: int) -> None:
        """queued.max.request.bytes: the request's bytes count until its answer is written."""
        limits = self.limits
        if limits is None:
            return
        limits.take(size)
        if limits.pool_full and not self._pool_paused:
            self._pool_paused = True
            limits.paused.add(self)
            self._update_reading()

    def _release(self, size: int) -> None:
        if self.limits is not None and size:
            self.limits.give_back(size)

    # -- requests -----------------------------------------------------------------------
    def _handle_frame(self, frame: bytes | memoryview) -> None:
        mv = memoryview(frame)
        if self._auth_failed:
            return  # answered the failure; the connection closes after connection.failed.authentication.delay.ms
        if self.sasl is not None and self.sasl.expects_raw_tokens:
            self._raw_sasl_token(mv)
            return
        try:
            header = codec.parse_header(mv)
        except MalformedFrame as e:
            log.warning("closing %s: %s", self.peer, e)
            self.close()
            return
        if self.sasl is not None and not self._sasl_admits(header, mv):
            return
        header.session = self.session
        if not self.broker.is_supported(header.api_key, header.api_version):
            if header.api_key == codec.API_VERSIONS_KEY:
                slot = _Slot()
                slot.data = api_versions_v0_error_frame(header.correlation_id)
                self.pending.append(slot)
                self._flush()
                return
            log.warning(
                "closing %s: unsupported api key %d version %d (client %r)",
                self.peer,
                header.api_key,
                header.api_version,
                header.client_id,
            )
            self.close()
            return
        quotas = getattr(self.broker, "client_quotas", None)  # a controller's listener has none
        try:
            codec.finish_header(mv, header)
            if quotas is not None:
                quotas.request_throttle(header)
            started = time.perf_counter()
            result = self.broker.dispatch_from(self, header, mv)
            if quotas is not None:
                quotas.record_request_time(header, time.perf_counter() - started)
        except (KafkaError, UnsupportedVersion) as e:
            log.warning("closing %s: bad api %d v%d request: %s", self.peer, header.api_key, header.api_version, e)
            self.close()
            return
        except Exception:
            log.exception("closing %s: handler for api %d v%d failed", self.peer, header.api_key, header.api_version)
            self.close()
            return
        if header.throttle_ms:
            self._mute(header.throttle_ms)
        if result is NO_RESPONSE:
            return
        slot = _Slot(len(mv), header.api_key)
        self._hold(slot.size)
        self.pending.append(slot)
        if isinstance(result, Waiting):
            self._run(result.coro, slot, header, ordering=False)
        elif asyncio.iscoroutine(result):
            self._ordering = True
            self._run(result, slot, header, ordering=True)
        else:
            self._fill(slot, header, result)

    def _run(self, coro: Any, slot: _Slot, header: codec.RequestHeader, ordering: bool) -> None:
        task = asyncio.ensure_future(coro)
        task.add_done_callback(lambda t: self._complete(t, slot, header, ordering))

    def _next_held(self) -> None:
        """What held the frames has cleared (a request took effect, an answer was written, the client read):
        handle the frames that arrived meanwhile, in order, until one of them holds the rest again."""
        if self._taking_held:
            return  # an answer written while the loop below handles a frame: the loop goes on by itself
        held = self._held
        self._taking_held = True
        try:
            while held and not self._ordering and not self._muted and not self._backlogged() and not self.closed:
                frame = held.popleft()
                self._release(len(frame))  # _handle_frame counts the request again while it is answered
                self._handle_frame(frame)
        finally:
            self._taking_held = False
        self._update_reading()

    # -- SASL ---------------------------------------------------------------------------
    def _sasl_admits(self, header: codec.RequestHeader, mv: memoryview) -> bool:
        """Before authentication only ApiVersions and the SASL requests pass; SaslHandshake and
        SaslAuthenticate are answered here, by the connection's authenticator, at any time (KIP-368
        re-authentication). A session past its lifetime may only re-authenticate."""
        key = header.api_key
        if key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
            self._sasl_request(header, mv)
            return False
        if self.sasl.admits(key, now_ms()):
            return True
        if not self.session.authenticated:
            log.warning("closing %s: api %d before SASL authentication", self.peer, key)
        else:
            log.info("closing %s: api %d outside the SASL session (expired or re-authenticating)", self.peer, key)
        self.close()
        return False

    def _sasl_request(self, header: codec.RequestHeader, mv: memoryview) -> None:
        if not self.broker.is_supported(header.api_key, header.api_version):
            log.warning("closing %s: unsupported SASL api %d v%d", self.peer, header.api_key, header.api_version)
            self.close()
            return
        try:
            codec.finish_header(mv, header)
            req = codec.decode_body(mv, header)
        except (KafkaError, UnsupportedVersion, MalformedFrame) as e:
            log.warning("closing %s: bad SASL request: %s", self.peer, e)
            self.close()
            return
        now = now_ms()
        if header.api_key == SASL_HANDSHAKE:
            body = self.sasl.handshake(header.api_version, str(req.mechanism), now)
            close = bool(self.sasl.should_close)
        else:
            step = self.sasl.authenticate(header.api_version, bytes(req.auth_bytes), now)
            body, close = step.response, step.close
            self._after_sasl_step()
        slot = _Slot(0, header.api_key)
        self.pending.append(slot)
        self._fill(slot, header, body)
        if close:
            self._fail_authentication()

    def _raw_sasl_token(self, mv: memoryview) -> None:
        """SaslHandshake v0: the tokens that follow are bare size-prefixed frames, not requests."""
        reply = self.sasl.raw_token(bytes(mv), now_ms())
        self._after_sasl_step()
        if reply is None:
            self._fail_authentication()
            return
        slot = _Slot()
        slot.data = len(reply).to_bytes(4, "big") + reply
        self.pending.append(slot)
        self._flush()

    def _after_sasl_step(self) -> None:
        sasl = self.sasl
        if sasl.authenticated:
            first = not self.session.authenticated
            self.session.authenticated = True
            self.session.principal = sasl.principal
            self.session.mechanism = sasl.mechanism
            self.session.expires_at_ms = sasl.session_expires_at_ms
            if first:
                log.debug("%s authenticated as %s (%s)", self.peer, sasl.principal, sasl.mechanism)

    def _fail_authentication(self) -> None:
        # Kafka delays closing a connection that failed to authenticate, to slow password guessing.
        self._auth_failed = True
        log.info("closing %s: SASL authentication failed", self.peer)
        if self.transport is not None:
            self.transport.pause_reading()
            self._reading_paused = True
        asyncio.get_running_loop().call_later(self.security.failed_auth_delay_ms / 1000, self.close)

    def _complete(self, task: asyncio.Future[Any], slot: _Slot, header: codec.RequestHeader, ordering: bool) -> None:
        if self.closed:
            return
        if task.cancelled():  # the loop is shutting down
            self.close()
            return
        try:
            result = task.result()
        except Exception:
            log.exception("closing %s: handler for api %d v%d failed", self.peer, header.api_key, header.api_version)
            self.close()
            return
        if isinstance(result, Waiting):
            self._run(result.coro, slot, header, ordering=False)
        elif result is NO_RESPONSE:
            slot.data = b""  # acks=0 after a wait: nothing to write, and the answers behind it need not wait
            self._flush()
        else:
            self._fill(slot, header, result)
        if ordering:
            self._ordering = False
            self._next_held()

    def _mute(self, ms: int) -> None:
        """Stop reading for ``ms`` (a client over its quota, KIP-219); frames already read wait their turn."""
        if self._muted or self.closed:
            return
        self._muted = True
        self._update_reading()
        asyncio.get_running_loop().call_later(ms / 1000, self._unmute)

    def _unmute(self) -> None:
        self._muted = False
        if not self.closed:
            self._next_held()

    def _fill(self, slot: _Slot, header: codec.RequestHeader, body: Any) -> None:
        if header.throttle_ms:
            self._mute(header.throttle_ms)
        self.broker.observe_request(SERVED.get(header.api_key, str(header.api_key)), slot.started)
        if header.throttle_ms and isinstance(body, dict):
            _carry_throttle(header, body)
        if isinstance(body, (bytes, bytearray)):
            slot.data = bytes(body)
        elif isinstance(body, list):
            slot.data = body
        else:
            try:
                slot.data = codec.encode_response(header.api_key, header.api_version, header.correlation_id, body)
            except Exception:
                log.exception(
                    "closing %s: cannot encode api %d v%d response", self.peer, header.api_key, header.api_version
                )
                self.close()
                return
        self._flush()

    def _flush(self) -> None:
        pending = self.pending
        out = []
        freed = 0
        lists = False
        while pending and pending[0].data is not None:
            slot = pending.popleft()
            freed += slot.size
            data = slot.data
            if isinstance(data, list):
                out.extend(data)
                lists = True
            else:
                out.append(data)
        if out and self.transport is not None and not self.closed:
            sender = self.sender
            regions = lists and has_region(out)
            if sender is not None and (regions or sender.busy):
                sender.write(out)  # behind whatever it is still sending
            elif regions:
                try:
                    self.write_to_transport(read_regions(out))
                except RegionTruncated as e:
                    log.warning("closing %s: a segment file shrank under a fetch answer: %s", self.peer, e)
                    self.close()
            else:
                self.write_to_transport(out)
            self.last_active = time.monotonic()
        elif lists:
            close_regions(out)
        self._release(freed)
        if self._held and out:
            self._next_held()  # answers went out: requests held behind MAX_IN_FLIGHT may go on
        else:
            self._update_reading()

    def write_to_transport(self, out: list[Any]) -> None:
        if self._writev:
            self.transport.writelines(out)  # type: ignore[union-attr]
        else:
            self._write_pieces(out)

    def direct_writes_done(self) -> None:
        """The sender has written everything queued: the transport writes the answers from here on."""
        self.last_active = time.monotonic()
        self._update_reading()

    def _write_pieces(self, out: list[Any]) -> None:
        # asyncio's own writelines (before Python 3.12) joins everything into one new bytes: join the
        # small pieces only and write the large ones (spliced records) as they are.
        write = self.transport.write  # type: ignore[union-attr]
        small: list[Any] = []
        for b in out:
            if len(b) < BIG_FRAME:
                small.append(b)
                continue
            if small:
                write(b"".join(small) if len(small) > 1 else small[0])
                small = []
            write(b)
        if small:
            write(b"".join(small) if len(small) > 1 else small[0])

    def _update_reading(self) -> None:
        if self.transport is None or self.closed:
            return
        # Held frames pause reading outright (Kafka mutes such a connection), so they count against
        # MAX_IN_FLIGHT too: at most one read's worth of frames is ever held.
        should_pause = (
            self._writing_paused
            or (self.sender is not None and self.sender.left > HIGH_WATER)
            or self._pool_paused
            or self._muted
            or bool(self._held)
            or len(self.pending) >= MAX_IN_FLIGHT
        )
        if should_pause and not self._reading_paused:
            self.transport.pause_reading()
            self._reading_paused = True
        elif not should_pause and self._reading_paused:
            self.transport.resume_reading()
            self._reading_paused = False

    def close(self) -> None:
        self.stop_framing()
        if self.sender is not None:
            self.sender.close()
        if not self.closed:
            self.closed = True
            if self.transport is not None:
                self.transport.close()


def _carry_throttle(header: codec.RequestHeader, body: dict[str, Any]) -> None:
    """A quota's throttle time into an answer the handler built as a dict (Produce and Fetch write theirs)."""
    if "throttle_time" not in _response_fields(header.api_key, header.api_version):
        return
    given = body.get("throttle_time") or 0
    if isinstance(given, dt.timedelta):
        given = int(given.total_seconds() * 1000)
    body["throttle_time"] = max(int(given), header.throttle_ms)


@functools.cache
def _response_fields(api_key: int, version: int) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(codec.response_class(api_key, version)))
