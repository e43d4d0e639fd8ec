"""KIP-932 share groups ("queues"): members share partitions, every record is acquired, acknowledged, sans-IO.

- ``model.py``: the record states and acknowledge types (Kafka's ids), the ``group.share.*`` configs;
- ``partition.py``: one share-partition as its leader keeps it: acquisition locks, ACCEPT/RELEASE/REJECT,
  delivery counts, the share-partition start and end offsets (SPSO, SPEO); every change comes out as a state
  write for the share coordinator;
- ``records.py``: the share coordinator's ShareSnapshot/ShareUpdate records of ``__share_group_state``, how
  state batches combine, ``replay``, and ``ShareStateStore`` (the coordinator's fencing of stale writers);
- ``isolation.py``: what a share-partition offers of what it read, by ``share.isolation.level``: read_committed
  stops at the last stable offset and archives aborted transactions' records undelivered;
- ``assignor.py``: the ``simple`` assignor, which may give one partition to several members;
- ``group_records.py`` and ``coordinator.py``: ShareGroupHeartbeat membership and its records; ``describe``.

Nothing here does I/O. The broker's driver (to come) feeds fetched offset ranges to ``SharePartition.acquire``
and writes every ``StateWrite`` through the share coordinator before it answers; a leader that takes a
partition over rebuilds it from the coordinator's state (``SharePartition.from_state``).
tests/sim/test_share_groups_sim.py drives the same cores under a crowd of faulty members and failovers.
"""
