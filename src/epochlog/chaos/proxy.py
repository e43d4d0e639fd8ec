"""The links between nodes, through proxies this process controls: a partition cuts links, clients still get in.

One proxy listens in front of each node's inter-node listener (a broker's INTERNAL listener, a controller's
quorum listener). Peers dial the proxy; clients dial the node's own client listener and never pass here. The
proxy learns which node a connection comes from by the client id of its first Kafka request (every epochlog
process names itself in it: ``replica-fetcher-2``, ``controller-101-raft``, ``broker-3-heartbeat``, ``txn-1``);
a connection from anything else (a tool, a test) is never cut.

A cut link drops bytes both ways and keeps the connections open, as a broken network does: nothing tells the
ends that the other is gone, their timeouts must. A new connection over a cut link hangs, as a SYN would.
Healing closes the connections that were cut, so both ends reconnect.
"""

from __future__ import annotations

import logging
import re
import socket
import struct
import threading
from collections.abc import Iterable

log = logging.getLogger("epochlog.chaos.proxy")

# The client ids epochlog's processes give their peer connections: the digits are the dialling node's id.
_PEER_CLIENT_ID = re.compile(r"^(?:replica-fetcher|txn|controller|broker)-(\d+)(?:-|$)")
_HEADER = struct.Struct(">ihhih")  # size, api key, api version, correlation id, client id length


def source_node(first_bytes: bytes) -> int | None:
    """The node id a connection comes from, read from its first request's header; None when it is no peer's."""
    if len(first_bytes) < _HEADER.size:
        return None
    _size, _key, _version, _corr, n = _HEADER.unpack_from(first_bytes)
    if n < 0 or len(first_bytes) < _HEADER.size + n:
        return None
    client_id = first_bytes[_HEADER.size : _HEADER.size + n].decode("utf-8", "replace")
    m = _PEER_CLIENT_ID.match(client_id)
    return int(m.group(1)) if m else None


class Links:
    """Which pairs of nodes cannot talk right now (symmetric)."""

    def __init__(self) -> None:
        self._cut: set[frozenset[int]] = set()
        self._lock = threading.Lock()

    def cut(self, a: int, b: int) -> None:
        with self._lock:
            self._cut.add(frozenset((a, b)))

    def isolate(self, node: int, others: Iterable[int]) -> None:
        for o in others:
            if o != node:
                self.cut(node, o)

    def is_cut(self, a: int | None, b: int) -> bool:
        if a is None:
            return False
        with self._lock:
            return frozenset((a, b)) in self._cut

    def pairs(self) -> set[frozenset[int]]:
        with self._lock:
            return set(self._cut)

    def heal(self) -> None:
        with self._lock:
            self._cut.clear()

    @property
    def any_cut(self) -> bool:
        with self._lock:
            return bool(self._cut)


class _Conn:
    def __init__(self, client: socket.socket) -> None:
        self.client = client
        self.upstream: socket.socket | None = None
        self.source: int | None = None
        self.dropped = False  # some of its bytes were dropped: it must not carry on after the heal

    def close(self) -> None:
        for s in (self.client, self.upstream):
            if s is None:
                continue
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


class NodeProxy:
    """Forwards 127.0.0.1:<port> to one node's inter-node listener, subject to ``links``."""

    def __init__(self, node_id: int, target_port: int, links: Links, host: str = "127.0.0.1") -> None:
        self.node_id, self.target, self.links = node_id, (host, target_port), links
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((host, 0))
        self.listener.listen(128)
        self.port: int = self.listener.getsockname()[1]
        self.closed = threading.Event()
        self._lock = threading.Lock()
        self._conns: set[_Conn] = set()
        self.forwarded = 0
        self.dropped = 0
        self._thread = threading.Thread(target=self._accept, name=f"proxy-{node_id}", daemon=True)
        self._thread.start()

    def _cut_for(self, conn: _Conn) -> bool:
        return self.links.is_cut(conn.source, self.node_id)

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            conn = _Conn(client)
            with self._lock:
                self._conns.add(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: _Conn) -> None:
        # The first request names the source; read up to its client id before dialling the node.
        first = b""
        try:
            conn.client.settimeout(30)
            while len(first) < _HEADER.size:
                chunk = conn.client.recv(65536)
                if not chunk:
                    raise OSError("closed before its first request")
                first += chunk
            n = _HEADER.unpack_from(first)[4]
            while n > 0 and len(first) < _HEADER.size + n:
                chunk = conn.client.recv(65536)
                if not chunk:
                    raise OSError("closed in its first request")
                first += chunk
            conn.client.settimeout(None)
            conn.source = source_node(first)
            while self._cut_for(conn) and not self.closed.is_set():
                self.closed.wait(0.05)  # a connection over a cut link hangs
            if self.closed.is_set():
                raise OSError("proxy closed")
            conn.upstream = socket.create_connection(self.target, timeout=5)
            conn.upstream.settimeout(None)
            conn.upstream.sendall(first)
        except OSError:
            self._forget(conn)
            return
        threading.Thread(target=self._pump, args=(conn, conn.upstream, conn.client), daemon=True).start()
        self._pump(conn, conn.client, conn.upstream)

    def _pump(self, conn: _Conn, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if self._cut_for(conn):
                    conn.dropped = True
                    self.dropped += len(data)
                    continue
                if conn.dropped:
                    break  # a stream with a hole in it cannot carry on: close it, both ends reconnect
                dst.sendall(data)
                self.forwarded += len(data)
        except OSError:
            pass
        self._forget(conn)

    def _forget(self, conn: _Conn) -> None:
        with self._lock:
            self._conns.discard(conn)
        conn.close()

    def heal(self) -> None:
        """Close every connection that lost bytes to a cut (the links themselves are healed in ``Links``)."""
        with self._lock:
            broken = [c for c in self._conns if c.dropped]
        for c in broken:
            self._forget(c)

    def close(self) -> None:
        self.closed.set()
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # close() alone leaves accept() blocked: 5 s per proxy
        except OSError:
            pass
        self.listener.close()
        with self._lock:
            conns, self._conns = list(self._conns), set()
        for c in conns:
            c.close()
        self._thread.join(5)
