"""The benchmark and capture scripts are not run by the suite (they take
minutes and real agents), so at least each one must import and print its
help: a script left behind by a change to the package it drives fails here,
not when somebody needs its figures."""

from __future__ import annotations

import subprocess
import sys

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
