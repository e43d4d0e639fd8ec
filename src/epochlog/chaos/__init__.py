"""`epochlog chaos`: a local cluster under workloads while a nemesis injects faults, then a check of the history."""
