"""Peer: kcat (librdkafka's C consumer, no Python per message) as a group member: the C reference.

``kcat -C -G <group> -e -q -f '\\n'``: a balanced consumer from the earliest offset that
prints one byte per message to a pipe (buffered) and exits at the end of every
partition. This wrapper counts the bytes; CPU and peak RSS are kcat's own (``/proc``
while it runs, ``wait4`` at its exit), not the wrapper's. Throughput mode only.

Needs the ``kcat`` binary (Debian package ``kcat``; ``make bench`` installs it with
apt-get when it can). Without it the peer fails with a message saying so.

Debian bookworm's kcat links librdkafka 2.0.2, which fails the ApiVersions exchange with
the embedded Tansu broker ("Read underflow"). kcat is therefore run against the
librdkafka that the confluent-kafka wheel bundles (2.16, the confluent peer's), when
that wheel is installed: same C consumer, same version as the confluent peer.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

from ._common import emit, emit_throughput, parse_args

_CLK_TCK = os.sysconf("SC_CLK_TCK")


def _proc_cpu(pid: int) -> float:
    """user+sys CPU seconds of ``pid`` from ``/proc/<pid>/stat`` (0 when gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # After the command name: state is field 3, utime 14, stime 15 (1-based).
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def _proc_hwm_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _bundled_librdkafka_env() -> dict[str, str]:
    """An environment whose ``LD_LIBRARY_PATH`` serves confluent-kafka's bundled
    librdkafka as ``librdkafka.so.1`` (unchanged environment without the wheel)."""
    try:
        import confluent_kafka
    except ImportError:
        return dict(os.environ)
    site = os.path.dirname(os.path.dirname(confluent_kafka.__file__))
    libs = glob.glob(os.path.join(site, "confluent_kafka.libs", "librdkafka-*.so*"))
    if not libs:
        return dict(os.environ)
    libdir = tempfile.mkdtemp(prefix="bench-kcat-")
    os.symlink(libs[0], os.path.join(libdir, "librdkafka.so.1"))
    path = os.environ.get("LD_LIBRARY_PATH")
    return {**os.environ, "LD_LIBRARY_PATH": f"{libdir}:{path}" if path else libdir}


def main() -> None:
    """Run kcat to the end of the topic and report like the other peers."""
    args = parse_args("kcat balanced consumer peer (C reference)")
    emit({"ev": "hello", "t": time.monotonic()})
    if args.mode != "throughput":
        sys.exit("the kcat peer runs in throughput mode only")
    exe = shutil.which("kcat") or shutil.which("kafkacat")
    if exe is None:
        sys.exit("kcat is not installed: apt-get install kcat (or leave the kcat peer out)")
    cmd = [
        exe,
        "-C",
        "-b",
        args.bootstrap,
        "-G",
        args.group,
        "-X",
        "auto.offset.reset=earliest",
        "-X",
        "client.id=bench-kcat",
        "-X",
        f"session.timeout.ms={int(args.session_timeout * 1000)}",
        "-X",
        f"heartbeat.interval.ms={int(args.heartbeat * 1000)}",
        "-X",
        "auto.commit.interval.ms=1000",
        "-e",
        "-q",
        "-f",
        "\\n",
        args.topic,
    ]
    emit({"ev": "start", "t": time.monotonic()})
    env = _bundled_librdkafka_env()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, bufsize=0, env=env)
    assert proc.stdout is not None
    count = n_first = 0
    t_first = t_last = cpu_first = 0.0
    hwm = 0
    next_hwm = 0.0
    while count < args.expect:
        data = proc.stdout.read(1 << 16)
        if not data:
            break
        now = time.monotonic()
        count += data.count(b"\n")
        if not t_first:
            t_first, n_first, cpu_first = now, count, _proc_cpu(proc.pid)
        if now >= next_hwm:
            hwm = max(hwm, _proc_hwm_kb(proc.pid))
            next_hwm = now + 0.1
        t_last = now
    hwm = max(hwm, _proc_hwm_kb(proc.pid))
    if count >= args.expect:
        proc.terminate()  # -e ends it at the last partition's end; do not wait for that
    _, status, ru = os.wait4(proc.pid, 0)
    for libdir in env.get("LD_LIBRARY_PATH", "").split(":"):
        if os.path.basename(libdir).startswith("bench-kcat-"):
            shutil.rmtree(libdir, ignore_errors=True)
    emit_throughput(
        count,
        n_first,
        cpu_first,
        t_first,
        t_last,
        maxrss_kb=hwm or ru.ru_maxrss,
        ru_maxrss_kb=ru.ru_maxrss,
        cpu_user=ru.ru_utime,
        cpu_sys=ru.ru_stime,
        exit_status=status,
    )


if __name__ == "__main__":
    main()
