"""A Spark standalone cluster on loopback, started from the pip ``pyspark`` install.

For tests and benchmarks of Spark jobs (ours, and users' own)::

    with SparkStandalone(workers=2) as cluster:
        spark = SparkSession.builder.master(cluster.master_url)...getOrCreate()

One master and ``workers`` workers (``bin/spark-class ...deploy.master.Master`` /
``...deploy.worker.Worker`` of the installed pyspark), each its own JVM on
127.0.0.1 with free ports, small memory and cores, logs and work directories
under a temporary directory. Each worker runs in a process group of its own with
the executors it launches, so :meth:`SparkStandalone.kill_worker` loses a
"machine" at once. On Linux every daemon dies with the process that started it,
even when that one is SIGKILLed (the executors then exit as their worker is gone).
Needs Java 17+ on ``PATH`` or in ``JAVA_HOME``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from ..errors import ConsumerGroupError
from ..testing import _die_with_parent, free_port

__all__ = ["SparkStandalone", "SparkStandaloneError", "spark_home"]

#: Seconds a daemon's JVM gets to come up (two cores shared: JVMs start slowly).
START_TIMEOUT = 120.0


class SparkStandaloneError(ConsumerGroupError):
    """The cluster could not be started (no pyspark, no Java, a daemon did not come up)."""


def spark_home() -> Path:
    """The installed pyspark package directory (a complete SPARK_HOME: bin/, jars/)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise SparkStandaloneError("pyspark is not installed: pip install 'consumergroup[spark]'")
    return Path(next(iter(spec.submodule_search_locations)))


class _Daemon:
    """One Spark daemon process and its web UI port (its JSON status lives there)."""

    def __init__(self, name: str, proc: subprocess.Popen[bytes], ui_port: int) -> None:
        self.name = name
        self.proc = proc
        self.ui_port = ui_port

    def status(self) -> dict[str, Any] | None:
        """The daemon's ``/json/`` page, or None while it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as r:
                data: dict[str, Any] = json.load(r)
                return data
        except (OSError, ValueError):
            return None

    def kill(self) -> None:
        """SIGKILL the daemon's process group (a worker's executors with it)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


class SparkStandalone:
    """A standalone master and ``workers`` workers of ``cores`` cores and ``memory`` each."""

    def __init__(self, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        self.cores = cores
        self.memory = memory
        self._initial_workers = workers
        self._dir = Path(tempfile.mkdtemp(prefix="cg-spark-standalone-"))
        self.master_port = free_port()
        self._master: _Daemon | None = None
        #: The workers started so far, in order (killed ones stay, dead).
        self.workers: list[_Daemon] = []

    @property
    def master_url(self) -> str:
        """``spark://127.0.0.1:<port>``, for ``SparkSession.builder.master``/``--master``."""
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def log_dir(self) -> Path:
        """Where each daemon writes its log (``master.log``, ``worker-N.log``)."""
        return self._dir / "logs"

    def __enter__(self) -> SparkStandalone:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def start(self) -> None:
        """Start the master and the workers; return once every worker is registered."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        try:
            ui = free_port()
            self._master = self._spawn(
                "master",
                "org.apache.spark.deploy.master.Master",
                ["--host", "127.0.0.1", "--port", str(self.master_port), "--webui-port", str(ui)],
                ui,
            )
            for _ in range(self._initial_workers):
                self.start_worker(wait=False)
            self._wait_registered(self.workers)
        except BaseException:
            self.close()
            raise

    def start_worker(self, *, wait: bool = True) -> int:
        """Start one more worker (e.g. after :meth:`kill_worker`); return its index."""
        index = len(self.workers)
        ui = free_port()
        work = self._dir / f"work-{index}"
        work.mkdir()
        args = [self.master_url, "--host", "127.0.0.1", "--port", str(free_port())]
        args += ["--webui-port", str(ui), "--cores", str(self.cores), "--memory", self.memory]
        args += ["--work-dir", str(work)]
        self.workers.append(
            self._spawn(f"worker-{index}", "org.apache.spark.deploy.worker.Worker", args, ui)
        )
        if wait:
            self._wait_registered([self.workers[index]])
        return index

    def kill_worker(self, index: int) -> None:
        """SIGKILL worker ``index`` with its executors and their Python workers."""
        self.workers[index].kill()

    def worker_ui_port(self, index: int) -> int:
        """The web UI port of worker ``index`` (executor log links of Spark name it)."""
        return self.workers[index].ui_port

    def close(self) -> None:
        """Kill every daemon (executors included) and remove the directory (idempotent)."""
        for daemon in [*self.workers, *([self._master] if self._master else [])]:
            daemon.kill()
        self.workers = []
        self._master = None
        shutil.rmtree(self._dir, ignore_errors=True)

    def _spawn(self, name: str, cls: str, args: list[str], ui_port: int) -> _Daemon:
        home = spark_home()
        conf = self._dir / "conf"  # empty: no spark-defaults or env of the host apply
        conf.mkdir(exist_ok=True)
        env = {
            **os.environ,
            "SPARK_HOME": str(home),
            "SPARK_CONF_DIR": str(conf),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": "256m",
            "SPARK_LOG_DIR": str(self.log_dir),
        }
        owner = os.getpid()
        pdeathsig = (lambda: _die_with_parent(owner)) if sys.platform == "linux" else None
        with (self.log_dir / f"{name}.log").open("ab") as log:
            proc = subprocess.Popen(
                [str(home / "bin" / "spark-class"), cls, *args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                start_new_session=True,  # its executors join its group: kill_worker kills all
                preexec_fn=pdeathsig,
            )
        return _Daemon(name, proc, ui_port)

    def _wait_registered(self, workers: list[_Daemon]) -> None:
        """Wait until the master lists each of ``workers`` (by web UI) as ALIVE."""
        assert self._master is not None
        wanted = {f"http://127.0.0.1:{w.ui_port}" for w in workers}
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            for daemon in [self._master, *workers]:
                if daemon.proc.poll() is not None:
                    raise SparkStandaloneError(self._failed(daemon, "exited"))
            status = self._master.status() or {}
            alive = {
                w.get("webuiaddress")
                for w in status.get("workers", [])
                if w.get("state") == "ALIVE"
            }
            if wanted <= alive:
                return
            if time.monotonic() > deadline:
                raise SparkStandaloneError(self._failed(self._master, "did not list the workers"))
            time.sleep(0.2)

    def _failed(self, daemon: _Daemon, what: str) -> str:
        tail = (self.log_dir / f"{daemon.name}.log").read_text(errors="replace")[-2000:]
        return f"Spark {daemon.name} {what} within {START_TIMEOUT:.0f} s; its log ends:\n{tail}"
