"""Build script for the optional C extensions and the index's README; the rest is in
pyproject.toml.

``optional=True``: without a C compiler or Python headers the build skips them:
``consumergroup.consumer.records`` falls back to its pure-Python parsers and
``PartitionConsumer.messages()`` to an async generator, ``consumergroup.producer.batch``
to its Python record encoder.
"""

import re
import tomllib
from pathlib import Path

from setuptools import Extension, setup

HERE = Path(__file__).resolve().parent


def readme_for_the_index() -> str:
    """README.md with its repository-relative links (``docs/guides/spark.md``) pointing at
    the hosted repository: the index shows the README outside the repository."""
    pyproject = tomllib.loads((HERE / "pyproject.toml").read_text(encoding="utf-8"))
    base = pyproject["project"]["urls"]["Repository"].rstrip("/") + "/blob/main/"
    text = (HERE / "README.md").read_text(encoding="utf-8")
    relative = re.compile(r"(\]\()(?![a-zA-Z][a-zA-Z0-9+.-]*:|#|/)([^)\s]+)")
    return relative.sub(lambda m: m.group(1) + base + m.group(2), text)


setup(
    long_description=readme_for_the_index(),
    long_description_content_type="text/markdown",
    ext_modules=[
        Extension(
            "consumergroup.consumer._crecords",
            ["consumergroup/consumer/_crecords.c"],
            depends=["consumergroup/_cslots.h"],
            optional=True,
        ),
        Extension(
            "consumergroup.consumer._cstream",
            ["consumergroup/consumer/_cstream.c"],
            depends=["consumergroup/_cslots.h"],
            optional=True,
        ),
        Extension(
            "consumergroup.producer._cproduce",
            ["consumergroup/producer/_cproduce.c"],
            depends=["consumergroup/_cslots.h"],
            optional=True,
        ),
    ]
)
