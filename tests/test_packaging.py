"""The wheel: built from the repo, it carries the built-in profiles, and an
installed copy loads them from itself (not from the source checkout)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILTINS = ("claude", "codex", "aider", "gemini", "generic")


@pytest.fixture(scope="module")
def built() -> Iterator[tuple[Path, Path]]:
    """(wheel, install target), built once for the module."""
    tmp = Path(tempfile.mkdtemp(prefix="awpkg-"))
    try:
        dist = tmp / "dist"
        res = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-w", str(dist), "-q"],
            capture_output=True, text=True, timeout=600, check=False, cwd=tmp,
        )
        assert res.returncode == 0, res.stderr
        wheels = list(dist.glob("agentwrap-*.whl"))
        assert len(wheels) == 1, wheels
        target = tmp / "site"
        res = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target",
             str(target), str(wheels[0]), "-q"],
            capture_output=True, text=True, timeout=600, check=False, cwd=tmp,
        )
        assert res.returncode == 0, res.stderr
        yield wheels[0], target
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_wheel_contains_the_builtin_profiles(built: tuple[Path, Path]) -> None:
    wheel, _ = built
    names = set(zipfile.ZipFile(wheel).namelist())
    for p in BUILTINS:
        assert f"agentwrap/_patterns/{p}.toml" in names
    assert "agentwrap/cli.py" in names and "agentwrap/backends/tmux.py" in names
    assert not any(n.startswith("tests/") for n in names)
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "agentwrap = agentwrap.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()


def test_installed_wheel_loads_profiles_from_itself(built: tuple[Path, Path]) -> None:
    _, target = built
    outside = Path(tempfile.mkdtemp(prefix="awpkg-run-"))
    try:
        code = (
            "import json, agentwrap, agentwrap.profiles as p\n"
            "profs = p.load_all_profiles()\n"
            "print(json.dumps({'pkg': agentwrap.__file__, 'builtin': str(p.builtin_patterns_dir()),"
            " 'profiles': {n: str(x.source) for n, x in profs.items()}}))\n"
        )
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.update(PYTHONPATH=str(target), HOME=str(outside), XDG_CONFIG_HOME=str(outside / "c"))
        res = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True,
            env=env, cwd=outside, timeout=120, check=False,
        )
        assert res.returncode == 0, res.stderr
        data = json.loads(res.stdout)
        assert Path(data["pkg"]).resolve().is_relative_to(target.resolve())
        assert Path(data["builtin"]) == (target / "agentwrap" / "_patterns").resolve()
        assert set(BUILTINS) <= set(data["profiles"])
        for name in BUILTINS:
            src = Path(data["profiles"][name]).resolve()
            assert src == (target / "agentwrap" / "_patterns" / f"{name}.toml").resolve()
        # and the command runs from there too
        res = subprocess.run(
            [sys.executable, "-m", "agentwrap", "profiles", "--json"], capture_output=True,
            text=True, env=env, cwd=outside, timeout=120, check=False,
        )
        assert res.returncode == 0, res.stderr
        rows = json.loads(res.stdout)
        assert {r["name"] for r in rows} >= set(BUILTINS)
        assert all(Path(r["source"]).resolve().is_relative_to(target.resolve()) for r in rows)
    finally:
        shutil.rmtree(outside, ignore_errors=True)
