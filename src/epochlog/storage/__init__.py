"""epochlog.storage"""
