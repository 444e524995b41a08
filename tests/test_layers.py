"""The test layers (issue 36) are one list: the capability fixtures of
tests/conftest.py, the markers pyproject.toml registers and the expression
scripts/layers.sh selects with; and the fast layer cannot hide a tmux server."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import LAYERS, NO_TMUX, NOT_LAYERS, ROOT, TMUX_CALLED

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib


def test_the_layers_are_one_list() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    registered = [m.split(":")[0] for m in project["tool"]["pytest"]["ini_options"]["markers"]]
    assert sorted(registered) == sorted(LAYERS + NOT_LAYERS)
    script = (ROOT / "scripts" / "layers.sh").read_text(encoding="utf-8")
    slow = re.search(r'^SLOW_LAYERS="([^"]*)"', script, re.M)
    assert slow is not None and slow.group(1).split(" or ") == list(LAYERS)


def test_in_the_fast_layer_tmux_is_the_stub_that_fails_the_test(tmp_path: Path) -> None:
    """This test is in the fast layer: the tmux it finds records its call."""
    assert shutil.which("tmux") == str(NO_TMUX / "tmux")
    called = tmp_path / "called"
    done = subprocess.run(["tmux", "-V"], env={**os.environ, TMUX_CALLED: str(called)},
                          capture_output=True, text=True, check=False)
    assert done.returncode == 127 and "not in the tmux layer" in done.stderr
    assert called.read_text() == "tmux -V\n"
    called.unlink()  # (else this very test would fail: its stub was called)


@pytest.mark.usefixtures("tmux")
def test_in_the_tmux_layer_tmux_is_the_real_one(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("tmux") is not None
    assert shutil.which("tmux") != str(NO_TMUX / "tmux")


def test_markers_follow_the_fixtures() -> None:
    """The store contract tests run once per backend: the PostgreSQL runs are
    the postgres layer, the SQLite ones the fast layer; ``aw`` is tmux's."""
    fast = "not (" + " or ".join(LAYERS) + ")"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--co", "-q", "-m", fast,
         "tests/test_queue_guards.py", "tests/test_cli_send.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    selected = [line for line in done.stdout.splitlines() if "::" in line]
    assert selected and all(t.startswith("tests/test_queue_guards.py::") for t in selected)
    assert not [t for t in selected if "postgres" in t]  # and test_cli_send's one takes `aw`
    assert [t for t in selected if "[sqlite]" in t]


def test_ci_runs_the_quick_checks_first() -> None:
    """A fresh machine is set up, then a lint or type error fails in minutes
    (scripts/check.sh), and only then do the slow layers run, once each."""
    for script in ("scripts/setup.sh", "scripts/check.sh", "scripts/test.sh", "scripts/layers.sh",
                   ".ci/run"):
        done = subprocess.run(["bash", "-n", str(ROOT / script)], capture_output=True, text=True,
                              check=False)
        assert done.returncode == 0, f"{script}: {done.stderr}"
    steps = [line for line in (ROOT / ".ci/run").read_text(encoding="utf-8").splitlines()
             if line.startswith(("bash ", "exec "))]
    assert steps == ["bash scripts/setup.sh", "bash scripts/check.sh",
                     "exec bash scripts/test.sh --slow-layers"]
    check = (ROOT / "scripts/check.sh").read_text(encoding="utf-8")
    order = [check.index(tool) for tool in (".venv/bin/ruff check", "-m mypy", ".venv/bin/lint-imports",
                                            "run_layer \"$FAST_LAYER\"")]
    assert order == sorted(order)


def test_the_timing_tests_are_e2e_tests_that_exist() -> None:
    """Each entry of the e2e ``TIMING`` list names a module and tests there (a rename
    would otherwise drop a test from the alone-run silently), and the marker
    reaches only the real-agent layer (not tests/test_feedback.py, say, whose name an
    e2e module has too)."""
    from e2e.conftest import TIMING

    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--co", "-q", "-m", "timing",
         "tests/e2e", "tests/test_feedback.py"], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    selected = [line for line in done.stdout.splitlines() if "::" in line]
    assert selected and all(t.startswith("tests/e2e/") for t in selected), selected
    for entry in TIMING:
        module, _, name = entry.partition("::")
        assert [t for t in selected if t.startswith(f"tests/e2e/{module}::{name}")], entry
