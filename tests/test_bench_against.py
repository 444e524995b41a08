"""``--against REF`` of the benchmarks (scripts/benchlib.py): another commit's
tree, built in a private temp dir, measured with its own code, turn about with
this one. The benchmarks themselves take minutes (they are not run here); this
holds the plumbing: the tree is the commit with its native helpers, it leaves
nothing behind, and a run given a tree runs that tree's agentwrap, in the
benchmark's process and in every hook it starts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
NATIVE = Path("agentwrap") / "terminal" / "_native"

needs_cc = pytest.mark.skipif(
    not (os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")) or not shutil.which("git")
    or not (ROOT / ".git").exists(), reason="needs git, a checkout and a C compiler")
pytestmark = pytest.mark.usefixtures("build")  # the build layer (tests/conftest.py)


def benchlib() -> ModuleType:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import benchlib as mod
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return mod


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                          check=True).stdout


def test_the_trees_take_turns_each_going_first_as_often() -> None:
    assert list(benchlib().alternate(["this", "ref"], 3)) == [
        (0, ["this", "ref"]), (1, ["ref", "this"]), (2, ["this", "ref"])]


@needs_cc
def test_the_baseline_tree_is_the_commit_built_private_and_removed_after() -> None:
    bl = benchlib()
    worktrees = git("worktree", "list", "--porcelain")
    with bl.baseline_tree("HEAD") as (tree, label):
        assert label == git("rev-parse", "--short", "HEAD").strip()
        assert tree.stat().st_mode & 0o777 == 0o700
        assert (tree / "agentwrap" / "__init__.py").read_text() == git(
            "show", "HEAD:agentwrap/__init__.py")
        for name in ("agentwrap-relay", "agentwrap-hook"):  # built from the tree's own sources
            assert os.access(tree / NATIVE / name, os.X_OK), name
        assert git("worktree", "list", "--porcelain") == worktrees  # nothing registered
    assert not tree.exists()


@needs_cc
def test_bench_hooks_given_a_tree_runs_its_agentwrap_in_process_and_in_every_hook(
        tmp_path: Path) -> None:
    """A hook runs ``python -m agentwrap`` in a working directory of its own:
    started from this checkout, ``-m`` would find this checkout's agentwrap
    before the tree's (and the hooks' PYTHONPATH named this checkout)."""
    marker = tmp_path / "ran"
    out = tmp_path / "figures.json"
    with benchlib().baseline_tree("HEAD") as (tree, _):
        main = tree / "agentwrap" / "__main__.py"
        main.write_text('import os\nopen(os.environ["AW_TREE_MARKER"], "a").write("tree\\n")\n'
                        + main.read_text())
        r = subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "bench_hooks.py"), "--runs", "1",
             "--agentwrap-root", str(tree), "--json", str(out)],
            env=dict(os.environ, AW_TREE_MARKER=str(marker)), cwd=ROOT, capture_output=True,
            text=True, timeout=300, check=False)
        assert r.returncode == 0, r.stderr[-3000:]
        got = json.loads(out.read_text())
        assert got["agentwrap"] == str((tree / "agentwrap").resolve())
    python_hooks = [n for n in got["cases"] if n.startswith(("hook ", "  empty", "  1 message"))]
    assert len(python_hooks) >= 5
    # each Python hook case ran twice (warm-up and the run), every time from the tree
    assert marker.read_text().count("tree\n") >= 2 * len(python_hooks)
