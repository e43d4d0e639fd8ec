"""`epochlog configs --add-config` parsing, as kafka-configs.sh reads it: k=v pairs split on commas, except
inside brackets, which hold a list value."""

from __future__ import annotations

import pytest

from epochlog.cli.configs_cmd import split_configs


def test_pairs_and_bracketed_lists() -> None:
    assert split_configs("retention.ms=1000, cleanup.policy=[compact,delete],segment.bytes=2048") == {
        "retention.ms": "1000",
        "cleanup.policy": "compact,delete",
        "segment.bytes": "2048",
    }
    assert split_configs("") == {}
    assert split_configs("a=b=c") == {"a": "b=c"}


def test_a_pair_without_a_value_is_refused() -> None:
    with pytest.raises(ValueError, match="key=value"):
        split_configs("retention.ms")
