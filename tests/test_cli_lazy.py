"""The ``agentwrap`` command imports only what the chosen command runs (issue 36).

Every CLI call is a new process (thousands in the test suite, one per hook or
script call): the parser holds every help text and flag and is built from light
modules; each command's handler (the service, the registry, the feedback
watchers, the web stack...) is imported when that command is chosen
(:data:`agentwrap.surfaces.cli.app.HANDLERS`). These tests hold the help tree
byte for byte against the eager CLI's and keep the cheap commands cheap.
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentwrap.surfaces.cli import app
from tests.support.help_tree import WIDTH, render

SNAPSHOT = Path(__file__).parent / "snapshots" / "cli_help.txt"

#: What no cheap command may load: the web stack, the MCP SDK, the feedback
#: watchers, live views, the supervisor, the continuity collector.
HEAVY = ("fastapi", "starlette", "uvicorn", "mcp", "watchdog", "pathspec", "rich.live",
         "agentwrap.feedback", "agentwrap.surfaces.http", "agentwrap.surfaces.mcp",
         "agentwrap.sessions.lifecycle", "agentwrap.continuity.collect")
#: What printing help needs none of: the config, the service (store, registry), the
#: answers and the handlers.
HANDLERS_AND_SERVICE = ("agentwrap.config", "agentwrap.service", "agentwrap.answers", "agentwrap.surfaces.cli.sessions",
                        "agentwrap.surfaces.cli.inspection", "agentwrap.surfaces.cli.messages")


def matching(loaded: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded if any(m == p or m.startswith(p + ".") for p in prefixes))


def test_every_help_text_is_the_eager_clis_byte_for_byte(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", WIDTH)
    assert render(app.build_parser()) == SNAPSHOT.read_text()


def test_every_command_names_a_handler_that_exists() -> None:
    """The table's names are strings: each must be a function of its module."""
    for name, handler in app.HANDLERS.items():
        module = importlib.import_module(f"agentwrap.surfaces.cli.{handler.module}")
        assert callable(getattr(module, handler.function, None)), name


def test_every_runnable_command_has_a_function() -> None:
    """A parser without ``func`` prints help and exits 2: only ``hook`` (handed over
    before parsing) and the groups whose verbs carry one may lack it."""
    parser = app.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = [n for n, p in sub.choices.items()
               if p.get_default("func") is None and not any(
                   isinstance(a, argparse._SubParsersAction) for a in p._actions)]
    assert missing == ["hook"]


def loaded_by(argv: list[str], home: Path) -> set[str]:
    code = ("import contextlib, io, sys\nfrom agentwrap.surfaces.cli.app import main\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            f"    main({argv!r})\n"
            "print(' '.join(sys.modules), file=sys.__stdout__)")
    env = {**os.environ, "HOME": str(home), "XDG_STATE_HOME": str(home / "state"),
           "XDG_CONFIG_HOME": str(home / "config"), "XDG_RUNTIME_DIR": str(home / "run")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env, check=True)
    return set(done.stdout.split())


@pytest.mark.parametrize("argv", [["--help"], ["send", "--help"], ["hub", "--help"],
                                  ["watch", "--help"], ["context", "--help"]])
def test_help_loads_no_handler_and_no_service(argv: list[str], tmp_path: Path) -> None:
    loaded = loaded_by(argv, tmp_path)
    assert "agentwrap.surfaces.cli.app" in loaded
    assert matching(loaded, HEAVY + HANDLERS_AND_SERVICE) == []


def test_ls_loads_its_own_handler_and_nothing_heavy(tmp_path: Path) -> None:
    loaded = loaded_by(["ls", "--json"], tmp_path)
    assert "agentwrap.surfaces.cli.sessions" in loaded and "agentwrap.service" in loaded
    assert matching(loaded, HEAVY) == []
    assert "agentwrap.surfaces.cli.inspection" not in loaded
    assert "agentwrap.surfaces.cli.messages" not in loaded
