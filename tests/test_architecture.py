"""The layers of the package point one way (the contract in pyproject.toml).

surfaces > service > sessions > delivery > detect | queue > terminal > the
foundation (config, paths, errors, audit, message): a module may import from
its own layer and the ones below it, never above. import-linter checks every
import, direct or through other modules; this test fails with its report.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_imports_follow_the_layers() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    assert lint_imports.exists(), f"{lint_imports} is missing: pip install -e '.[dev]'"
    done = subprocess.run(
        [str(lint_imports), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _imports(path: Path, module: str) -> set[str]:
    """Every agentwrap module ``module`` imports, at the top or inside a function
    (a lazy import still ties the two), resolved to module names."""
    import ast

    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("agentwrap"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            if not base.startswith("agentwrap"):
                continue
            for alias in node.names:  # `from .pkg import module` names a module
                sub = f"{base}.{alias.name}"
                found.add(sub if _module_path(sub) is not None else base)
    return found - {module}


def _module_path(module: str) -> Path | None:
    rel = Path(*module.split("."))
    for candidate in (ROOT / rel.with_suffix(".py"), ROOT / rel / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def test_no_import_cycle_anywhere() -> None:
    """No two modules of agentwrap import each other, directly or round a
    circle, not even lazily inside a function (issue 21: sessions.host and
    sessions.lifecycle did): a circle means neither can be read, tested or
    moved without the other."""
    graph: dict[str, set[str]] = {}
    for path in sorted((ROOT / "agentwrap").rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        graph[module] = _imports(path, module)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_no_private_name_is_imported_from_another_module() -> None:
    """A name with a leading underscore is its module's own business (issue 21:
    ``_validate``, ``_Checked``, ``_emit_json``, ``_service`` were imported
    across modules): what another module needs is made public, where it is
    declared, so that a reader sees what a module offers."""
    import ast

    crossings = []
    for path in sorted((ROOT / "agentwrap").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith(
                    "agentwrap")):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        crossings.append(f"{path.relative_to(ROOT)}:{node.lineno}:"
                                         f" {node.module or '.'} import {alias.name}")
    assert not crossings, "\n".join(crossings)


def _declaring_packages() -> dict[str, dict[str, tuple[str, ...]]]:
    """Each package of agentwrap whose ``__init__`` declares ``EXPORTS``."""
    import importlib

    found = {}
    for init in sorted((ROOT / "agentwrap").glob("*/__init__.py")):
        package = f"agentwrap.{init.parent.name}"
        exports = getattr(importlib.import_module(package), "EXPORTS", None)
        if exports is not None:
            found[package] = exports
    return found


def test_packages_declare_what_other_packages_use() -> None:
    """Issue 21: a package says what it offers (``EXPORTS`` in its ``__init__``,
    :mod:`agentwrap.exports`), and another package imports nothing else of it:
    what a package keeps to itself can change without a search of the tree."""
    import ast

    declared = _declaring_packages()
    assert {"agentwrap.answers", "agentwrap.delivery", "agentwrap.detect", "agentwrap.sessions",
            "agentwrap.terminal"} <= set(declared)
    undeclared = []
    for path in sorted((ROOT / "agentwrap").rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        own = ".".join(module.split(".")[:2])
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            target = ".".join(base.split(".")[:2])
            if target == own or target not in declared:
                continue
            exports = declared[target]
            sub = base[len(target) + 1:]
            for alias in node.names:
                if not sub:  # `from ..answers import hook_questions`: a module offered whole
                    ok = alias.name in exports.get(alias.name, ())
                else:
                    ok = alias.name in exports.get(sub, ())
                if not ok:
                    undeclared.append(f"{rel}:{node.lineno}: {base} import {alias.name}")
    assert not undeclared, "not in the package's EXPORTS:\n" + "\n".join(undeclared)


def test_declared_names_resolve_and_importing_a_package_imports_nothing_more() -> None:
    """Each declared name is the object its module defines (through the
    package's lazy ``__getattr__``); importing a package alone loads none of
    its modules (an agent's hook imports a few modules of several packages)."""
    import importlib

    for package, exports in _declaring_packages().items():
        pkg = importlib.import_module(package)
        assert sorted(pkg.__all__) == sorted({n for names in exports.values() for n in names})
        for module, names in exports.items():
            mod = importlib.import_module(f"{package}.{module}")
            for name in names:
                assert getattr(pkg, name) is (mod if name == module else getattr(mod, name)), \
                    f"{package}.{name}"
        loaded = subprocess.run(
            [sys.executable, "-c", f"import sys, {package}; print(' '.join(m for m in sys.modules"
             f" if m.startswith('{package}.')))"],
            capture_output=True, text=True, timeout=60, check=True).stdout.split()
        assert loaded == [], f"importing {package} loaded {loaded}"


def test_no_class_is_over_500_lines() -> None:
    """Issue 21: a class that does five jobs is split along them (the delivery
    engine into its window, evidence, escalation and ACK wait; the store and
    the service into one module per job)."""
    import ast

    big = []
    for path in sorted((ROOT / "agentwrap").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None \
                    and node.end_lineno - node.lineno + 1 > 500:
                big.append(f"{path.relative_to(ROOT)}: {node.name}"
                           f" ({node.end_lineno - node.lineno + 1} lines)")
    assert not big, "\n".join(big)
