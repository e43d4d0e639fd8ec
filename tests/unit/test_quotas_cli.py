"""`epochlog configs --entity-type users|clients`: how names pair with entity types (kafka-configs.sh's
positional pairing, --entity-default standing for a name in the order given) and the refusals it makes
before asking the broker."""

from __future__ import annotations

import pytest

from epochlog.cli.quotas_cmd import Usage, check_keys, entity_text, name_order, pair, parse_values

pytestmark = pytest.mark.unit


def test_names_and_defaults_pair_with_types_in_command_line_order() -> None:
    argv = ["configs", "--entity-type", "users", "--entity-default", "--entity-type", "clients", "--entity-name", "a"]
    assert name_order(argv) == [None, "a"]
    assert pair(["users", "clients"], ["a"], 1, argv) == [("user", None, True), ("client-id", "a", True)]
    argv = ["--entity-type", "users", "--entity-name", "u", "--entity-type", "clients", "--entity-default"]
    assert pair(["users", "clients"], ["u"], 1, argv) == [("user", "u", True), ("client-id", None, True)]
    argv = ["--entity-type", "clients", "--entity-name=app"]
    assert pair(["clients"], ["app"], 0, argv) == [("client-id", "app", True)]


def test_a_type_without_a_name_matches_any_and_too_many_names_are_refused() -> None:
    assert pair(["users", "clients"], ["u"], 0, []) == [("user", "u", True), ("client-id", None, False)]
    with pytest.raises(Usage, match="More entity names"):
        pair(["users"], ["a", "b"], 0, [])
    with pytest.raises(Usage, match="Duplicate"):
        pair(["users", "users"], [], 0, [])


def test_values_and_keys_are_checked_as_kafka_configs_does() -> None:
    assert parse_values({"producer_byte_rate": "1048576"}) == {"producer_byte_rate": 1048576.0}
    with pytest.raises(Usage, match="Cannot parse quota configuration value for producer_byte_rate: fast"):
        parse_values({"producer_byte_rate": "fast"})
    check_keys(["clients"], ["consumer_byte_rate", "request_percentage"], "added")
    with pytest.raises(Usage, match=r"Unexpected config names: retention\.ms"):
        check_keys(["clients"], ["retention.ms"], "added")


def test_entities_print_as_kafka_configs_prints_them() -> None:
    assert entity_text((("client-id", "app"), ("user", "alice"))) == "user-principal 'alice', client-id 'app'"
    assert entity_text((("user", None),)) == "the default user-principal"
