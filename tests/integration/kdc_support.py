"""An MIT Kerberos KDC started by a test, on 127.0.0.1, with its own realm.

:class:`KDC` writes a ``kdc.conf`` and a ``krb5.conf`` into a fresh directory,
creates the realm's database (``kdb5_util``), starts ``krb5kdc`` in the foreground
on a free port (TCP and UDP, loopback only) and makes principals and keytabs with
``kadmin.local``. Everything stays in the directory; stopping kills the KDC (our
own process, by its pid) and removes it.

The binaries come from Debian's ``krb5-kdc`` and ``krb5-admin-server`` (``make
test`` installs them where apt-get can); without them :func:`missing_kerberos`
says what to install and the tests that need a KDC skip with that message.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Self

from consumergroup.testing import free_port

REALM = "CONSUMERGROUP.TEST"
_SBIN = "/usr/sbin:/usr/local/sbin"
_TOOLS = ("krb5kdc", "kdb5_util", "kadmin.local", "kinit")


def _which(tool: str) -> str | None:
    return shutil.which(tool) or shutil.which(tool, path=_SBIN)


def missing_kerberos() -> str | None:
    """Why a KDC cannot be run here (None when it can)."""
    missing = [tool for tool in _TOOLS if _which(tool) is None]
    if missing:
        return (
            f"needs MIT Kerberos' KDC ({', '.join(missing)} not found): apt-get install "
            "krb5-kdc krb5-admin-server krb5-user (make test installs them where apt-get can)"
        )
    try:
        import gssapi  # noqa: F401
    except ImportError:
        return (
            "needs the gssapi package (pip install 'consumergroup[gssapi]', which builds "
            "against libkrb5-dev; make test installs both where apt-get can)"
        )
    return None


class KDC:
    """A KDC for :data:`REALM` on a free loopback port; ``async with`` runs it."""

    def __init__(self) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="consumergroup-kdc-"))
        self.port = free_port()
        self.krb5_conf = self.home / "krb5.conf"
        self._proc: asyncio.subprocess.Process | None = None

    @property
    def env(self) -> dict[str, str]:
        """The environment MIT's tools and libraries need for this realm."""
        return {
            "KRB5_CONFIG": str(self.krb5_conf),
            "KRB5_KDC_PROFILE": str(self.home / "kdc.conf"),
        }

    async def __aenter__(self) -> Self:
        try:
            self._write_configs()
            self._run("kdb5_util", "create", "-s", "-r", REALM, "-P", "master-password")
            log = (self.home / "krb5kdc.out").open("ab")
            with log:
                self._proc = await asyncio.create_subprocess_exec(
                    str(_which("krb5kdc")),
                    "-n",  # foreground: the process we started is the KDC
                    "-r",
                    REALM,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    env={**os.environ, **self.env},
                )
            await self._wait_listening()
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            proc.kill()
            await proc.wait()
        shutil.rmtree(self.home, ignore_errors=True)

    def _write_configs(self) -> None:
        listen = f"127.0.0.1:{self.port}"
        (self.home / "kdc.conf").write_text(
            "[kdcdefaults]\n"
            f" kdc_listen = {listen}\n"
            f" kdc_tcp_listen = {listen}\n"
            "[realms]\n"
            f" {REALM} = {{\n"
            f"  database_name = {self.home / 'principal'}\n"
            f"  key_stash_file = {self.home / 'stash'}\n"
            f"  acl_file = {self.home / 'kadm5.acl'}\n"
            f"  kdc_listen = {listen}\n"
            f"  kdc_tcp_listen = {listen}\n"
            "  max_life = 1h\n"
            "  supported_enctypes = aes256-cts-hmac-sha1-96:normal "
            "aes128-cts-hmac-sha1-96:normal\n"
            " }\n"
            "[logging]\n"
            f" kdc = FILE:{self.home / 'kdc.log'}\n"
        )
        (self.home / "kadm5.acl").write_text("")
        # No DNS: the broker's host name is taken as dialed (127.0.0.1), not canonicalized
        # or reverse-resolved; TCP only (Java and MIT alike).
        self.krb5_conf.write_text(
            "[libdefaults]\n"
            f" default_realm = {REALM}\n"
            " dns_lookup_realm = false\n"
            " dns_lookup_kdc = false\n"
            " dns_canonicalize_hostname = false\n"
            " rdns = false\n"
            " udp_preference_limit = 1\n"
            " ticket_lifetime = 1h\n"
            "[realms]\n"
            f" {REALM} = {{\n"
            f"  kdc = 127.0.0.1:{self.port}\n"
            " }\n"
            "[domain_realm]\n"
            f" 127.0.0.1 = {REALM}\n"
        )

    def _run(self, tool: str, *args: str) -> str:
        done = subprocess.run(
            [str(_which(tool)), *args],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, **self.env},
            check=False,
        )
        assert done.returncode == 0, f"{tool} {' '.join(args)}: {done.stdout}{done.stderr}"
        return done.stdout

    async def _wait_listening(self) -> None:
        async with asyncio.timeout(20):
            while True:
                assert self._proc is not None
                if self._proc.returncode is not None:
                    log = (self.home / "krb5kdc.out").read_text(errors="replace")
                    raise AssertionError(f"krb5kdc exited ({self._proc.returncode}): {log}")
                with (
                    contextlib.suppress(OSError),
                    socket.create_connection(("127.0.0.1", self.port), timeout=1),
                ):
                    return
                await asyncio.sleep(0.05)

    def principal(self, name: str) -> str:
        """``name@REALM``."""
        return f"{name}@{REALM}"

    def keytab(self, name: str) -> Path:
        """A new principal ``name`` with random keys, and a keytab holding them."""
        principal = self.principal(name)
        path = self.home / f"{name.replace('/', '_')}.keytab"
        self._run("kadmin.local", "-r", REALM, "-q", f"addprinc -randkey {principal}")
        self._run("kadmin.local", "-r", REALM, "-q", f"ktadd -k {path} {principal}")
        return path

    def kinit(self, name: str, keytab: Path) -> Path:
        """A ticket cache holding ``name``'s TGT (``kinit -kt``); its path."""
        ccache = self.home / f"ccache-{name.replace('/', '_')}"
        self._run("kinit", "-kt", str(keytab), "-c", f"FILE:{ccache}", self.principal(name))
        return ccache
