"""Send the frames a failed fuzz run saved to a broker, one at a time, and say what each one got back.

    python -m tests.fuzz.replay fuzz-failure-<seed>.bin 127.0.0.1:9092

A frame whose size prefix claims more than follows ends the stream, as it did in the run.
"""

from __future__ import annotations

import socket
import struct
import sys


def frames(data: bytes) -> list[bytes]:
    out = []
    pos = 0
    while pos + 4 <= len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        end = pos + 4 + size if 0 <= size <= len(data) - pos - 4 else len(data)
        out.append(data[pos:end])
        pos = end
    return out


def main() -> None:
    path, bootstrap = sys.argv[1], sys.argv[2]
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    for i, f in enumerate(frames(open(path, "rb").read())):
        try:
            sock.sendall(f)
            sock.settimeout(2)
            reply = sock.recv(1 << 16)
            print(f"frame {i} ({len(f)} bytes, api {struct.unpack_from('>h', f, 4)[0] if len(f) >= 6 else '?'}):",
                  "closed" if not reply else f"{len(reply)} bytes back")  # fmt: skip
            if not reply:
                sock = socket.create_connection((host, int(port)), timeout=10)
        except (TimeoutError, OSError) as e:
            print(f"frame {i}: {type(e).__name__}: {e}")
            sock = socket.create_connection((host, int(port)), timeout=10)


if __name__ == "__main__":
    main()
