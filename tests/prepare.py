"""``python -m tests.prepare``: fetch and build what the suite needs, before it needs it.

Apache Kafka's jars (``mvn``, once, into the cache), the Go and Java peers
(``tests/peers``, rebuilt when their sources change) and bytecode in pyspark's zip
(``tests/spark_bytecode.py``: Spark's Python workers start in half the CPU). The tests
do the same on first use, under file locks; ``make test`` runs this in the background
from its start, so that the downloads and builds overlap the lint, type check and
sanitized C tests instead of stalling the first test that needs them. A peer whose
toolchain is missing is reported and skipped (its tests skip, saying so).
"""

from __future__ import annotations

import sys
import time

from consumergroup.testing import kafka_classpath
from tests.peers import SOURCES, PeerUnavailable, build
from tests.spark_bytecode import compile_pyspark_zip


def main() -> int:
    started = time.monotonic()
    kafka_classpath()
    print(f"prepare: Apache Kafka's jars ready ({time.monotonic() - started:.0f} s)", flush=True)
    began = time.monotonic()
    if compile_pyspark_zip() is not None:
        print(f"prepare: pyspark's zip has bytecode ({time.monotonic() - began:.0f} s)", flush=True)
    for kind in SOURCES:
        began = time.monotonic()
        try:
            build(kind)
        except PeerUnavailable as exc:
            print(f"prepare: the {kind} peer is not built: {exc}", flush=True)
            continue
        print(f"prepare: the {kind} peer is built ({time.monotonic() - began:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
