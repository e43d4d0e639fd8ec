"""epochlog.spark"""
