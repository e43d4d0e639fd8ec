"""epochlog.sim"""
