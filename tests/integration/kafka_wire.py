"""A minimal blocking Kafka-protocol client on kio, for requests the client libraries do not expose."""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer


class WireClient:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.corr = 0

    def close(self) -> None:
        self.sock.close()

    def _recv(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by the broker")
            buf += chunk
        return buf

    def frame(self, api_key: int, version: int, **fields: Any) -> tuple[int, bytes]:
        """(correlation id, the size-prefixed request), not sent: callers that pipeline send several at once."""
        cls = load_request_schema(api_key, version)
        self.corr += 1
        out = io.BytesIO()
        out.write(struct.pack(">hhih", api_key, version, self.corr, 4) + b"wire")
        if cls.__flexible__:
            out.write(b"\x00")
        entity_writer(cls)(out, cls(**fields))
        body = out.getvalue()
        return self.corr, struct.pack(">i", len(body)) + body

    def response(self, api_key: int, version: int, corr: int) -> Any:
        """The next response on the socket, which must answer request ``corr``."""
        size = struct.unpack(">i", self._recv(4))[0]
        frame = self._recv(size)
        resp_cls = load_response_schema(api_key, version)
        pos = 4 + (1 if resp_cls.__flexible__ and api_key != 18 else 0)
        assert struct.unpack_from(">i", frame)[0] == corr
        obj, _ = entity_reader(resp_cls)(frame[pos:], 0)
        return obj

    def request(self, api_key: int, version: int, **fields: Any) -> Any:
        corr, data = self.frame(api_key, version, **fields)
        self.sock.sendall(data)
        return self.response(api_key, version, corr)


def schema_module(api_key: int, version: int) -> Any:
    import importlib

    return importlib.import_module(load_request_schema(api_key, version).__module__)
