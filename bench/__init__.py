"""Benchmarks: consumergroup against aiokafka and confluent-kafka on the same broker and data.

Run ``python -m bench`` (or ``make bench``); see ``bench/README.md``. Never part of
``make test``.

Importing this package in the first benchmark process caches the bytecode of the Python
peers' packages (:func:`_cache_bytecode`): benchmarks measure the packages as users run
them, with bytecode cached (pip compiles at install, an interpreter writes ``__pycache__``
at the first import). Where the environment sets ``PYTHONDONTWRITEBYTECODE`` and nothing
was compiled (our venvs install with ``--no-compile``), every peer process would compile
every module it imports, about 0.3 s of CPU at start that no user pays twice, and a
peer's whole-process CPU would count it.
"""

import os
import sys

# The packages the Python peers import at start (ours, the codecs they share, the peers).
_PEER_PACKAGES = (
    "consumergroup",
    "bench",
    "aiokafka",
    "anyio",
    "async_timeout",
    "packaging",
    "confluent_kafka",
    "typing_extensions",
    "lz4",
    "cramjam",
    "backports",
)


def _cache_bytecode() -> None:
    """Write the bytecode of :data:`_PEER_PACKAGES` once per benchmark run."""
    import compileall
    import importlib.util

    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False
    for name in _PEER_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None:
            continue
        for place in spec.submodule_search_locations or ():
            compileall.compile_dir(place, quiet=1)
        if spec.submodule_search_locations is None and spec.origin and spec.origin.endswith(".py"):
            compileall.compile_file(spec.origin, quiet=1)
    # Children (the peers) inherit this and skip the walk, which would cost them CPU.
    os.environ["BENCH_BYTECODE_CACHED"] = "1"


# Only when a benchmark runs (``python -m bench...`` imports this package while argv[0] is
# "-m"), never when a test imports a benchmark module.
if sys.argv[:1] == ["-m"] and "BENCH_BYTECODE_CACHED" not in os.environ:
    _cache_bytecode()
