"""The compiled pieces: the record walker of produce validation (protocol/_native/record_walk.c), the
log cleaner's record scans (storage/cleaner/_native/cleaner_scan.c) and the TLS listeners' record reader
(security/_native/tls_drain.c, which needs OpenSSL's headers).

Optional: where no C compiler is present the build skips them and protocol/record_walk.py and
storage/cleaner/record_filter.py do the same in Python (same answers, slower). Everything else is in
pyproject.toml.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "epochlog.protocol._native._record_walk",
            ["src/epochlog/protocol/_native/record_walk.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        Extension(
            "epochlog.security._native._tls_drain",
            ["src/epochlog/security/_native/tls_drain.c"],
            optional=True,
            extra_compile_args=["-O2"],
            libraries=["ssl"],
        ),
        Extension(
            "epochlog.storage.cleaner._native._cleaner_scan",
            ["src/epochlog/storage/cleaner/_native/cleaner_scan.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
    ]
)
