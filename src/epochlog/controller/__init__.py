"""epochlog.controller"""
