"""KIP-848 consumer groups (``group.protocol=consumer``): the coordinator assigns, sans-IO.

- ``model.py``: a group and its members as the coordinator keeps them, the config, the group states;
- ``records.py``: the group records the coordinator writes (named like Kafka's ConsumerGroup* records) and
  ``replay``, which rebuilds a group from them, as a coordinator taking over a ``__consumer_offsets`` partition;
- ``assignors.py``: the server-side ``uniform`` and ``range`` assignors;
- ``reconcile.py``: how a member moves from its current assignment towards its target without ever being
  given a partition another member still owns;
- ``topic_regex.py``: regex subscriptions (RE2 syntax, as Kafka's RE2/J);
- ``messages.py``: the heartbeat's request and answer, effects, and the group as ConsumerGroupDescribe shows it;
- ``coordinator.py``: the per-group state machine: ConsumerGroupHeartbeat, ``tick`` (session and rebalance
  timeouts), topic metadata changes, offset commits validated by member epoch.

The broker's driver (server/groups/consumer_groups.py) writes the records an event returns before it answers, and
hands every record read back on loading to ``replay``. tests/sim/test_consumer_groups_sim.py drives the same
core under a crowd of faulty consumers and coordinator failovers.
"""
