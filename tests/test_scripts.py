"""The benchmark and capture scripts are not run by the suite (they take
minutes and real agents), so at least each one must import and print its
help: a script left behind by a change to the package it drives fails here,
not when somebody needs its figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

SCRIPTS = sorted(p.name for p in (ROOT / "scripts").glob("*.py"))


def test_the_scripts_are_found() -> None:
    assert "bench_http.py" in SCRIPTS and len(SCRIPTS) >= 10


@pytest.mark.parametrize("name", SCRIPTS)
def test_each_script_imports_and_prints_its_help(name: str) -> None:
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / name), "--help"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]


@pytest.mark.usefixtures("tmux")
def test_bench_ready_runs_with_the_standin(tmp_path: Path) -> None:
    """bench_ready.py end to end on the stand-in agent (no model server): every
    figure it reports is there; the figures themselves are the benchmark's, not
    this test's (no thresholds)."""
    out = tmp_path / "r.json"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_ready.py"), "--agents",
                        "standin", "--turns", "2", "--dialogs", "2", "--think", "0.3",
                        "--timeout", "60", "--json", str(out)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    [res] = json.loads(out.read_text())["results"]
    assert {"truth", "ready", "let", "ccmanager", "let_minus_truth", "keys_before_taken",
            "passing_ready", "dialogs"} <= set(res), res
    assert res["truth"]["n"] == 1 and res["ready"]["n"] == 1 and res["let"]["n"] == 1
    # early is judged in the agentwrap turn itself: its keys were seen in the box
    assert {"paired_early", "unseen"} <= set(res), res
    assert [row["early"] for row in res["rows"]] == [False], res["rows"]
    assert res["dialogs"]["taken"]["n"] == 1 and res["dialogs"]["applied"]["n"] == 1
    assert "passing" in r.stdout and "standin" in r.stdout


def test_bench_ready_keeps_the_agents_seeded_config_home(tmp_path: Path) -> None:
    """The agent runs with the config and state homes tests/e2e/agents.py
    seeded (OpenCode's loopback provider is in $XDG_CONFIG_HOME/opencode: with
    the bench's own it used its cloud model, issue 37); the stand-in, which has
    none, gets the bench's."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import bench_ready
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    seeded = {"HOME": "/h", "XDG_CONFIG_HOME": "/h/.config", "XDG_STATE_HOME": "/h/.local/state",
              "TMUX": "/tmp/x,1,0"}
    env = bench_ready.run_env(seeded, tmp_path)
    assert env["XDG_CONFIG_HOME"] == "/h/.config" and env["XDG_STATE_HOME"] == "/h/.local/state"
    assert env["XDG_RUNTIME_DIR"] == str(tmp_path / "r") and "TMUX" not in env
    bare = bench_ready.run_env({"HOME": "/h"}, tmp_path)
    assert bare["XDG_CONFIG_HOME"] == str(tmp_path / "c")


def test_bench_ready_counts_probe_keys_in_every_box_shape() -> None:
    """The probe keys at the end of the box's text, whatever follows them on
    the line: Kimi Code's right edge (issue 37: never counted, the keys were
    never erased and the run waited on a draft), Qwen's zero-width cursor."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import bench_ready
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    assert bench_ready.box_probes(" │ > zzz" + " " * 40 + "│\n") == 3  # Kimi Code
    assert bench_ready.box_probes(" > zz\u200b\n") == 2  # Qwen Code
    assert bench_ready.box_probes("❯ z\n") == 1
    assert bench_ready.box_probes(" │ > hello" + " " * 10 + "│\n") == 0
