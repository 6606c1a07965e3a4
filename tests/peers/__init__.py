"""Real peers for our groups: Go's sarama and franz-go, Java's ``KafkaConsumer``, built once.

``command("sarama")`` / ``command("franz")`` / ``command("java")`` build the peer (once,
into the repo-local ``.cache/peers/``; a file lock serialises parallel test workers, a stamp
of the sources decides when to rebuild) and return the command line that runs it. The tests
and the benchmarks run the same programs:

* ``sarama/main.go`` — ``github.com/IBM/sarama`` (version in ``sarama/go.mod``), built with
  ``go build`` from the Go module proxy into ``<downloads>/go``;
* ``franz/main.go`` — ``github.com/twmb/franz-go`` (version in ``franz/go.mod``): a
  ``PollFetches`` loop marking each partition's last record (``MarkCommitRecords``,
  auto-commit of marks), built like sarama; both Go peers share ``peerio/`` (the clock,
  rusage, the JSON-lines output);
* ``java/`` — ``org.apache.kafka:kafka-clients`` (version in ``java/pom.xml``), built with
  ``mvn package`` from Maven Central into ``<downloads>/m2``.

``<downloads>`` is ``$CONSUMERGROUP_CACHE`` (where Apache Kafka's jars go too), else the
repo-local ``.cache``: a fresh clone pointed at a cache builds the peers without fetching
their modules again (that fetch took 2-5 minutes of ``make test``'s start).

All take the same options (``--bootstrap --topic --group --mode stream|throughput --expect N
--session-timeout S --heartbeat S --rebalance-timeout S --assignor range|roundrobin|sticky|
cooperative-sticky --instance-id ID --client-id ID --commit-interval S --records``; the Java
one also ``--protocol classic|consumer --remote-assignor NAME --isolation LEVEL``) and report
in the JSON-lines protocol of :mod:`bench.peers._common`, plus ``records`` events (every
message's ``[partition, offset]``, with ``--records``) and ``closed`` once the member left.
A line on stdin, stdin closing or SIGTERM stops a peer cleanly (final commit, LeaveGroup).
:class:`PeerProcess` runs one from a test.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CACHE = ROOT / ".cache"
BUILD = CACHE / "peers"  # built from this clone's sources: repo-local always
BUILD_TIMEOUT = 900.0

#: kind -> (source directory, the tool the build needs)
SOURCES = {
    "sarama": (HERE / "sarama", "go"),
    "franz": (HERE / "franz", "go"),
    "java": (HERE / "java", "mvn"),
}

#: The Go peers' shared package (a local module each go.mod replaces).
GO_SHARED = HERE / "peerio"


class PeerUnavailable(RuntimeError):
    """A peer cannot be built here; the message says what is missing."""


def _stamp(source: Path) -> str:
    """A hash of every source file of a peer (what a rebuild depends on)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(source)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    BUILD.mkdir(parents=True, exist_ok=True)
    with open(BUILD / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel test workers build once
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run(cmd: list[str], cwd: Path, env: dict[str, str], what: str) -> None:
    try:
        done = subprocess.run(
            cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT
        )
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"building {what} took over {BUILD_TIMEOUT:.0f}s: {cmd}") from exc
    if done.returncode != 0:
        raise RuntimeError(
            f"building {what} failed ({' '.join(cmd)} in {cwd}, exit {done.returncode}):\n"
            f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )


def _downloads() -> Path:
    """Where the peers' modules and Maven's repository go (module docstring)."""
    return Path(os.environ.get("CONSUMERGROUP_CACHE") or CACHE)


def _build_go(source: Path, out: Path, binary: str) -> None:
    downloads = _downloads()
    env = {
        **os.environ,
        # Go's module cache takes its own locks: clones sharing it build side by side.
        "GOPATH": str(downloads / "go"),
        "GOMODCACHE": str(downloads / "go" / "mod"),
        # GOCACHE stays Go's own (per user): compiled packages, not downloads, shared by every
        # clone on the machine, so a fresh clone links the peers in seconds, not minutes.
        "GOFLAGS": "-modcacherw",
        "GOTOOLCHAIN": "local",  # never download a Go toolchain
    }
    if not any(os.environ.get(v) for v in ("GOCACHE", "XDG_CACHE_HOME", "HOME")):
        env["GOCACHE"] = str(downloads / "go" / "build")  # Go finds no per-user cache directory
    _run(["go", "build", "-o", str(out / binary), "."], source, env, f"the {binary}")


