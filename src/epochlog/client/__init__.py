"""epochlog.client"""
