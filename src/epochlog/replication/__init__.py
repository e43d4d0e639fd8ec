"""epochlog.replication"""
