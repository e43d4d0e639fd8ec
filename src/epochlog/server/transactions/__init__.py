"""The broker's side of transactions: the coordinator driver (``coordinators.py``), the marker sender
(``markers.py``) and the marker writes on led partitions (``partition_markers.py``). The decisions are
``epochlog.transactions``'s."""
