"""The JVM settings of every Spark process the Spark tests start.

Drivers (the tests' local sessions, ``spark-submit`` runs, the example) read
``tests/spark-conf/spark-defaults.conf`` through ``SPARK_CONF_DIR``; the standalone
cluster's master and workers take ``SPARK_DAEMON_JAVA_OPTS``; the short-lived launcher
JVM that ``spark-class`` runs before each of them takes ``SPARK_LAUNCHER_OPTS``. Every
one of them runs small jobs for seconds: C1 only and the serial collector spend far less
CPU than C2 and the parallel collector, which pay back only on long runs.

:func:`configure` sets these in this process's environment (subprocesses inherit it);
the conftest calls it before the first Spark test.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The options of the daemons and the launcher (drivers and executors: spark-defaults.conf).
JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
CONF_DIR = Path(__file__).resolve().parent / "spark-conf"


def configure() -> None:
    """Point Spark's launchers at the tests' settings (idempotent)."""
    os.environ["SPARK_CONF_DIR"] = str(CONF_DIR)
    os.environ["SPARK_DAEMON_JAVA_OPTS"] = JAVA_OPTIONS
    os.environ["SPARK_LAUNCHER_OPTS"] = JAVA_OPTIONS
