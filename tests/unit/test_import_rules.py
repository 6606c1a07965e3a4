"""The package uses aiokafka for wire codecs only (DESIGN.md, "Dependencies").

Walks every module under ``consumergroup/`` with :mod:`ast` and fails on any
import of aiokafka's client, connection, consumer, coordinator, producer or
admin layers, on any ``AIOKafka*`` name, and on ``aiokafka.errors`` outside
the one codec adapter, ``consumergroup/net/protocol.py``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import consumergroup

PACKAGE = Path(consumergroup.__file__).resolve().parent
ADAPTER = "net/protocol.py"
# aiokafka.codec: the compression codecs DESIGN.md lists with the batch readers (the C
# record decoder decompresses v2 batches with them, as aiokafka's readers do).
ALLOWED_PREFIXES = ("aiokafka.protocol", "aiokafka.record", "aiokafka.codec")


def _is_under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _module_problem(module: str, where: str) -> str | None:
    """Why importing ``module`` in the file ``where`` (relative path) is forbidden, or None."""
    if not _is_under(module, "aiokafka"):
        return None
    if any(_is_under(module, p) for p in ALLOWED_PREFIXES):
        return None
    if _is_under(module, "aiokafka.errors") and where == ADAPTER:
        return None
    if _is_under(module, "aiokafka.errors"):
        return f"aiokafka.errors is allowed only in {ADAPTER}"
    return (
        f"{module} is not a codec module "
        "(allowed: aiokafka.protocol.*, aiokafka.record.*, aiokafka.codec)"
    )


def violations(source: str, where: str) -> list[str]:
    """Every forbidden aiokafka use in ``source`` (the file ``where``), as messages."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        modules: list[tuple[str, list[str]]] = []
        if isinstance(node, ast.Import):
            modules = [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [alias.name for alias in node.names]
            if node.module == "aiokafka":
                # `from aiokafka import protocol` is fine; `from aiokafka import conn` is not.
                modules = [(f"aiokafka.{name}", [name]) for name in names]
            else:
                modules = [(node.module, names)]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, (ast.Name, ast.Attribute))
            and (node.func.id if isinstance(node.func, ast.Name) else node.func.attr)
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            modules = [(node.args[0].value, [])]
        for module, names in modules:
            line = getattr(node, "lineno", 0)
            problem = _module_problem(module, where)
            if module == "aiokafka" and not names:
                problem = "bare `import aiokafka` opens the whole client: import codec modules"
            if problem:
                found.append(f"{where}:{line}: {problem}")
            for name in names:
                if name.startswith("AIOKafka"):
                    found.append(f"{where}:{line}: {name} is aiokafka's client, not a codec")
    return found


def package_files() -> list[Path]:
    """Every Python module of the package."""
    return sorted(PACKAGE.rglob("*.py"))


def test_the_walk_sees_the_package() -> None:
    relative = {p.relative_to(PACKAGE).as_posix() for p in package_files()}
    assert ADAPTER in relative
    assert "client.py" in relative
    assert "net/connection.py" in relative


def test_consumergroup_imports_only_aiokafka_codecs() -> None:
    problems: list[str] = []
    for path in package_files():
        where = path.relative_to(PACKAGE).as_posix()
        problems += violations(path.read_text(encoding="utf-8"), where)
    assert not problems, "\n".join(problems)


def test_the_codec_adapter_is_where_aiokafka_protocol_comes_in() -> None:
    source = (PACKAGE / ADAPTER).read_text(encoding="utf-8")
    imported = {
        node.module
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert any(m.startswith("aiokafka.protocol") for m in imported)


@pytest.mark.parametrize(
    ("source", "where"),
    [
        ("from aiokafka.consumer import fetcher", "consumer/broker.py"),
        ("import aiokafka.client", "client.py"),
        ("from aiokafka.conn import AIOKafkaConnection", "net/connection.py"),
        ("from aiokafka.coordinator.assignors.range import RangePartitionAssignor", "x.py"),
        ("from aiokafka.producer import producer", "x.py"),
        ("from aiokafka.admin import AIOKafkaAdminClient", "x.py"),
        ("from aiokafka import AIOKafkaConsumer", "x.py"),
        ("from aiokafka import conn", "x.py"),
        ("import aiokafka", "x.py"),
        ("from aiokafka.errors import KafkaError", "client.py"),
        ("import importlib\nimportlib.import_module('aiokafka.consumer')", "x.py"),
        ("def f():\n    from aiokafka.cluster import ClusterMetadata", "x.py"),
    ],
)
def test_the_checker_flags_forbidden_imports(source: str, where: str) -> None:
    assert violations(source, where)


@pytest.mark.parametrize(
    ("source", "where"),
    [
        ("from aiokafka.protocol.fetch import FetchRequest", "x.py"),
        ("from aiokafka.record.default_records import DefaultRecordBatch", "x.py"),
        ("import aiokafka.record.util", "x.py"),
        ("from aiokafka.codec import lz4_decode", "x.py"),
        ("from aiokafka import protocol", "x.py"),
        ("from aiokafka.errors import IncompatibleBrokerVersion", ADAPTER),
        ("from .protocol import FetchRequest", "net/connection.py"),
        ("from ..errors import KafkaError", "net/connection.py"),
    ],
)
def test_the_checker_allows_codec_imports(source: str, where: str) -> None:
    assert violations(source, where) == []
