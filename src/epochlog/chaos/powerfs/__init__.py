"""A FUSE file system for the ``powerloss`` and ``disk`` nemeses, in the manner of Jepsen's lazyfs.

Mounted over a backing directory, it passes names through at once (create, rename, unlink, mkdir reach the
backing directory when they happen) but keeps every written byte in memory until the file is fsynced, so a
``powerloss`` command can drop exactly what a real machine would lose when the power goes: every write since
the last fsync. ``fail enospc|eio`` makes every write and fsync fail with that errno until ``heal``.

pages.py holds the unsynced state of one file; ops.py the FUSE operations; control.py the command socket;
mount.py starts, commands and unmounts the file system as a process of its own (``python -m
epochlog.chaos.powerfs``).
"""
