"""epochlog: a replicated, partitioned commit log speaking the Kafka protocol."""

__version__ = "0.1.0"
