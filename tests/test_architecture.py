"""The layers of the package point one way (the contract in pyproject.toml).

surfaces > service > sessions > delivery > detect | queue > terminal > the
foundation (config, paths, errors, audit, message): a module may import from
its own layer and the ones below it, never above. import-linter checks every
import, direct or through other modules; this test fails with its report.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def _tree(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once for all the tests here (read only)."""
    return ast.parse(path.read_text(encoding="utf-8"))


@functools.cache
def _nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of a module's tree, walked once."""
    return tuple(ast.walk(_tree(path)))


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
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in _nodes(path):
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
    crossings = []
    for path in sorted((ROOT / "agentwrap").rglob("*.py")):
        for node in _nodes(path):
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
    declared = _declaring_packages()
    assert {"agentwrap.answers", "agentwrap.delivery", "agentwrap.detect", "agentwrap.sessions",
            "agentwrap.terminal"} <= set(declared)
    undeclared = []
    for path in sorted((ROOT / "agentwrap").rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        own = ".".join(module.split(".")[:2])
        for node in _nodes(path):
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
    big = []
    for path in sorted((ROOT / "agentwrap").rglob("*.py")):
        for node in _nodes(path):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None \
                    and node.end_lineno - node.lineno + 1 > 500:
                big.append(f"{path.relative_to(ROOT)}: {node.name}"
                           f" ({node.end_lineno - node.lineno + 1} lines)")
    assert not big, "\n".join(big)


# The map kept true (issue 36): the package docstrings, the composition root's
# order, the architecture page and the export lists are read by people who
# change the code; each is checked against the code it describes.

def _packages() -> list[Path]:
    """Every package of agentwrap, the top one included."""
    return sorted(init.parent for init in (ROOT / "agentwrap").rglob("__init__.py"))


def _members(package: Path) -> list[str]:
    """The modules and subpackages of ``package`` (``__main__`` and private ones aside)."""
    found = [p.stem for p in package.glob("*.py") if not p.stem.startswith("_")]
    found += [p.name for p in package.iterdir()
              if (p / "__init__.py").is_file() and not p.name.startswith("_")]
    return sorted(found)


def _named_modules(doc: str, dotted: str) -> set[str]:
    """The members a docstring names: ``name``, ``name/``, ``name.py``, or a
    reference role (:mod:`.name`, :class:`~.name.X`, :mod:`agentwrap.pkg.name`)."""
    import re

    plain = re.findall(r"``([a-z_][a-z0-9_]*)(?:/|\.py)?``", doc)
    roles = re.findall(r":\w+:`~?(?:" + re.escape(dotted) + r")?\.([a-z_][a-z0-9_]*)", doc)
    return {*plain, *roles}


def test_each_package_docstring_names_every_module() -> None:
    """A reader opens a package at its ``__init__``: its docstring says what
    each module of the package is for, so a module added without a word there
    fails here, as does a reference to a module that is gone."""
    import re

    missing, stale = [], []
    for package in _packages():
        dotted = ".".join(package.relative_to(ROOT).parts)
        doc = ast.get_docstring(_tree(package / "__init__.py"))
        doc = doc or ""
        named = _named_modules(doc, dotted)
        missing += [f"{dotted}.{m}" for m in _members(package) if m not in named]
        for ref in re.findall(r":mod:`~?(" + re.escape(dotted) + r"|)\.([a-z_][a-z0-9_.]*)`", doc):
            if _module_path(f"{dotted}.{ref[1]}") is None:
                stale.append(f"{dotted}: :mod: {ref[0]}.{ref[1]}")
    assert not missing, "modules the package docstring does not name:\n" + "\n".join(missing)
    assert not stale, "the package docstring names modules that are gone:\n" + "\n".join(stale)


def _appended_parts() -> list[str]:
    """The classes of the parts :func:`build_supervisor` appends, in source order."""
    tree = _tree(ROOT / "agentwrap/sessions/compose.py")
    build = next(n for n in tree.body
                 if isinstance(n, ast.FunctionDef) and n.name == "build_supervisor")
    made: dict[str, str] = {}  # variable -> the class it was built from
    for node in ast.walk(build):
        if isinstance(node, ast.Assign):
            pairs: list[tuple[ast.expr, ast.expr]] = []
            for target in node.targets:
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    pairs += zip(target.elts, node.value.elts, strict=True)
                else:
                    pairs.append((target, node.value))
            for t, v in pairs:
                if isinstance(t, ast.Name) and isinstance(v, ast.Call) \
                        and isinstance(v.func, ast.Name):
                    made[t.id] = v.func.id
    appended = []
    for node in ast.walk(build):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "append" and isinstance(node.func.value, ast.Name) \
                and node.func.value.id == "parts" and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name):
                appended.append((arg.lineno, arg.func.id))
            elif isinstance(arg, ast.Name):
                appended.append((arg.lineno, made.get(arg.id, arg.id)))
    return [name for _, name in sorted(appended)]


