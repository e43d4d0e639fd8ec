"""Loaded into every process of an ack_timeline.py run (its directory leads PYTHONPATH): timestamps each
step of the acks=all path, for topics named ``lat-*``, into $EPOCHLOG_TL/<pid>.tl. Monotonic clocks are
shared by the processes of one machine, so the files line up. It wraps private functions of the broker;
a rename there shows as a missing stage in the report, not as an error."""

import os
import time

if os.environ.get("EPOCHLOG_TL"):
    _out = open(f"{os.environ['EPOCHLOG_TL']}/{os.getpid()}.tl", "a", buffering=1)

    def _w(*a: object) -> None:
        _out.write(" ".join(str(x) for x in (time.monotonic(), *a)) + "\n")

    from epochlog.replication import partition as core
    from epochlog.server import connection, partition
    from epochlog.server.cluster import fetcher, peer
    from epochlog.server.handlers import fetch

    try:
        from epochlog.server.handlers import replica_fetch
    except ImportError:  # a tree from before the replica fast path
        replica_fetch = None

    def _wrap(owner, name, before=None, after=None):  # type: ignore[no-untyped-def]
        inner = getattr(owner, name)

        def wrapper(*a, **k):  # type: ignore[no-untyped-def]
            if before is not None:
                before(*a, **k)
            out = inner(*a, **k)
            if after is not None:
                after(out, *a, **k)
            return out

        setattr(owner, name, wrapper)

    # leader: a fetch arrives for a partition (replica id, offset), a follower is answered, the HW moves,
    # a produce is appended and answered
    _wrap(fetch, "_read_partition", before=lambda b, name, p, *a, **k: name and name.startswith("lat-")
          and _w("Lfin", k.get("replica_id", -1), p.fetch_offset))  # fmt: skip
    _wrap(fetch, "_response", before=lambda b, h, topics, *a, **k: any(
        (t.get("topic") or "").startswith("lat-") for t in topics) and _w("Lfout", h.client_id))  # fmt: skip
    if replica_fetch is not None:
        _wrap(replica_fetch, "_read", before=lambda b, name, rid, p, *a: name.startswith("lat-")
              and _w("Lfin", rid, p[2]))  # fmt: skip
        _wrap(replica_fetch, "_look", after=lambda out, b, req: out[1] > 0
              and any(n.startswith("lat-") for n, _ in req.topics)
              and _w("Lfout", f"replica-fetcher-{req.replica_id}"))  # fmt: skip
    _sync = partition.Partition.sync

    def _synced(self):  # type: ignore[no-untyped-def]
        hw = self.last_hw
        _sync(self)
        if self.topic.startswith("lat-") and self.replica.high_watermark != hw:
            _w("Lhw", self.replica.high_watermark)

    partition.Partition.sync = _synced
    _wrap(partition.Partition, "append", after=lambda out, self, *a, **k: self.topic.startswith("lat-")
          and _w("Lapp", self.log.log_end_offset))  # fmt: skip
    _wrap(connection.KafkaConnection, "_fill", after=lambda out, self, slot, h, body: h.api_key == 0
          and _w("Lpout", h.client_id))  # fmt: skip
    # follower: an answer arrives, is appended, the next fetch goes out
    _wrap(peer.PeerConnection, "_on_frame", before=lambda self, frame: self.client_id.startswith("replica-fetcher")
          and _w("Frecv", self.client_id, len(frame)))  # fmt: skip
    _wrap(core.PartitionReplica, "handle_fetch_response", after=lambda out, self, resp: self.topic.startswith("lat-")
          and _w("Fapp", self.broker_id, self.log.log_end_offset))  # fmt: skip
    _wrap(fetcher, "encode_replica_fetch", before=lambda cid, client, rid, *a: [
        _w("Fsend", rid, parts[0].fetch_offset) for name, parts in a[-1] if name.startswith("lat-")])  # fmt: skip
