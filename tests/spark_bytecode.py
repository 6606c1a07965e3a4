"""Compiled bytecode in pyspark's ``pyspark.zip``, so that Spark's Python workers start fast.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on the path of every Python
process it starts, and the pip wheel ships that zip with sources only: a zip import
cannot write bytecode, so each worker compiles the pyspark modules it imports again
(~1 s of CPU on top of ~1 s of imports). The driver waits 10 s, hard-coded, for a
non-daemon worker (Python data source planning, the streaming source runner) to connect
back ("Timed out while waiting for the Python worker to connect back"): under a heavy
load a worker that compiles first misses it. ``compile_pyspark_zip()`` adds unchecked
hash-based ``.pyc`` files beside the sources in the zip (PEP 552), compiled under the
zip's own path as a zip import names them: a zip import uses them as they are; an
interpreter of another version ignores them (another magic number) and compiles.

Run by ``python -m tests.prepare`` and by the Spark tests' fixtures (idempotent, under a
file lock: a zip that already has bytecode is left alone).
"""

from __future__ import annotations

import compileall
import fcntl
import importlib.util
import os
import py_compile
import re
import tempfile
import warnings
import zipfile
from pathlib import Path

#: Never imported by a worker: pyspark's own tests (half the sources).
_NOT_IMPORTED = re.compile(r"[/\\]tests[/\\]")


def pyspark_zip() -> Path | None:
    """The ``pyspark.zip`` of the installed pyspark, or None (no [spark] extra)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "python" / "lib" / "pyspark.zip"
    return path if path.is_file() else None


#: Written into the zip with the bytecode. A zip compiled before the bytecode named its
#: sources by the zip's path (it named a deleted temporary tree, and Spark's tracebacks
#: grew by the source lines found there) has bytecode but no marker: compiled again.
_MARKER = "pyspark/_consumergroup_bytecode_v2"


def has_bytecode(path: Path) -> bool:
    """True when the zip holds our compiled bytecode for pyspark's package."""
    with zipfile.ZipFile(path) as zf:
        return _MARKER in zf.NameToInfo


def compile_pyspark_zip() -> Path | None:
    """Add bytecode to pyspark's zip unless it has some; return the zip (None: no pyspark)."""
    path = pyspark_zip()
    if path is None or has_bytecode(path):
        return path
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # test processes started at once compile it once
        if has_bytecode(path):
            return path
        with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
            tree = Path(tmp) / "tree"
            with zipfile.ZipFile(path) as zf:
                zf.extractall(tree)
                names = [n for n in zf.namelist() if not n.endswith(".pyc")]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # pyspark's own SyntaxWarnings
                compileall.compile_dir(
                    tree,
                    quiet=1,
                    rx=_NOT_IMPORTED,
                    ddir=str(path),  # tracebacks name <zip>/pyspark/..., as a zip import does
                    force=True,
                    legacy=True,  # module.pyc beside module.py: where a zip import looks
                    invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
                )
            compiled = sorted(str(p.relative_to(tree)) for p in tree.rglob("*.pyc") if p.is_file())
            staged = Path(tmp) / "pyspark.zip"
            with zipfile.ZipFile(staged, "w", zipfile.ZIP_DEFLATED) as out:
                for name in [*names, *compiled]:
                    out.write(tree / name, name)
                out.writestr(_MARKER, "")
            os.replace(staged, path)  # a worker starting now sees the old zip or the new
    return path
