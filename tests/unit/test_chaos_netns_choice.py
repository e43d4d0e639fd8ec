"""The netns backend's choices that need no root: which backend a run gets, and the subnet it may take."""

from __future__ import annotations

import ipaddress
import random

import pytest

from epochlog.chaos.netns import NetnsUnavailable, choose_backend, pick_subnet, usable

pytestmark = pytest.mark.unit


def test_proxy_when_asked_and_an_unknown_backend_is_a_clear_error() -> None:
    assert choose_backend("proxy")[0] == "proxy"
    with pytest.raises(ValueError, match="choose from auto, netns, proxy"):
        choose_backend("iptables")


def test_auto_follows_what_this_machine_allows() -> None:
    ok, why = usable()
    used, said = choose_backend("auto")
    assert used == ("netns" if ok else "proxy") and why in said
    if not ok:
        with pytest.raises(NetnsUnavailable, match=why):
            choose_backend("netns")


def test_subnet_overlaps_nothing_taken() -> None:
    rng = random.Random(1)
    first = pick_subnet([], rng)
    assert first.prefixlen == 24 and first.subnet_of(ipaddress.IPv4Network("10.192.0.0/10"))
    # Everything but one /24 of the range taken (a /16 here and a /9-sized route there): that one is picked.
    taken = [ipaddress.IPv4Network("10.0.0.0/9"), ipaddress.IPv4Network("10.128.0.0/10")]
    taken += [ipaddress.IPv4Network(f"10.{b}.0.0/16") for b in range(192, 256) if b != 231]
    taken += [ipaddress.IPv4Network(f"10.231.{c}.0/24") for c in range(256) if c != 17]
    assert pick_subnet(taken, random.Random(2)) == ipaddress.IPv4Network("10.231.17.0/24")
    taken.append(ipaddress.IPv4Network("10.231.17.5/32"))
    with pytest.raises(NetnsUnavailable, match="no free private /24"):
        pick_subnet(taken, random.Random(3))
