"""Storage errors, each carrying the Kafka error code the broker answers with."""

from __future__ import annotations

from epochlog.codes import Err


class StorageError(Exception):
    error_code: int = Err.UNKNOWN_SERVER_ERROR


class CorruptRecordError(StorageError):
    error_code = Err.CORRUPT_MESSAGE


class RecordTooLargeError(StorageError):
    error_code = Err.MESSAGE_TOO_LARGE


class InvalidRecordError(StorageError):
    error_code = Err.INVALID_RECORD


class OffsetOutOfRangeError(StorageError):
    error_code = Err.OFFSET_OUT_OF_RANGE


class LogDirError(StorageError):
    """The log directory cannot be used (wrong node id, unreadable metadata)."""

    error_code = Err.KAFKA_STORAGE_ERROR


class KafkaStorageError(StorageError):
    """An I/O error on the partition's log directory, or the directory is offline after one: the replica
    stops serving until the broker restarts with the directory repaired (clients refresh metadata)."""

    error_code = Err.KAFKA_STORAGE_ERROR
