"""epochlog.protocol"""