def test_the_composition_roots_order_list_names_every_part_in_order() -> None:
    """``sessions/compose.py`` gives the parts' order with the reasons in its
    docstring's numbered list: a part appended without its place there, or in
    another place than the list says, fails here."""
    import importlib
    import re

    from agentwrap.sessions import compose
    from agentwrap.sessions.parts import Part

    for module in _members(ROOT / "agentwrap/sessions"):  # every Part subclass defined
        importlib.import_module(f"agentwrap.sessions.{module}")
    kinds: set[str] = set()
    todo = [Part]
    while todo:
        for sub in todo.pop().__subclasses__():
            kinds.add(sub.__name__)
            todo.append(sub)
    appended = _appended_parts()
    assert appended and set(appended) <= kinds, appended
    doc = compose.__doc__ or ""
    items = re.findall(r"^\d+\. (.*?)(?=^\d+\. |^\S|\Z)", doc, re.M | re.S)
    assert items, "no numbered order list in compose's docstring"
    listed: list[str] = []
    for item in items:
        for name in re.findall(r"\b([A-Z]\w+)\b", item):
            if name in kinds and name not in listed:
                listed.append(name)
    assert listed == appended, (f"compose's docstring lists the parts {listed};"
                                f" build_supervisor appends {appended}")


def _layer_lines() -> list[str]:
    """The layer diagram of docs/architecture.md: the lines that begin a layer."""
    text = (ROOT / "docs/architecture.md").read_text(encoding="utf-8")
    section = text.split("\n## Layers", 1)[1].split("\n## ", 1)[0]
    block = section.split("```", 2)[1]
    return [line for line in block.splitlines() if line and not line[0].isspace()]


def test_the_architecture_page_draws_every_layer_in_the_contracts_order() -> None:
    """docs/architecture.md draws the layers the import contract enforces, in
    its order, with every package and every foundation module in it; and the
    contract itself places every package and top-level module."""
    import re

    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    contract = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    layers = next(c for c in contract["tool"]["importlinter"]["contracts"]
                  if c["type"] == "layers")["layers"]
    placed = [set(re.split(r"\s*[|:]\s*", layer.strip())) for layer in layers]
    top = ROOT / "agentwrap"
    assert set().union(*placed) == set(_members(top)) - {"__main__"}, \
        "the layers contract must place every package and top-level module of agentwrap"
    lines = _layer_lines()
    drawn = []
    for line in lines:
        packages = set(re.findall(r"([a-z_]+)/", line.split("  ")[0]))
        drawn.append(packages or set(re.findall(r"[a-z_]+", line)) - {"foundation"})
    assert len(drawn) == len(placed), lines
    for want, got, line in zip(placed, drawn, lines, strict=True):
        assert want == got, f"the page draws {line!r}; the contract's layer is {sorted(want)}"
    surfaces = next(line for line in lines if line.startswith("surfaces/"))
    for sub in _members(top / "surfaces"):
        assert re.search(rf"\b{sub}\b", surfaces), f"the page's surfaces line misses {sub}"


def _type_checking_imports(init: Path) -> set[tuple[str, str]]:
    """The (module, name) pairs an ``__init__`` imports for the type checker."""
    pairs = set()
    for node in _tree(init).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom), ast.unparse(imp)
                for alias in imp.names:
                    assert alias.asname in (None, alias.name), ast.unparse(imp)
                    pairs.add((imp.module or alias.name, alias.name))
    return pairs


def test_export_lists_agree() -> None:
    """A package's face is said three times: ``EXPORTS`` (what it offers, by
    module), ``__all__`` and the imports the type checker reads; a module that
    declares ``__all__`` lists there what its package offers of it. One list
    that drifts from the others hides a name from mypy or offers one that is
    not there."""
    import importlib

    import agentwrap

    for package, exports in _declaring_packages().items():
        init = ROOT / Path(*package.split(".")) / "__init__.py"
        offered = {(m, n) for m, names in exports.items() for n in names}
        assert _type_checking_imports(init) == offered, package
        for module, names in exports.items():
            own = getattr(importlib.import_module(f"{package}.{module}"), "__all__", None)
            if own is not None:
                extra = [n for n in names if n != module and n not in own]
                assert not extra, f"{package}.{module}.__all__ misses {extra}"
    top = {n for _, n in _type_checking_imports(ROOT / "agentwrap/__init__.py")}
    assert set(agentwrap.__all__) == top | {"__version__"}
    for name in agentwrap.__all__:
        assert getattr(agentwrap, name) is not None
