"""PySpark data source and sink for epochlog (and any Kafka-protocol cluster), format name ``epochlog``."""

from __future__ import annotations

from typing import Any

__all__ = ["EpochlogDataSource", "register"]


def __getattr__(name: str) -> Any:
    # pyspark is an optional dependency: import it only when the Spark side is actually used.
    if name == "EpochlogDataSource":
        from epochlog.spark.source import EpochlogDataSource

        return EpochlogDataSource
    raise AttributeError(name)


def register(spark: Any) -> None:
    """spark.dataSource.register(EpochlogDataSource), so that format("epochlog") works; warns
    (epochlog.spark.worker_python.WorkerPythonWarning) when the session's Python workers cannot import
    epochlog, saying what to set."""
    from epochlog.spark import worker_python
    from epochlog.spark.source import EpochlogDataSource

    spark.dataSource.register(EpochlogDataSource)
    worker_python.check(spark)
