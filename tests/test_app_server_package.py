"""Codex's app-server is one package with one owner (issue 36).

``agentwrap/app_server/`` holds launching, keeping, the state feed, approvals,
replies and delivery; ``codex_server/`` stays the wire beneath. The layers
beside and below it see it only through protocols they own (the detector's
``StructuredSource``, the answerer's ``Replies``, the sessions layer's
``NativeChannel``), reached through the agent table (``Agent.native``), so the
supervisor and the composition root never name it. These scans hold that.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from agentwrap.agents import AGENTS

ROOT = Path(__file__).resolve().parents[1] / "agentwrap"
#: The server's own packages: its code and its wire.
SERVER_PACKAGES = ("agentwrap.app_server", "agentwrap.codex_server")
NAMED = re.compile(r"app_?server", re.IGNORECASE)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, dotted module) of every import in ``path``, relative ones resolved."""
    rel = path.relative_to(ROOT.parent).with_suffix("")
    package = list(rel.parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, node.module] if node.module else base)
            found += [(node.lineno, f"{module}.{a.name}") for a in node.names]
    return found


def _names(path: Path) -> list[tuple[int, str]]:
    """(line, name) of every name the code uses or defines (docstrings aside)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Name):
            found.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute):
            found.append((node.lineno, node.attr))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.append((node.lineno, node.name))
        elif isinstance(node, ast.alias):
            found.append((getattr(node, "lineno", 0), node.asname or node.name))
    return found


def _modules(*packages: str) -> list[Path]:
    return sorted(p for pkg in packages for p in (ROOT / pkg).glob("*.py"))


def test_the_supervisor_and_the_composition_root_never_name_the_server() -> None:
    """The issue's own check: `grep -n "app_server\\|AppServer"` finds nothing."""
    for name in ("supervisor.py", "compose.py"):
        text = (ROOT / "sessions" / name).read_text(encoding="utf-8")
        hits = [f"{name}:{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1)
                if "app_server" in line or "AppServer" in line]
        assert not hits, "\n".join(hits)


@pytest.mark.parametrize("package", ["sessions", "answers", "detect", "delivery", "agents"])
def test_the_layers_beside_and_below_it_import_none_of_the_server(package: str) -> None:
    """They reach it through the protocols they own; only the table's ``native``
    string leads a launch to it (loaded by sessions.native)."""
    found = [f"{p.relative_to(ROOT.parent)}:{line}: {module}"
             for p in _modules(package) for line, module in _imports(p)
             if module.startswith(SERVER_PACKAGES)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("package", ["sessions", "answers"])
def test_no_code_of_sessions_or_answers_is_named_for_the_server(package: str) -> None:
    """No class, function, variable or attribute of theirs wears its name (the
    composition root had ``_app_server_state``, the answerer ``AppServerState``)."""
    found = [f"{p.relative_to(ROOT.parent)}:{line}: {name}"
             for p in _modules(package) for line, name in _names(p) if NAMED.search(name)]
    assert not found, "\n".join(found)


def test_the_scans_find_what_they_are_for(tmp_path: Path) -> None:
    """The code before issue 36's move, as the scans read it."""
    old = tmp_path / "compose.py"
    old.write_text("from ..detect.app_server_state import AppServerState\n"
                   "from ..codex_server.client import AppServerClient\n"
                   "def _app_server_state(rec):\n    return rec.options.app_server\n",
                   encoding="utf-8")
    names = [n for _, n in _names(old) if NAMED.search(n)]
    assert sorted(set(names)) == ["AppServerClient", "AppServerState", "_app_server_state",
                                  "app_server"]
    inside = ROOT / "sessions" / "_scan_probe.py"  # where the imports resolve as sessions'
    try:
        inside.write_text(old.read_text(encoding="utf-8"), encoding="utf-8")
        assert [m for _, m in _imports(inside) if m.startswith(SERVER_PACKAGES)] \
            == ["agentwrap.codex_server.client.AppServerClient"]
    finally:
        inside.unlink()


def test_the_agent_table_leads_a_launch_to_its_native_channel() -> None:
    """An agent with a server of its own names the module of its channel; every
    such channel loads and has the face sessions asks of it; the others have none."""
    from agentwrap.app_server.channel import CHANNEL
    from agentwrap.sessions.native import native_channel, native_channels

    assert native_channel("codex") is CHANNEL
    natives = [a for a in AGENTS.values() if a.native is not None]
    assert [a.name for a in natives] == ["codex"]
    for agent in AGENTS.values():
        channel = native_channel(agent.name)
        assert (channel is None) is (agent.native is None), agent.name
        if channel is not None:
            for method in ("launch", "open", "stop", "describe", "doctor"):
                assert callable(getattr(channel, method)), (agent.name, method)
    assert native_channel("standin") is None and native_channel(None) is None
    assert native_channels() == [CHANNEL]


def test_a_session_not_on_the_server_opens_none(tmp_path: Path) -> None:
    """The channel gives a supervisor nothing for a launch that started no
    server (the switch off, or the launch fell back): the screen and typing, as before."""
    from agentwrap.app_server.channel import CHANNEL
    from agentwrap.config import Config
    from agentwrap.detect.profiles import load_profile
    from agentwrap.paths import Paths
    from agentwrap.session_options import SessionOptions

    paths = Paths(config_dir=tmp_path / "c", state_dir=tmp_path / "s", runtime_dir=tmp_path / "r")
    fell_back = SessionOptions.from_json({"app_server_note": "off: no --remote"})
    got = CHANNEL.open(
        paths, Config(), load_profile("codex", paths), fell_back, name="cx", command=["codex"],
        cwd=tmp_path, env={}, store=None, audit=None, require_ack=False,  # type: ignore[arg-type]
        wake=lambda: None, agent_pid=lambda: None, options=lambda: fell_back,
        record=lambda _o: None)
    assert got is None
    assert CHANNEL.describe(fell_back) == "off: no --remote"
