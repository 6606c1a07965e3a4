"""Build script for the optional C extensions; everything else is in pyproject.toml.

``optional=True``: without a C compiler or Python headers the build skips them:
``consumergroup.consumer.records`` falls back to its pure-Python parsers and
``PartitionConsumer.messages()`` to an async generator.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "consumergroup.consumer._crecords",
            ["consumergroup/consumer/_crecords.c"],
            optional=True,
        ),
        Extension(
            "consumergroup.consumer._cstream",
            ["consumergroup/consumer/_cstream.c"],
            optional=True,
        ),
    ]
)
