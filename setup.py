"""The one compiled piece: the record walker of produce validation (protocol/_native/record_walk.c).

Optional: where no C compiler is present the build skips it and protocol/record_walk.py walks records
in Python (same answers, slower). Everything else is in pyproject.toml.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "epochlog.protocol._native._record_walk",
            ["src/epochlog/protocol/_native/record_walk.c"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)
