"""epochlog.cli"""
