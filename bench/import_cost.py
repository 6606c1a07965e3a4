"""What starting to use consumergroup costs: ``python -m bench.import_cost``.

Each case is a fresh interpreter (``python -c CODE``), run ``--reps`` times (default 31),
the cases interleaved (A B C ..., A B C ...), and measured as that child's CPU time
(user + system, ``os.wait4``), minus the median of an interpreter that imports nothing
(``python -c pass``). Medians. Where ``perf`` can count instructions, each case is also
counted once (user-space instructions, minus the empty interpreter's): stable where the
CPU time of a loaded machine is not.

Cases: ``import aiokafka`` (the yardstick), ``import confluent_kafka``, ``import
consumergroup``; ``consumergroup --help`` (the console script's launcher,
``consumergroup.cli.run(["--help"])``, which answers without click) and the same help
through the click group that every other command line reaches (``main(["-v", "--help"])``);
what a consumer program loads before it connects (``import consumergroup``, then
``cg.ConsumerGroup`` and the decoders); and a member's start-up: that, a default
``Config()`` (its range assignor) and anyio's asyncio backend, which the group's first
``CancelScope``/``Event`` imports once the member runs (every module of ours and of its
dependencies that the benchmark's ``cg_batches`` peer has loaded at its first record).

Bytecode: by default every case runs with compiled bytecode, as an installed package
does (``PYTHONPYCACHEPREFIX`` = ``$CONSUMERGROUP_CACHE/pycache``, written by a warm-up
run of each case, ``PYTHONDONTWRITEBYTECODE`` cleared); ``--compile`` measures with no
bytecode at all, compiling every module on every start (a read-only install, or an
environment with ``PYTHONDONTWRITEBYTECODE=1`` and no ``__pycache__``).

Targets: ``import consumergroup`` <= 0.7x ``import aiokafka``; ``consumergroup --help``
<= ``import consumergroup`` + 20 ms.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CASES: dict[str, str] = {
    "nothing": "pass",
    "import aiokafka": "import aiokafka",
    "import confluent_kafka": "import confluent_kafka",
    "import consumergroup": "import consumergroup",
    "consumergroup --help": (
        "from consumergroup.cli import run\n"
        "try:\n    run(['--help'])\nexcept SystemExit:\n    pass"
    ),
    "consumergroup -v --help (through click)": (
        "from consumergroup.cli import main\n"
        "try:\n    main(['-v', '--help'])\nexcept SystemExit:\n    pass"
    ),
    "consumer path (cg.ConsumerGroup + decoders)": (
        "import consumergroup as cg\ncg.ConsumerGroup\nimport consumergroup.consumer.records"
    ),
    "consumer path + anyio's asyncio backend (a member's start-up)": (
        "import consumergroup as cg\ncg.ConsumerGroup\ncg.Config()\n"
        "import consumergroup.consumer.records\nimport anyio._backends._asyncio"
    ),
}
BASE = "nothing"
YARDSTICK = "import aiokafka"
#: (case, times the yardstick's cost at most) and (case, ms over import consumergroup).
RATIO_TARGET = ("import consumergroup", 0.7)
HELP_TARGET = ("consumergroup --help", 20.0)


def _env(compile_each_time: bool, prefix: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPYCACHEPREFIX",)}
    if compile_each_time:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["PYTHONPYCACHEPREFIX"] = str(prefix)  # empty and never written: no bytecode
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(prefix)
    return env


def _cpu_ms(code: str, env: dict[str, str]) -> float:
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(proc.pid, 0)
    assert proc.stderr is not None
    err = proc.stderr.read()
    proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise RuntimeError(f"{code!r} failed: {err.decode(errors='replace')[-500:]}")
    return (usage.ru_utime + usage.ru_stime) * 1000


def _instructions(code: str, env: dict[str, str]) -> int | None:
    """User-space instructions of one run, or None without a working ``perf``."""
    perf = shutil.which("perf")
    if not perf:
        return None
    out = subprocess.run(
        [perf, "stat", "-x,", "-e", "instructions:u", sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
    )
    for line in out.stderr.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[2].startswith("instructions") and fields[0].isdigit():
            return int(fields[0])
    return None


def measure(
    reps: int, compile_each_time: bool, cases: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run every case ``reps`` times, interleaved; medians and instruction counts."""
    cases = cases or CASES
    cache = Path(os.environ.get("CONSUMERGROUP_CACHE", Path(__file__).parents[1] / ".cache"))
    if compile_each_time:
        prefix = Path(tempfile.mkdtemp(prefix="no-bytecode-"))
    else:
        prefix = cache / "pycache"
        prefix.mkdir(parents=True, exist_ok=True)
    env = _env(compile_each_time, prefix)
    for code in cases.values():  # warm-up: writes the bytecode (or warms the page cache)
        _cpu_ms(code, env)
    samples: dict[str, list[float]] = {name: [] for name in cases}
    load = [os.getloadavg()[0]]
    for _ in range(reps):
        for name, code in cases.items():
            samples[name].append(_cpu_ms(code, env))
        load.append(os.getloadavg()[0])
    instructions = {name: _instructions(code, env) for name, code in cases.items()}
    if compile_each_time:
        shutil.rmtree(prefix, ignore_errors=True)
    base = statistics.median(samples[BASE])
    base_ins = instructions[BASE]
    rows = {}
    for name in cases:
        ins = instructions[name]
        rows[name] = {
            "cpu_ms": statistics.median(samples[name]) - base,
            "cpu_ms_samples": samples[name],
            "instructions_m": (ins - base_ins) / 1e6 if ins and base_ins else None,
        }
    return {
        "reps": reps,
        "bytecode": not compile_each_time,
        "python": sys.version.split()[0],
        "load": [min(load), max(load)],
        "when": time.strftime("%Y-%m-%d %H:%M"),
        "base_cpu_ms": base,
        "cases": rows,
        "verdicts": verdicts(rows),
    }


