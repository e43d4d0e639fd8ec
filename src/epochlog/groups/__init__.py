"""The classic consumer-group protocol's membership (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), sans-IO.

``membership.py`` holds the state machine (GroupMembership): requests and ``tick`` come in with ``now_ms``,
effects go out (answers for parked JoinGroup/SyncGroup requests, group records to persist, when to wake up,
state changes). ``model.py`` has the groups and members, ``effects.py`` what goes in and out. The broker's
driver is server/groups/; the simulator drives the same core (tests/sim/test_groups_sim.py).
"""
