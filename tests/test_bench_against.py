"""``--against COMMIT`` of the benchmarks (scripts/bench_against.py): another
commit's tree and interpreter, built once into a cache, measured with its own
code, turn about with this one. The benchmarks themselves take minutes (they
are not run here); this holds the plumbing: the tree is the commit with its
native helpers, built once and registered nowhere, its interpreter runs its
agentwrap, the trees take turns, and a run given a tree runs that tree's
agentwrap, in the benchmark's process and in every hook it starts."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import pytest
from support.waiting import wait_for

ROOT = Path(__file__).resolve().parent.parent
NATIVE = Path("agentwrap") / "terminal" / "_native"

needs_cc = pytest.mark.skipif(
    not (os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")) or not shutil.which("git")
    or not (ROOT / ".git").exists(), reason="needs git, a checkout and a C compiler")
pytestmark = pytest.mark.usefixtures("build")  # the build layer (tests/conftest.py)


def bench_against() -> ModuleType:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import bench_against as mod
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return mod


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                          check=True).stdout


def test_the_trees_take_turns_each_going_first_as_often() -> None:
    assert list(bench_against().alternate(["this", "ref"], 3)) == [
        (0, ["this", "ref"]), (1, ["ref", "this"]), (2, ["this", "ref"])]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The built trees' cache, private to the test (not ~/.cache)."""
    monkeypatch.setenv("AGENTWRAP_BENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@needs_cc
def test_the_baseline_is_the_commit_built_once_with_an_interpreter_of_its_own(
        cache: Path) -> None:
    ba = bench_against()
    def worktrees() -> set[str]:  # the paths only: another's may turn prunable meanwhile
        return {x for x in git("worktree", "list", "--porcelain").splitlines()
                if x.startswith("worktree ")}

    before = worktrees()
    ref = ba.baseline("HEAD")
    commit = git("rev-parse", "HEAD").strip()
    assert ref.label == git("rev-parse", "--short", "HEAD").strip()
    assert ref.root == cache / commit / "tree"
    assert cache.stat().st_mode & 0o777 == 0o700
    assert (ref.root / "agentwrap" / "__init__.py").read_text() == git(
        "show", "HEAD:agentwrap/__init__.py")
    for name in ("agentwrap-relay", "agentwrap-hook"):  # built from the tree's own sources
        assert os.access(ref.root / NATIVE / name, os.X_OK), name
    assert worktrees() == before  # nothing registered
    # its interpreter imports the tree's agentwrap from anywhere, its dependencies this venv's
    found = subprocess.run([ref.python, "-c", "import agentwrap, rich; print(agentwrap.__file__)"],
                           capture_output=True, text=True, check=True, cwd="/",
                           env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert found.stdout.strip() == str(ref.root / "agentwrap" / "__init__.py")
    stamp = (ref.root / "agentwrap" / "__init__.py").stat().st_mtime_ns
    again = ba.baseline("HEAD")  # cached: not built again
    assert again == ref and (ref.root / "agentwrap" / "__init__.py").stat().st_mtime_ns == stamp
    assert [p.name for p in cache.iterdir()] == [commit]  # no half-built tree left
    # the venv that built it gone (its worktree removed): the next use links this venv's
    (pth,) = (cache / commit / "venv").glob("lib/python*/site-packages/agentwrap-bench-against.pth")
    pth.write_text(f"{ref.root}\n/nonexistent/removed-worktree/.venv/lib/site-packages\n")
    ba.baseline("HEAD")
    subprocess.run([ref.python, "-c", "import agentwrap, rich"], check=True, cwd="/",
                   env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})


@needs_cc
def test_interleaved_runs_each_tree_by_its_own_interpreter_turn_about(cache: Path) -> None:
    ba = bench_against()
    seen: list[tuple[int, str]] = []

    def argv(tree: object, group: str, out: Path) -> list[str]:
        return [tree.python, "-c", "import agentwrap, json, sys; json.dump("  # type: ignore[attr-defined]
                "{'at': agentwrap.__file__}, open(sys.argv[1], 'w'))", str(out)]

    def read(proc: subprocess.CompletedProcess[str], out: Path) -> dict[str, object]:
        got: dict[str, object] = json.loads(out.read_text())
        return got

    runs = ba.interleaved("HEAD", 2, argv, read,
                          progress=lambda r, g, tree, res: seen.append((r, tree.side)))
    assert seen == [(0, "this"), (0, "ref"), (1, "ref"), (1, "this")]
    assert runs.failed == 0 and len(runs.loads) == 4
    assert {r["at"] for r in runs.results["ref"][""]} == {
        str(runs.trees["ref"].root / "agentwrap" / "__init__.py")}
    # this checkout, built as the other commit is (a snapshot of its files: like for like)
    this = runs.trees["this"].root
    assert {r["at"] for r in runs.results["this"][""]} == {str(this / "agentwrap" / "__init__.py")}
    assert (this / "agentwrap" / "__init__.py").read_bytes() == \
        (ROOT / "agentwrap" / "__init__.py").read_bytes()


@needs_cc
def test_a_snapshot_of_this_checkout_holds_its_changes_and_leaves_the_repository_alone(
) -> None:
    ba = bench_against()
    before = (git("rev-parse", "HEAD").strip(), git("status", "--porcelain"),
              git("ls-files", "--stage"))
    new = ROOT / "scripts" / f".snapshot-probe-{os.getpid()}.txt"
    new.write_text("a new file\n")
    try:
        commit = ba.snapshot()
        assert commit == ba.snapshot()  # the same files: the same commit (its build reused)
        assert git("show", f"{commit}:scripts/{new.name}") == "a new file\n"
        assert git("rev-parse", f"{commit}^").strip() == before[0]
    finally:
        new.unlink()
    assert (git("rev-parse", "HEAD").strip(), git("status", "--porcelain"),
            git("ls-files", "--stage")) == before


@needs_cc
def test_bench_hooks_given_a_tree_runs_its_agentwrap_in_process_and_in_every_hook(
        tmp_path: Path, cache: Path) -> None:
    """A hook runs ``python -m agentwrap`` in a working directory of its own:
    started from this checkout, ``-m`` would find this checkout's agentwrap
    before the tree's (and the hooks' PYTHONPATH named this checkout)."""
    marker = tmp_path / "ran"
    out = tmp_path / "figures.json"
    with tempfile.TemporaryDirectory() as scratch:
        tree = Path(scratch) / "tree"
        shutil.copytree(bench_against().baseline("HEAD").root, tree)
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


PARENT = """
import signal, sys
sys.path.insert(0, sys.argv[1])
import bench_against as ba
from benchlib import raise_interrupted
signal.signal(signal.SIGTERM, raise_interrupted)
tree = ba.Tree("this", "this", ba.ROOT, sys.executable)
ba.run_child([sys.executable, "-c", sys.argv[2], sys.argv[3]], tree)
"""
#: A benchmark run that never ends on its own; it writes its pid once started.
FOREVER = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(600)"


def test_a_run_ends_with_the_against_process_that_started_it(tmp_path: Path) -> None:
    """``timeout 480 bench_store.py --against ..`` ended the parent only: its
    child went on (starting ``agentwrap send`` callers) at a load of 31."""
    pid_file = tmp_path / "child.pid"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(ROOT / "scripts"), FOREVER,
                               str(pid_file)])
    try:
        child = int(wait_for(lambda: pid_file.exists() and pid_file.read_text(), 60,
                             "the benchmark's run to start"))
        parent.terminate()
        parent.wait(timeout=120)

        def gone() -> bool:
            try:
                with open(f"/proc/{child}/stat", "rb") as f:
                    return f.read().split(b") ")[-1][:1] in (b"Z", b"X")
            except OSError:
                return True

        wait_for(gone, 60, "the benchmark's run to end with its parent")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if pid_file.exists() and pid_file.read_text().isdigit():  # never left behind
            with contextlib.suppress(OSError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
