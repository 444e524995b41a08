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
