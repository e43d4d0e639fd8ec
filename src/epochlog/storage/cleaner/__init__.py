"""Log compaction (cleanup.policy=compact): Kafka's log cleaner.

``record_filter`` reads keys out of record batches and rebuilds batches without the records that lost;
``cleaner`` cleans one log (offset map, groups of segments, ``.cleaned`` files); ``swap`` holds the
crash-safe file steps of putting cleaned segments in place and their recovery; ``manager`` picks the
log to clean, keeps ``cleaner-offset-checkpoint`` and runs the cleaning off the event loop; ``config``
and ``throttler`` hold the broker-level settings and the I/O bound.
"""
