"""Build script for the optional C record decoder; everything else is in pyproject.toml.

``optional=True``: without a C compiler or Python headers the build skips the extension
and ``consumergroup.consumer.records`` falls back to aiokafka's record readers.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "consumergroup.consumer._crecords",
            ["consumergroup/consumer/_crecords.c"],
            optional=True,
        )
    ]
)