def verdicts(rows: dict[str, Any]) -> list[dict[str, Any]]:
    """The two targets, on CPU medians (and on instructions where counted)."""
    out = []
    name, limit = RATIO_TARGET
    if name in rows and YARDSTICK in rows:
        ours, theirs = rows[name], rows[YARDSTICK]
        ratio = ours["cpu_ms"] / theirs["cpu_ms"]
        ins_ratio = (
            ours["instructions_m"] / theirs["instructions_m"]
            if ours["instructions_m"] and theirs["instructions_m"]
            else None
        )
        out.append(
            {
                "target": f"{name} <= {limit}x {YARDSTICK} (CPU)",
                "value": f"{ratio:.2f}x"
                + (f" (instructions {ins_ratio:.2f}x)" if ins_ratio else ""),
                "pass": ratio <= limit,
            }
        )
    name, extra = HELP_TARGET
    if name in rows and RATIO_TARGET[0] in rows:
        over = rows[name]["cpu_ms"] - rows[RATIO_TARGET[0]]["cpu_ms"]
        out.append(
            {
                "target": f"{name} <= {RATIO_TARGET[0]} + {extra:.0f} ms (CPU)",
                "value": f"+{over:.1f} ms",
                "pass": over <= extra,
            }
        )
    return out


def markdown(result: dict[str, Any]) -> str:
    """The table and the verdicts."""
    mode = "compiled bytecode" if result["bytecode"] else "no bytecode (compiled each start)"
    lo, hi = result["load"]
    yard = result["cases"][YARDSTICK]
    lines = [
        f"### Import cost ({mode}; Python {result['python']}; medians of {result['reps']} "
        f"interleaved runs, {result['when']}, load average {lo:.1f}-{hi:.1f})",
        "",
        f"Each: CPU of `python -c CODE` minus an empty interpreter's "
        f"({result['base_cpu_ms']:.1f} ms); instructions: `perf stat -e instructions:u`, one run.",
        "",
        "| case | CPU ms | vs import aiokafka | instructions (M) |",
        "|---|---:|---:|---:|",
    ]
    for name, row in result["cases"].items():
        if name == BASE:
            continue
        ins = row["instructions_m"]
        lines.append(
            f"| {name} | {row['cpu_ms']:.1f} | {row['cpu_ms'] / yard['cpu_ms']:.2f}x | "
            + (f"{ins:,.0f}" if ins is not None else "n/a")
            + " |"
        )
    lines += ["", "| target | value | verdict |", "|---|---:|---|"]
    for v in result["verdicts"]:
        lines.append(f"| {v['target']} | {v['value']} | {'PASS' if v['pass'] else 'FAIL'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    """Measure and print."""
    p = argparse.ArgumentParser(prog="python -m bench.import_cost", description=__doc__)
    p.add_argument("--reps", type=int, default=31, help="runs per case (default 31)")
    p.add_argument(
        "--compile", action="store_true", help="no bytecode: every start compiles every module"
    )
    args = p.parse_args(argv)
    print(markdown(measure(args.reps, args.compile)))


if __name__ == "__main__":
    main()
