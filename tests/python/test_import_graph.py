"""The modules of python/memtier import each other in one direction only.

Every intra-package import counts: module level and inside functions (an
import placed in a function to dodge a cycle is still a cycle), relative
(``from . import x``, ``from ..x import y``) and absolute (``memtier.x``).
Only imports under ``if TYPE_CHECKING:`` are left out: they never run.
Issue 10 part 4: python/memtier is a one-way import DAG (_errors, _ffi,
buffers, _tensor/_chunks, _context, the default context, __init__).
"""

from __future__ import annotations

import ast
import pathlib
from typing import Dict, List, Optional, Set

import pytest

PKG = pathlib.Path(__file__).resolve().parents[2] / "python" / "memtier"


def _module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> Dict[str, pathlib.Path]:
    return {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _resolve(mod: str, is_pkg: bool, level: int, name: Optional[str]) -> str:
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _imports(mod: str, path: pathlib.Path, known: Set[str]) -> Set[str]:
    """The package modules ``mod`` imports (the module named, or for
    ``from pkg import name`` the submodule ``pkg.name`` when it exists)."""
    is_pkg = path.name == "__init__.py"
    out: Set[str] = set()
    todo: List[ast.AST] = [ast.parse(path.read_text(encoding="utf-8"), str(path))]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            todo.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "memtier":
                    out.add(a.name)
        elif isinstance(node, ast.ImportFrom):
            target = (_resolve(mod, is_pkg, node.level, node.module) if node.level
                      else node.module or "")
            if target.split(".")[0] != "memtier":
                continue
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.add(sub if sub in known else target)
        todo.extend(ast.iter_child_nodes(node))
    out.discard(mod)
    return {m for m in out if m in known}


def _graph() -> Dict[str, Set[str]]:
    mods = _modules()
    known = set(mods)
    return {m: _imports(m, p, known) for m, p in mods.items()}


def _cycle(graph: Dict[str, Set[str]]) -> Optional[List[str]]:
    state: Dict[str, int] = {}
    stack: List[str] = []

    def visit(m: str) -> Optional[List[str]]:
        state[m] = 1
        stack.append(m)
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                return stack[stack.index(d):] + [d]
            if d not in state:
                found = visit(d)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_the_parser_sees_the_package():
    graph = _graph()
    assert "memtier._context" in graph and "memtier._errors" in graph
    assert "memtier._errors" in graph["memtier._ffi"]
    assert "memtier._context" in graph["memtier._chunks"]


def test_the_cycle_finder_finds_one():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_the_import_graph_has_no_cycle():
    graph = _graph()
    cyc = _cycle(graph)
    assert cyc is None, "import cycle: " + " -> ".join(cyc or [])


@pytest.mark.parametrize("low", ["memtier._errors", "memtier._ffi", "memtier._paths",
                                 "memtier._options", "memtier._buffers", "memtier._fork"])
def test_the_low_layers_import_no_context(low):
    graph = _graph()
    seen: Set[str] = set()
    todo = [low]
    while todo:
        m = todo.pop()
        for d in graph[m]:
            if d not in seen:
                seen.add(d)
                todo.append(d)
    assert "memtier._context" not in seen, f"{low} reaches memtier._context"