def _build_java(source: Path, out: Path) -> None:
    repository = _downloads() / "m2"
    cmd = [
        "mvn",
        "-q",
        "-B",
        f"-Dmaven.repo.local={repository}",
        f"-Dpeer.build.dir={out}",
        "package",
    ]
    # Maven does not lock its repository: one build at a time writes to a shared one.
    repository.mkdir(parents=True, exist_ok=True)
    with open(repository.parent / "m2.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _run(cmd, source, dict(os.environ), "the Java peer")


def build(kind: str) -> Path:
    """Build peer ``kind`` (``"sarama"``, ``"franz"`` or ``"java"``) unless its build is
    current; its dir.

    Raises :class:`PeerUnavailable` when the toolchain is missing (``go`` for the Go peers,
    ``mvn`` and ``java`` for the Java peer), ``RuntimeError`` when the build fails.
    """
    if kind not in SOURCES:
        raise ValueError(f"unknown peer {kind!r}: choose one of {sorted(SOURCES)}")
    source, tool = SOURCES[kind]
    for needed in (tool, "java") if kind == "java" else (tool,):
        if shutil.which(needed) is None:
            raise PeerUnavailable(
                f"the {kind} peer needs `{needed}` on PATH "
                f"({'Go 1.26+' if needed == 'go' else 'Maven 3.8+ and Java 17+'})"
            )
    out = BUILD / kind
    stamp = _stamp(source) + (_stamp(GO_SHARED) if tool == "go" else "")
    with _locked(kind):
        stamp_file = out / ".stamp"
        if stamp_file.exists() and stamp_file.read_text() == stamp:
            return out
        out.mkdir(parents=True, exist_ok=True)
        if kind == "java":
            _build_java(source, out)
        else:
            _build_go(source, out, f"{kind}-peer")
        stamp_file.write_text(stamp)
    return out


def _java_classpath(out: Path) -> str:
    return os.pathsep.join([str(out / "java-peer-1.jar"), str(out / "lib" / "*")])


def command(kind: str) -> list[str]:
    """The command line that runs peer ``kind`` (built first when needed)."""
    out = build(kind)
    if kind != "java":
        return [str(out / f"{kind}-peer")]
    return [
        "java",
        "-XX:+UseSerialGC",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp",
        _java_classpath(out),
        "peer.JavaPeer",
    ]


#: The JVM settings of a tool's short run (C1 only, the serial collector): a third less CPU
#: (``kafka-share-groups.sh --list``: 3.3 -> 2.2 CPU-s). The peers keep the JVM's defaults
#: (the benchmarks compare them).
TOOL_JVM = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def tool_command(main: str, *args: str, log_level: str = "warn") -> list[str]:
    """The command line that runs class ``main`` (one of Kafka's tools, e.g.
    ``org.apache.kafka.tools.LeaderElectionCommand``, or a helper of the Java peer) with
    ``args``, from the Java peer's classpath (built first when needed; blocks, and raises
    :class:`PeerUnavailable` as :func:`build` does)."""
    return [
        "java",
        *TOOL_JVM,
        f"-Dorg.slf4j.simpleLogger.defaultLogLevel={log_level}",
        "-cp",
        _java_classpath(build("java")),
        main,
        *args,
    ]


class PeerProcess:
    """One running peer: its reported events, the records it handled, and a bounded stop.

    ``events``: every JSON line but ``consumed``/``records``; ``records``: the
    ``(partition, offset)`` of every message handled (with ``--records``).
    """

    def __init__(self, kind: str, args: list[str]) -> None:
        self.kind = kind
        self.args = args
        self.events: list[dict[str, Any]] = []
        self.records: list[tuple[int, int]] = []
        self.stderr = b""
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._err_reader: asyncio.Task[bytes] | None = None

    async def start(self) -> PeerProcess:
        """Spawn it (the build runs in a thread: it may take a minute the first time)."""
        cmd = await asyncio.to_thread(command, self.kind)
        self._proc = await asyncio.create_subprocess_exec(
            *cmd,
            *self.args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=64 * 1024 * 1024,
        )
        self._reader = asyncio.create_task(self._read())
        assert self._proc.stderr is not None
        self._err_reader = asyncio.create_task(self._proc.stderr.read())
        return self

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        while line := await self._proc.stdout.readline():
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if obj.get("ev") == "records":
                self.records.extend((int(p), int(o)) for p, o in obj["items"])
            elif obj.get("ev") != "consumed":
                self.events.append(obj)

    @property
    def running(self) -> bool:
        """Whether the process has not exited."""
        return self._proc is not None and self._proc.returncode is None

    def owned(self) -> set[int]:
        """Partitions owned now, from the assigned/revoked/lost events (increments or whole)."""
        owned: set[int] = set()
        for e in self.events:
            if e["ev"] == "assigned":
                owned |= set(e["parts"])
            elif e["ev"] in ("revoked", "lost"):
                owned -= set(e["parts"])
        return owned

    def has(self, ev: str) -> bool:
        """Whether the peer reported event ``ev``."""
        return any(e["ev"] == ev for e in self.events)

    async def stop(self, timeout: float = 30.0) -> int:
        """Ask it to stop (a line on stdin), kill it after ``timeout``; its exit code."""
        proc = self._proc
        assert proc is not None
        if proc.returncode is None and proc.stdin is not None:
            with contextlib.suppress(OSError, RuntimeError):
                proc.stdin.write(b"stop\n")
                await proc.stdin.drain()
                proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
        for task in (self._reader, self._err_reader):
            if task is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(task), 5)
        if self._err_reader is not None and self._err_reader.done():
            self.stderr = self._err_reader.result()
        return proc.returncode if proc.returncode is not None else -1

    def kill(self) -> None:
        """SIGKILL (no commit, no LeaveGroup)."""
        if self._proc is not None and self._proc.returncode is None:
            self._proc.kill()
