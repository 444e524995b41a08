"""Every agent lives in its own module of agentwrap/agents (issue 36).

A string literal that is exactly an agent's name (``"kimi"``) outside
``agentwrap/agents/<name>.py`` and the profile list (``CHANNEL_KINDS`` of
detect/profiles.py) is agent knowledge spread again: a table keyed by it, or an
``if agent == "kimi"``. Comparing a kind or an agent against a literal, or
membership in a tuple of literals, is the ladder the table replaced. Both are
scanned over every module of agentwrap, and the table itself is held to the
agents' modules: one module per agent, each registered once.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from agentwrap.agents import AGENTS, Agent
from agentwrap.detect.profiles import CHANNEL_KINDS

ROOT = Path(__file__).resolve().parents[1] / "agentwrap"
AGENTS_DIR = ROOT / "agents"
#: The profile list: the one place outside agents/ that names the agents.
PROFILE_LIST = (ROOT / "detect" / "profiles.py", "CHANNEL_KINDS")
SOURCES = sorted(ROOT.rglob("*.py"))


def _literal_names(path: Path, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) of each string constant that is exactly an agent name, but
    those of the profile list's assignment and of docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                skip.add(id(body[0].value))
        if path != PROFILE_LIST[0] or not isinstance(node, ast.Assign):
            continue
        if any(isinstance(t, ast.Name) and t.id == PROFILE_LIST[1] for t in node.targets):
            skip |= {id(n) for n in ast.walk(node.value)}
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in names
            and id(n) not in skip]


def test_an_agents_name_appears_only_in_its_module_and_the_profile_list() -> None:
    names = set(AGENTS)
    spread = []
    for path in SOURCES:
        for line, name in _literal_names(path, names):
            if path != AGENTS_DIR / f"{name}.py":
                spread.append(f"{path.relative_to(ROOT.parent)}:{line}: {name!r}")
    assert not spread, "an agent named outside its module (agentwrap/agents/<name>.py):\n" \
        + "\n".join(spread)


def _ladders(path: Path, names: set[str]) -> list[str]:
    """Comparisons against an agent's name: ``x == "kimi"``, ``x in ("kimi", ...)``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Compare):
            continue
        for right in [node.left, *node.comparators]:
            values = [right] if isinstance(right, ast.Constant) else \
                list(right.elts) if isinstance(right, (ast.Tuple, ast.List, ast.Set)) else []
            if any(isinstance(v, ast.Constant) and v.value in names for v in values):
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_ladder_on_agent_names_outside_the_agents_package() -> None:
    names = set(AGENTS)
    found = [f for path in SOURCES if AGENTS_DIR not in path.parents
             for f in _ladders(path, names)]
    assert not found, "look the agent up in agents.all_agents instead:\n" + "\n".join(found)


#: Names outside agents/ allowed to carry an agent's name as a word: the person's
#: config keys (their words, named after the agent they set) and the profile's
#: structured source of Claude's status file (detect/, the profile list's layer).
NAMED_FOR_AN_AGENT = {(ROOT / "config.py", "CODEX_HOOK_TRUST"),
                      (ROOT / "config.py", "codex_hook_trust"),
                      (ROOT / "config.py", "codex_app_server"),
                      (ROOT / "detect" / "structured.py", "_CLAUDE_STATUS")}


def _named_for(path: Path, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) of each function, class, assigned name or import alias that
    has an agent's name as one of its words (``cline_prompt``, ``_CLINE_ID``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            ids = [node.name]
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            ids = [node.id]
        elif isinstance(node, ast.alias):
            ids = [node.asname or node.name]
        else:
            continue
        found += [(getattr(node, "lineno", 0), i) for i in ids
                  if set(re.split(r"[_.]", i.lower())) & names]
    return found


def test_no_code_outside_the_agents_package_is_named_for_an_agent() -> None:
    """Agent knowledge outside its module wears the agent's name (a reader of
    Cline's history in continuity/ was ``cline_prompt``): each agent's own
    behaviour is a field of its record, asked through the table."""
    names = set(AGENTS)
    found = [f"{path.relative_to(ROOT.parent)}:{line}: {name}"
             for path in SOURCES if AGENTS_DIR not in path.parents
             for line, name in _named_for(path, names) if (path, name) not in NAMED_FOR_AN_AGENT]
    assert not found, "an agent's code outside agentwrap/agents/<name>.py:\n" + "\n".join(found)


def test_the_scans_find_what_they_are_for(tmp_path: Path) -> None:
    """The two scans above would have failed on the code before issue 36."""
    old = tmp_path / "old.py"
    old.write_text('"""doc: "kimi" here is fine."""\n'
                   'EVENTS = {"kimi": {}}\n'
                   'def f(agent, kind):\n'
                   '    if kind == "claude":\n'
                   '        return agent in ("codex", "gemini")\n', encoding="utf-8")
    assert [n for _, n in _literal_names(old, set(AGENTS))] == ["kimi", "claude", "codex",
                                                                  "gemini"]
    assert len(_ladders(old, set(AGENTS))) == 2
    spread = tmp_path / "hooks.py"  # continuity/hooks.py before Cline's reader moved
    spread.write_text('import re\n_CLINE_ID = re.compile("x")\n'
                      'def cline_prompt(payload):\n    return None\n', encoding="utf-8")
    assert sorted(n for _, n in _named_for(spread, set(AGENTS))) == ["_CLINE_ID", "cline_prompt"]


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_each_agent_is_its_own_module(name: str) -> None:
    module = importlib.import_module(f"agentwrap.agents.{name}")
    assert isinstance(module.AGENT, Agent) and module.AGENT is AGENTS[name]
    assert name == module.NAME


def test_the_table_holds_every_agent_module_and_every_profile_kind() -> None:
    helpers = {"__init__", "base", "launch", "all_agents", "conversation"}
    modules = {p.stem for p in AGENTS_DIR.glob("*.py")} - helpers
    assert modules == set(AGENTS)
    assert set(CHANNEL_KINDS) <= set(AGENTS)
    for kind in CHANNEL_KINDS:  # a profile may name it: it registers something
        agent = AGENTS[kind]
        assert agent.register is not None and agent.hook_events, kind
        assert set(agent.hook_events) <= set(agent.events), kind


def test_importing_the_table_imports_no_launch_code() -> None:
    """A hook process imports the table (its events): the agent modules load
    their launch helpers only when a launch registers."""
    import subprocess
    import sys

    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, agentwrap.agents.all_agents; print(' '.join("
         "m for m in sys.modules if m.startswith('agentwrap')))"],
        capture_output=True, text=True, timeout=60, check=True).stdout.split()
    assert "agentwrap.agents.launch" not in loaded
    assert not [m for m in loaded if m.startswith(("agentwrap.detect", "agentwrap.config"))]
