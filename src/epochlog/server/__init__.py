"""epochlog.server"""
