"""The docs stand on their own: no pointer outside the repository, every example names
what to install, and the extra that installs it exists."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.py") if not p.name.startswith("_"))


def test_architecture_cites_nothing_outside_the_repository() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert not re.findall(r"\bissues? \d+|#\d+\b", text), "issue numbers a reader cannot follow"
    assert "DESIGN.md" not in text and "../" not in text, "a file outside the repository"
    assert "## The founding design" in text  # restated, for the departures to refer to


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_every_example_names_the_extras_it_needs_and_they_exist(example: Path) -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    doc = example.read_text(encoding="utf-8").split('"""')[1]
    named = re.findall(r"consumergroup\[([a-z,]+)\]", " ".join(doc.split()))
    assert named, f"{example.name} does not say what to pip install"
    for group in named:
        assert set(group.split(",")) <= set(extras), group
    needs = {"uvicorn", "fastapi", "aiohttp", "prometheus", "calfkit"}
    brought = " ".join(extras["examples"])
    assert all(name in brought for name in needs), brought
