"""A group member's host is its connection's address, as Kafka's group APIs show it ("/" and the address)."""

from __future__ import annotations

from epochlog.protocol.codec import RequestHeader
from epochlog.security.session import Session
from epochlog.server.authz import client_host


def _header(session: object) -> RequestHeader:
    return RequestHeader(api_key=11, api_version=9, correlation_id=1, client_id="c", size=0, session=session)


def test_the_member_host_is_the_connections_address() -> None:
    assert client_host(_header(Session(client_host="10.1.2.3"))) == "/10.1.2.3"
    assert client_host(_header(Session(client_host="::1"))) == "/::1"


def test_the_brokers_own_calls_have_no_host() -> None:
    assert client_host(_header(None)) == ""
