"""A member's current assignment moves towards its target: revoke first, then the next epoch, and a
partition only once nobody owns it."""

from __future__ import annotations

import pytest

from epochlog.groups.consumer.model import NO_PARTITIONS, STABLE, UNRELEASED_PARTITIONS, UNREVOKED_PARTITIONS
from epochlog.groups.consumer.reconcile import CurrentAssignment, reconcile

pytestmark = pytest.mark.unit

A0, A1, A2, A3 = ("a", 0), ("a", 1), ("a", 2), ("a", 3)


def free(tp: tuple[str, int]) -> int:
    return -1


def test_a_stable_member_at_the_target_epoch_stays() -> None:
    cur = CurrentAssignment(3, STABLE, frozenset({A0}), NO_PARTITIONS)
    assert reconcile(cur, 3, frozenset({A0, A1}), frozenset({A0}), free) is cur


def test_new_free_partitions_come_with_the_target_epoch() -> None:
    cur = CurrentAssignment(3, STABLE, frozenset({A0}), NO_PARTITIONS)
    assert reconcile(cur, 5, frozenset({A0, A1}), frozenset({A0}), free) == CurrentAssignment(
        5, STABLE, frozenset({A0, A1}), NO_PARTITIONS
    )


def test_revocation_comes_first_and_the_epoch_waits_for_it() -> None:
    cur = CurrentAssignment(3, STABLE, frozenset({A0, A1}), NO_PARTITIONS)
    target = frozenset({A0, A2})
    nxt = reconcile(cur, 5, target, frozenset({A0, A1}), free)
    # A2 is free, yet it is not given before A1 is revoked: the member stays at epoch 3.
    assert nxt == CurrentAssignment(3, UNREVOKED_PARTITIONS, frozenset({A0}), frozenset({A1}))
    assert reconcile(nxt, 5, target, frozenset({A0, A1}), free) == nxt  # still owns A1
    assert reconcile(nxt, 5, target, None, free) == nxt  # did not say: taken to still own it
    done = reconcile(nxt, 5, target, frozenset({A0}), free)
    assert done == CurrentAssignment(5, STABLE, frozenset({A0, A2}), NO_PARTITIONS)


def test_a_member_that_already_let_go_is_not_asked_to_revoke() -> None:
    cur = CurrentAssignment(3, STABLE, frozenset({A0, A1}), NO_PARTITIONS)
    assert reconcile(cur, 4, frozenset({A0}), frozenset({A0}), free) == CurrentAssignment(
        4, STABLE, frozenset({A0}), NO_PARTITIONS
    )


def test_a_partition_still_owned_elsewhere_waits_until_released() -> None:
    owners = {A2: 4}
    cur = CurrentAssignment(4, STABLE, frozenset({A0}), NO_PARTITIONS)
    target = frozenset({A0, A2, A3})
    nxt = reconcile(cur, 5, target, frozenset({A0}), lambda tp: owners.get(tp, -1))
    assert nxt == CurrentAssignment(5, UNRELEASED_PARTITIONS, frozenset({A0, A3}), NO_PARTITIONS)
    assert reconcile(nxt, 5, target, frozenset({A0, A3}), lambda tp: owners.get(tp, -1)) == nxt
    del owners[A2]
    assert reconcile(nxt, 5, target, frozenset({A0, A3}), lambda tp: owners.get(tp, -1)) == CurrentAssignment(
        5, STABLE, target, NO_PARTITIONS
    )


def test_after_revoking_a_member_moves_on_to_the_newest_target() -> None:
    cur = CurrentAssignment(3, UNREVOKED_PARTITIONS, frozenset({A0}), frozenset({A1}))
    # The target moved again meanwhile (epoch 7) and now takes A0 too.
    nxt = reconcile(cur, 7, frozenset({A3}), frozenset({A0}), free)
    assert nxt == CurrentAssignment(4, UNREVOKED_PARTITIONS, NO_PARTITIONS, frozenset({A0}))
    assert reconcile(nxt, 7, frozenset({A3}), NO_PARTITIONS, free) == CurrentAssignment(
        7, STABLE, frozenset({A3}), NO_PARTITIONS
    )
