"""The modules of ``consumergroup/group/`` talk through interfaces, not each other's insides.

Walks each module with :mod:`ast` and fails on:

* a private name read on another module's object (``obj._x`` where ``obj`` is not
  ``self``/``cls`` and ``_x`` is not defined in the module itself): each collaborator of
  the session gets the narrow interface it needs (``group/roles.py`` and explicit
  arguments) instead of reaching into the session's fields;
* an import of ``session.py`` by any module but the group (``consumer_group.py``), the
  package's ``__init__`` and ``handler.py`` (whose public signatures name the session,
  under ``TYPE_CHECKING`` only);
* an import cycle among the group's modules, ``TYPE_CHECKING`` and function-level imports
  included.
"""

from __future__ import annotations

import ast
from pathlib import Path

import consumergroup

GROUP = Path(consumergroup.__file__).resolve().parent / "group"
#: Private names of the standard library the group may use, with why.
STDLIB_PRIVATE = {"_current_frames"}  # sys._current_frames: the loop watchdog's stack dump
SESSION_IMPORTERS = {"consumer_group", "__init__"}


def _defined(tree: ast.AST) -> set[str]:
    """Every name the module defines: functions, classes, attributes, variables, slots."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)  # __slots__ entries
    return names


def private_reads(source: str, where: str) -> list[str]:
    """``obj._x`` in ``source`` where ``_x`` belongs to another module."""
    tree = ast.parse(source)
    own = _defined(tree) | STDLIB_PRIVATE
    found: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or name.startswith("__") or name in own:
            continue
        found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return found


def group_imports(source: str) -> dict[str, bool]:
    """The group modules ``source`` imports (relative, any level of the file), each mapped
    to whether every such import is under ``if TYPE_CHECKING:``."""
    tree = ast.parse(source)
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            typing_only.update(id(inner) for inner in ast.walk(node))
    out: dict[str, bool] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.level != 1:
            continue
        modules = [node.module] if node.module else [alias.name for alias in node.names]
        for module in modules:
            name = module.split(".")[0]
            out[name] = out.get(name, True) and id(node) in typing_only
    return out


def _modules() -> dict[str, str]:
    return {path.stem: path.read_text() for path in sorted(GROUP.glob("*.py"))}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph``, or None."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        state[node] = 2
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def test_no_group_module_reads_a_private_name_of_another() -> None:
    found = [hit for name, src in _modules().items() for hit in private_reads(src, name)]
    assert not found, "private names of other modules read:\n" + "\n".join(found)


def test_only_the_group_imports_the_session() -> None:
    found = []
    for name, source in _modules().items():
        typing_only = group_imports(source).get("session")
        if typing_only is None or name in SESSION_IMPORTERS:
            continue
        if name == "handler" and typing_only:
            continue  # the user's callbacks are typed with the session they receive
        found.append(name)
    assert not found, f"modules importing session.py: {found}"


def test_the_group_modules_import_each_other_without_a_cycle() -> None:
    modules = _modules()
    graph = {
        name: {m for m in group_imports(src) if m in modules and m != name}
        for name, src in modules.items()
        if name != "__init__"
    }
    assert _cycle(graph) is None, f"import cycle: {' -> '.join(_cycle(graph) or [])}"


def test_the_checks_find_what_they_forbid() -> None:
    # The rules above would pass on a checker that finds nothing: each finds its case.
    assert private_reads("def f(session):\n    return session._config\n", "m") == [
        "m:2: session._config"
    ]
    assert private_reads("class A:\n    def f(self, other):\n        return other._x\n", "m")
    mine = "class A:\n    _x = 1\n    def f(self, other: 'A'):\n        return other._x\n"
    assert private_reads(mine, "m") == []
    source = (
        "from typing import TYPE_CHECKING\nfrom .reconciler import R\n"
        "if TYPE_CHECKING:\n    from .session import S\n"
        "def f():\n    from . import session_tasks\n"
    )
    assert group_imports(source) == {"reconciler": False, "session": True, "session_tasks": False}
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
