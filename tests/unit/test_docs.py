"""The docs stand on their own: no pointer outside the repository, every example names
what to install, and the extra that installs it exists."""

from __future__ import annotations

import re
import tomllib
import types
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
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]
    doc = " ".join(example.read_text(encoding="utf-8").split('"""')[1].split())
    named = re.findall(r"consumergroup\[([a-z,]+)\]", doc)
    assert named, f"{example.name} does not say what to pip install from PyPI"
    for group in named:
        assert set(group.split(",")) <= set(extras), group
    from_clone = re.findall(r"make install(?: EXTRAS=([a-z,]+))?", doc)
    assert from_clone, f"{example.name} does not say what to install from a clone"
    for group in from_clone:
        assert set(filter(None, group.split(","))) <= set(extras), group
    source = example.read_text(encoding="utf-8")
    if "uvicorn" in source:  # not an extra: the install line names it
        assert "pip install uvicorn" in doc and "uvicorn``" in doc, doc


def test_published_extras_are_what_users_install() -> None:
    """Test, lint, docs and benchmark tools are dependency groups, not published extras."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = set(pyproject["project"]["optional-dependencies"])
    assert not extras & {"test", "dev", "bench", "examples", "docs"}, extras
    assert {"embedded", "fastapi", "aiohttp", "prometheus", "spark"} <= extras
    assert {"test", "lint", "docs", "dev"} <= set(pyproject["dependency-groups"])
    makefile = (ROOT / "Makefile").read_text()
    listed = re.search(r"^ALL_EXTRAS := (\S+)$", makefile, re.MULTILINE)
    assert listed is not None, "make test installs every extra: ALL_EXTRAS"
    # ... and those that build against system libraries, each from its own target.
    system = re.search(r"^SYSTEM_EXTRAS := (\S+)$", makefile, re.MULTILINE)
    assert system is not None
    assert set(listed.group(1).split(",")) | set(system.group(1).split(",")) == extras


def test_the_version_is_written_in_one_place() -> None:
    import consumergroup

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "consumergroup.__version__"
    }
    assert re.fullmatch(r"\d+\.\d+\.\d+(\w+\d*)?", consumergroup.__version__)
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "## [Unreleased]" in changelog or f"## [{consumergroup.__version__}]" in changelog


def test_a_new_guide_is_in_the_site_nav_without_a_nav_edit() -> None:
    """docs/guides/.nav.yml ends with a glob: every page of the folder is in the nav."""
    nav = (ROOT / "docs" / "guides" / ".nav.yml").read_text()
    assert 'glob: "*"' in nav and "ignore_no_matches: true" in nav


def test_a_link_to_a_missing_file_or_heading_fails_the_docs_build(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The hook of mkdocs.yml rewrites repository links and warns (= fails under --strict)."""
    hooks = _load_hooks()
    page = _Page("index.md")  # README.md's page
    text = (
        "[guide](docs/guides/spark.md#options) [ex](examples/basic_handler.py) "
        "[gone](examples/gone.py) [bench](bench/README.md#nope)\n"
        "```\n[in code](nowhere.md)\n```\n"
    )
    config = {"repo_url": "https://example.invalid/cg"}
    with caplog.at_level("WARNING"):
        out = hooks.on_page_markdown(text, page, config, None)
    assert "[guide](guides/spark.md#options)" in out  # MkDocs checks the anchor itself
    assert "[ex](https://example.invalid/cg/blob/main/examples/basic_handler.py)" in out
    assert "[bench](benchmarks.md#nope)" in out  # a mirrored page: MkDocs checks it
    assert "[in code](nowhere.md)" in out  # code is left alone
    warnings = [r.getMessage() for r in caplog.records]
    assert any("examples/gone.py" in w and "does not exist" in w for w in warnings), warnings
    assert len(warnings) == 1, warnings


class _File:
    def __init__(self, src_uri: str) -> None:
        self.src_uri = src_uri


class _Page:
    def __init__(self, src_uri: str) -> None:
        self.file = _File(src_uri)


def _load_hooks() -> types.ModuleType:
    import importlib.util

    path = ROOT / "tools" / "mkdocs_hooks.py"
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docker_compose_runs_the_kafka_the_suite_runs() -> None:
    """docker-compose.yml ran Kafka 4.0.0 while the suite ran 4.4.0 (share groups: 4.2+)."""
    from consumergroup.testing import KAFKA_VERSION

    compose = (ROOT / "docker-compose.yml").read_text()
    assert re.findall(r"image: apache/kafka:(\S+)", compose) == [KAFKA_VERSION]
    for setting in (
        "TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
        "TRANSACTION_STATE_LOG_MIN_ISR",
        "SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR",
        "SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR",
    ):
        assert f"KAFKA_{setting}:" in compose, setting
    docs = (ROOT / "docs" / "contributing" / "testing.md").read_text()
    assert "docker compose up -d" in docs and "KAFKA_BOOTSTRAP_SERVERS=" in docs


def test_readme_names_every_published_extra() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("| extra | brings | for |") :].split("\n\n")[0]
    listed = set(re.findall(r"^\| `([a-z]+)` \|", table, re.MULTILINE))
    extras = set(pyproject["project"]["optional-dependencies"])
    assert listed == extras, "add each extra to README's extras table (Install)"
