"""When the controller writes a metadata snapshot (metadata.log.max.record.bytes.between.snapshots).

Once that many bytes of records went through the metadata log since the last snapshot (applied from
others, or proposed by this controller), a snapshot of the committed state is due, so the log before it
can be trimmed. Only a state with nothing of ours still uncommitted is snapshot (it holds no decision the
quorum may yet drop), and only past the log start (a snapshot there would free nothing). Sans-IO: the
caller asks ``due`` after each commit, writes the snapshot at the offset it gets, then says ``taken``.
"""

from __future__ import annotations

# A metadata record as stored is about this many bytes of JSON: what counts toward the interval.
RECORD_BYTES_ESTIMATE = 160
DEFAULT_MAX_BYTES = 20 * 1024 * 1024  # Kafka's default for metadata.log.max.record.bytes.between.snapshots


class SnapshotSchedule:
    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.bytes_since = 0

    def went_by(self, records: int) -> None:
        self.bytes_since += RECORD_BYTES_ESTIMATE * records

    def due(self, applied: int, all_committed: bool, log_start_offset: int) -> int | None:
        """The end offset to snapshot at now, or None."""
        if self.bytes_since < self.max_bytes or not all_committed or applied <= log_start_offset:
            return None
        return applied

    def taken(self) -> None:
        self.bytes_since = 0
