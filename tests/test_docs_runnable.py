"""The README's and the docs' runnable blocks run as written.

A shell block preceded by ``<!-- runnable -->`` is a promise that a person can
type it as shown. Each page's runnable blocks run here in order, each in
``bash -euo pipefail``, in an environment of their own (the tests' AwEnv: own
XDG dirs, store and tmux servers), with one substitution, documented in
:mod:`tests.support.standin_as`: the agent ``claude`` is the scripted stand-in.
A block that fails, or a page whose blocks stop working, fails the test.

With ``AGENTWRAP_SCREENSHOTS=docs/images`` the walkthrough's terminal after its
acknowledged message is saved as ``terminal.svg`` (rendered by rich from tmux's
capture with colours), the picture the README shows.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import AwEnv
from rich.console import Console
from rich.text import Text
from support import standin_as
from support.delivery_kit import tmux

ROOT = Path(__file__).resolve().parent.parent
MARK = "<!-- runnable -->"
BLOCK = re.compile(r"^<!-- runnable -->\n```(?:sh|bash)\n(.*?)^```", re.S | re.M)


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def runnable_blocks(path: Path) -> list[str]:
    text = path.read_text()
    blocks = BLOCK.findall(text)
    assert len(blocks) == text.count(MARK), f"{path}: a runnable mark not before a ```sh block"
    return blocks


RUNNABLE = [p for p in pages() if runnable_blocks(p)]


def test_the_readme_and_getting_started_have_runnable_blocks() -> None:
    assert ROOT / "README.md" in RUNNABLE
    assert ROOT / "docs" / "getting-started.md" in RUNNABLE


def test_the_readme_keeps_the_two_setup_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "bash scripts/install.sh && agentwrap run claude\n" in readme
    assert "bash scripts/test.sh\n" in readme


def save_terminal(aw: AwEnv, name: str, target: Path) -> None:
    """The session's pane, colours kept, as an SVG a page can show (at the pane's
    width; a run of empty rows in the middle is drawn as one, to keep it short)."""
    target_pane = f"={name}:0.0"
    width = int(tmux(aw, "display-message", "-p", "-t", target_pane, "#{pane_width}",
                     name=name).stdout.strip())
    shown = tmux(aw, "capture-pane", "-p", "-e", "-t", target_pane, name=name).stdout
    shown = re.sub(r"\n(?:[ \t]*(?:\x1b\[[0-9;]*m)*[ \t]*\n){2,}", "\n\n", shown.rstrip("\n"))
    with open(os.devnull, "w") as sink:
        console = Console(record=True, width=width, file=sink, force_terminal=True)
        console.print(Text.from_ansi(shown))
    target.mkdir(parents=True, exist_ok=True)
    console.save_svg(str(target / "terminal.svg"), title=f"agentwrap attach {name}")


@pytest.mark.parametrize("page", RUNNABLE, ids=[str(p.relative_to(ROOT)) for p in RUNNABLE])
def test_runnable_blocks_run_as_written(aw: AwEnv, page: Path) -> None:
    standin_as.install(aw.root / "bin", aw.paths.user_patterns_dir, aw.log)
    env = {**aw.env, "PATH": os.pathsep.join(
        [str(aw.root / "bin"), str(Path(sys.executable).parent), aw.env["PATH"]])}
    shots = os.environ.get("AGENTWRAP_SCREENSHOTS")
    for block in runnable_blocks(page):
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], env=env, cwd=aw.project,
                              capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, (f"{page.name}: this block exited {done.returncode}:\n"
                                      f"{block}\n--- stdout\n{done.stdout}\n--- stderr\n"
                                      f"{done.stderr}")
        if shots and "--ack" in block and page.name == "README.md":
            save_terminal(aw, "demo", ROOT / shots if not Path(shots).is_absolute() else Path(shots))
