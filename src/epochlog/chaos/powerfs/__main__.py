"""``python -m epochlog.chaos.powerfs BACKING MOUNTPOINT CONTROL_SOCKET``: mount, serve until unmounted."""

from __future__ import annotations

import logging
import sys


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m epochlog.chaos.powerfs BACKING MOUNTPOINT CONTROL_SOCKET", file=sys.stderr)
        return 2
    from epochlog.chaos.powerfs.mount import serve

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return serve(*argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
