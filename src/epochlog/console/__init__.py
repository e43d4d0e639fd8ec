"""`epochlog console`: a local web console that reads a cluster over the Kafka protocol."""
