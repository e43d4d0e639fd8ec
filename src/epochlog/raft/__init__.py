"""The metadata quorum's consensus core (KIP-595), free of I/O like replication/ and controller/."""
