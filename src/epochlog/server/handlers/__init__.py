"""One module per group of Kafka APIs; each handler turns a request into a response description."""
