"""Compiled helpers of the cleaner (optional; record_filter.py has the same rules in Python)."""
