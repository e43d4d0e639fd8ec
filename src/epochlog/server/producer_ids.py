"""Producer id allocation for InitProducerId, unique across restarts.

Ids are handed out from blocks; the end of the current block is made durable before any id
in it is used, so a crash can waste ids but never repeat one (Kafka's producer-id blocks).
"""

from __future__ import annotations

import os
from pathlib import Path

from epochlog.storage import fileops

BLOCK_SIZE = 1000
FILE_NAME = "producer-id-block"


class ProducerIdAllocator:
    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / FILE_NAME
        self._next = -1
        self._block_end = -1

    def _reserve(self) -> None:
        start = 0
        if self.path.exists():
            try:
                start = int(self.path.read_text().strip() or 0)
            except ValueError as e:
                raise RuntimeError(f"{self.path} is corrupt: {e}") from e
        end = start + BLOCK_SIZE
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            f.write(f"{end}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        # The rename is durable only once the directory is: else a crash could bring back the old block
        # end, and ids of this block would be handed out twice.
        fileops.ops().fsync_dir(self.path.parent)
        self._next, self._block_end = start, end

    def allocate(self) -> int:
        if self._next < 0 or self._next >= self._block_end:
            self._reserve()
        pid = self._next
        self._next += 1
        return pid
