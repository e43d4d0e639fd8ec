"""What a handler may return besides a response: NO_RESPONSE, for a request the client expects no answer to
(Produce with acks=0). A leaf: handlers return it and the connection checks for it, and neither imports the
other or the dispatch table for it."""

NO_RESPONSE = object()
