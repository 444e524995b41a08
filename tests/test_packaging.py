"""The wheel: built from the repo, it carries the built-in profiles and the
native pty relay, and an installed copy uses both from itself (not from the
source checkout). Without a compiler (AGENTWRAP_NO_NATIVE) it is pure Python."""

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
#: Our distribution's name: "agentwrap" on PyPI is an unrelated project's (issue 26).
DIST_NAME = "agentwrap-supervisor"
DIST_FILE_NAME = "agentwrap_supervisor"

pytestmark = pytest.mark.usefixtures("build")  # the build layer (tests/conftest.py)


def build_wheel(dist: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # From a copy of the tree: the build hook compiles next to the source,
    # and a test must not replace the binary the checkout's own runs use.
    src = dist.parent / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".venv", ".git", "__pycache__", "*_cache", "agentwrap-relay", "agentwrap-hook", "dist",
        "build"))
    return subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "-w", str(dist), "-q"],
        capture_output=True, text=True, timeout=600, check=False, cwd=dist.parent,
        env=env,
    )


def run_installed(target: Path, args: list[str], cwd: Path,
                  **env: str) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` seeing only the installed copy in ``target``."""
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    clean.update(env, PYTHONPATH=str(target))
    res = subprocess.run([sys.executable, *args], capture_output=True, text=True,
                         env=clean, cwd=cwd, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    return res


@pytest.fixture(scope="module")
def built() -> Iterator[tuple[Path, Path]]:
    """(wheel, install target), built once for the module."""
    tmp = Path(tempfile.mkdtemp(prefix="awpkg-"))
    try:
        dist = tmp / "dist"
        res = build_wheel(dist)
        assert res.returncode == 0, res.stderr
        wheels = list(dist.glob(f"{DIST_FILE_NAME}-*.whl"))
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
        assert f"agentwrap/detect/_patterns/{p}.toml" in names
    assert "agentwrap/surfaces/cli/app.py" in names and "agentwrap/terminal/tmux.py" in names
    for page in ("index.html", "app.js", "app.css", "terminal.js", "terminal.css",  # the dashboard
                 "conversation.js", "conversation.css"):
        assert f"agentwrap/surfaces/http/static/{page}" in names
    from agentwrap.surfaces.http.dashboard import VENDOR  # xterm.js, pinned, with its licences

    for vendored in VENDOR:
        assert f"agentwrap/surfaces/http/static/vendor/{vendored}" in names
    assert not any(n.startswith("tests/") for n in names)
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "agentwrap = agentwrap.surfaces.cli.app:main" in zipfile.ZipFile(wheel).read(entry).decode()


def test_installed_wheel_loads_profiles_from_itself(built: tuple[Path, Path]) -> None:
    _, target = built
    outside = Path(tempfile.mkdtemp(prefix="awpkg-run-"))
    try:
        code = (
            "import json, agentwrap, agentwrap.detect.profiles as p\n"
            "profs = p.load_all_profiles()\n"
            "print(json.dumps({'pkg': agentwrap.__file__, 'builtin': str(p.builtin_patterns_dir()),"
            " 'profiles': {n: str(x.source) for n, x in profs.items()}}))\n"
        )
        home = {"HOME": str(outside), "XDG_CONFIG_HOME": str(outside / "c")}
        data = json.loads(run_installed(target, ["-c", code], outside, **home).stdout)
        assert Path(data["pkg"]).resolve().is_relative_to(target.resolve())
        assert Path(data["builtin"]) == (target / "agentwrap" / "detect" / "_patterns").resolve()
        assert set(BUILTINS) <= set(data["profiles"])
        for name in BUILTINS:
            src = Path(data["profiles"][name]).resolve()
            assert src == (target / "agentwrap" / "detect" / "_patterns" / f"{name}.toml").resolve()
        # and the command runs from there too
        res = run_installed(target, ["-m", "agentwrap", "profiles", "--json"], outside, **home)
        rows = json.loads(res.stdout)
        assert {r["name"] for r in rows} >= set(BUILTINS)
        assert all(Path(r["source"]).resolve().is_relative_to(target.resolve()) for r in rows)
    finally:
        shutil.rmtree(outside, ignore_errors=True)


def test_wheel_carries_the_native_relay_and_the_installed_copy_uses_it(
    built: tuple[Path, Path],
) -> None:
    wheel, target = built
    assert "-py3-none-linux_" in wheel.name  # a program, not an extension: any CPython
    info = zipfile.ZipFile(wheel).getinfo("agentwrap/terminal/_native/agentwrap-relay")
    assert (info.external_attr >> 16) & 0o111, "the helper must be executable in the wheel"
    code = (
        "import json\n"
        "from agentwrap.terminal.relay_helper import helper_status\n"
        "path, why = helper_status()\n"
        "print(json.dumps({'path': str(path) if path else None, 'why': why}))\n"
    )
    got = json.loads(run_installed(target, ["-c", code], target.parent).stdout)
    assert got["path"] == str((target / "agentwrap" / "terminal" / "_native" / "agentwrap-relay").resolve()), got


def test_wheel_carries_the_native_hook_client_and_the_installed_copy_registers_it(
    built: tuple[Path, Path],
) -> None:
    """Issue 27: the hooks run the installed client (not the checkout's)."""
    wheel, target = built
    info = zipfile.ZipFile(wheel).getinfo("agentwrap/terminal/_native/agentwrap-hook")
    assert (info.external_attr >> 16) & 0o111, "the client must be executable in the wheel"
    code = ("from agentwrap.sessions.channels import hook_client\n"
            "print(hook_client({}))\n")
    got = run_installed(target, ["-c", code], target.parent).stdout.strip()
    assert got == str((target / "agentwrap" / "terminal" / "_native" / "agentwrap-hook").resolve())


def test_without_a_compiler_the_wheel_is_pure_python() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="awpkg-pure-"))
    try:
        dist = tmp / "dist"
        res = build_wheel(dist, env={**os.environ, "AGENTWRAP_NO_NATIVE": "1"})
        assert res.returncode == 0, res.stderr
        (wheel,) = dist.glob(f"{DIST_FILE_NAME}-*.whl")
        assert wheel.name.endswith("-py3-none-any.whl")
        names = zipfile.ZipFile(wheel).namelist()
        assert "agentwrap/terminal/_native/relay.c" in names
        assert "agentwrap/terminal/_native/agentwrap-relay" not in names
        assert "agentwrap/terminal/_native/hook.c" in names
        assert "agentwrap/terminal/_native/agentwrap-hook" not in names
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_the_distribution_is_ours_by_name_the_command_and_import_stay(
        built: tuple[Path, Path]) -> None:
    """`pip install agentwrap` would fetch someone else's code: the wheel is
    named agentwrap-supervisor, installs the `agentwrap` command and package,
    and the README says which name to ask pip for."""
    wheel, _ = built
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        head = zf.read(meta).decode()
        entry = next(n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt"))
        scripts = zf.read(entry).decode()
    assert f"\nName: {DIST_NAME}\n" in head
    assert "agentwrap = agentwrap.surfaces.cli.app:main" in scripts
    assert any(n.startswith("agentwrap/") for n in zipfile.ZipFile(wheel).namelist())
    readme = (ROOT / "README.md").read_text()
    assert f"`{DIST_NAME}`" in readme and "pip install agentwrap " not in readme
