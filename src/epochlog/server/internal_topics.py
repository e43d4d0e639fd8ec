"""The names of the internal topics, with Kafka's spelling. A leaf, so that the modules that write to these
topics (the offsets store, the transaction coordinators and markers) need not import the broker."""

OFFSETS_TOPIC = "__consumer_offsets"
TXN_TOPIC = "__transaction_state"
SHARE_STATE_TOPIC = "__share_group_state"
