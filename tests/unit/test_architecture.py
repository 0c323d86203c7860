"""The layers stay visible: the core imports without Dagster, modules stay small, no import cycles.

Import cycles are looked for over every import between our own modules, including imports
inside functions (a function-level import is not a way around a cycle); only ``if
TYPE_CHECKING:`` blocks are left out, since they never run.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("nl2sql_assets", "resources")
CORE = ("nl2sql_assets.schema", "nl2sql_assets.adapters", "nl2sql_assets.indexing", "nl2sql_assets.retrieval",
        "nl2sql_assets.pipeline", "nl2sql_assets.drift", "nl2sql_assets.config", "nl2sql_assets.demo")
MAX_LINES = 500


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Our modules that ``module`` imports anywhere (functions included), TYPE_CHECKING left out."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
                continue
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    package = module.split(".") if is_package else module.split(".")[:-1]
                    package = package[: len(package) - (node.level - 1)]
                    base = ".".join(package + ([base] if base else []))
                names = [base] + [f"{base}.{a.name}" for a in node.names]
            for name in names:
                target = resolve(name)
                if target and target != module:
                    found.add(target)
            visit([child for child in ast.iter_child_nodes(node) if isinstance(child, (ast.stmt, ast.excepthandler))])

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return out


def test_no_import_cycles_even_through_function_level_imports() -> None:
    modules = _modules()
    graph = {m: _imports(m, p, modules) for m, p in modules.items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_sees_function_level_imports_and_skips_type_checking(tmp_path: Path) -> None:
    modules = {"a": tmp_path / "a.py", "b": tmp_path / "b.py", "c": tmp_path / "c.py"}
    modules["a"].write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import c\n"
                            "def f():\n    try:\n        pass\n    except ValueError:\n        import b\n",
                            encoding="utf-8")
    assert _imports("a", modules["a"], modules) == {"b"}
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]


def test_no_module_over_500_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in _modules().values()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


@pytest.mark.slow
def test_the_core_imports_with_dagster_unimportable() -> None:
    """The domain is plain Python: every core module imports in a process where ``import dagster`` fails."""
    core = sorted(m for m in _modules() if m.startswith(CORE))
    script = (
        "import sys, importlib\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'dagster' or name.startswith(('dagster.', 'dagster_')):\n"
        "            raise ImportError('dagster is blocked in this test')\n"
        "sys.meta_path.insert(0, Block())\n"
        f"for m in {core!r}:\n"
        "    importlib.import_module(m)\n"
        "assert not [n for n in sys.modules if n == 'dagster' or n.startswith('dagster.')]\n"
        "print(len(sys.argv), 'ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert core and "ok" in done.stdout
