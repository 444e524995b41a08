"""The stand-in agent under a real agent's name, for running documentation as written.

The README and the docs show ``agentwrap run claude``; their runnable blocks
(tests/test_docs_runnable.py) run exactly that, with ``claude`` being the
stand-in: an executable ``claude`` first on PATH that starts
``tests/support/standin_agent.py``, and the stand-in's profile installed as the
user's override of the ``claude`` profile (``~/.config/agentwrap/patterns/claude.toml``,
which wins over the built-in one). Nothing else changes: the commands, the
store and the tmux servers are the real ones, in the test's own XDG dirs.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STANDIN = ROOT / "tests" / "support" / "standin_agent.py"
STANDIN_PROFILE = ROOT / "tests" / "fixtures" / "profiles" / "standin.toml"
# What the walkthrough asks the agent to do that needs its permission: the
# stand-in opens its permission dialog on it, as Claude Code asks before a command.
DIALOG_TRIGGER = "create a file"


def install(bin_dir: Path, patterns_dir: Path, log: Path, agent: str = "claude") -> None:
    """Make ``agent`` on PATH (``bin_dir``) the stand-in, with its profile as ``agent``'s."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / agent
    exe.write_text("#!/bin/sh\nexec " + shlex.join([
        sys.executable, str(STANDIN), "--log", str(log), "--dialog-on", DIALOG_TRIGGER,
        "--dialog-command", "touch notes.txt"]) + ' "$@"\n')
    exe.chmod(0o755)
    profile = STANDIN_PROFILE.read_text()
    profile = profile.replace('name = "standin"', f'name = "{agent}"', 1)
    profile = profile.replace('commands = ["standin_agent.py"]', f'commands = ["{agent}"]', 1)
    patterns_dir.mkdir(parents=True, exist_ok=True)
    (patterns_dir / f"{agent}.toml").write_text(profile)
