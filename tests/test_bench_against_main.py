"""``--against COMMIT`` on every benchmark (scripts/bench_against.py's
``add_arguments`` and ``main``): each script takes the option and hands its
own command line to the one mechanism, which runs it per tree with its
``--json`` and turns every number it reports into a ratio row. The plumbing
underneath (the built tree, the turns) is tests/test_bench_against.py's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
#: every benchmark: scripts/bench_*.py but the plumbing, and the store's soak
BENCHMARKS = [*sorted(p.name for p in SCRIPTS.glob("bench_*.py") if p.name != "bench_against.py"),
              "soak_store.py"]


def bench_against() -> ModuleType:
    sys.path.insert(0, str(SCRIPTS))
    try:
        import bench_against as mod
    finally:
        sys.path.remove(str(SCRIPTS))
    return mod


def test_the_table_holds_every_benchmark() -> None:
    assert len(BENCHMARKS) >= 18 and "bench_ready.py" in BENCHMARKS


@pytest.mark.parametrize("script", BENCHMARKS)
def test_every_benchmark_takes_against_and_hands_it_to_the_one_mechanism(script: str) -> None:
    """``--help`` names ``--against`` and the runs per tree, and the script
    gives ``--against`` to bench_against (its ``main``, or for the two with a
    table of their own, its ``interleaved``): no copy of the plumbing."""
    out = subprocess.run([sys.executable, str(SCRIPTS / script), "--help"], capture_output=True,
                         text=True, timeout=120, check=False, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "--against" in out.stdout and "rounds" in out.stdout, script
    text = (SCRIPTS / script).read_text(encoding="utf-8")
    assert "against(__file__" in text or "interleaved(args.against" in text, script
    assert "git\", \"-C\", str(ROOT), \"archive\"" not in text  # no tree exported by hand


def test_the_child_is_the_same_command_without_against_and_with_its_json() -> None:
    ba = bench_against()
    tree = ba.Tree("ref", "abc", Path("/t"), "/t/python")
    argv = ["--runs", "3", "--against", "6b594c1", "--against-rounds=2", "--json", "x.json"]
    to_file = ba.Child.of(SCRIPTS / "bench_tap.py", argv, json_file=True)
    assert to_file.argv(tree, "", Path("/o.json")) == [
        "/t/python", str(SCRIPTS / "bench_tap.py"), "--runs", "3", "--json", "/o.json"]
    stdout = ba.Child.of("bench_tap.py", ["--against=HEAD", "--json", "--runs", "1"],
                         json_file=False)
    assert stdout.argv(tree, "", Path("/o"))[2:] == ["--runs", "1", "--json"]


def test_every_number_reported_is_a_figure_by_its_path_settings_and_samples_not() -> None:
    ba = bench_against()
    got = ba.figures({"response": {"p50_ms": 3, "samples_ms": [1, 2, 3]}, "runs": 5, "ok": True,
                      "results": [{"agent": "claude", "ready_ms": 9.5}, {"x": 1}],
                      "errors": ["e"], "pid": 7})
    assert got == {"response.p50_ms": 3.0, "results.claude.ready_ms": 9.5, "results.1.x": 1.0}
    rows = ba.ratio_rows([{"a": 1, "n": 4}, {"a": 3, "n": 4}], [{"a": 2, "n": 4}, {"b": 1}])
    # n is the same in every run (a setting echoed back), b has one value: no row for either;
    # a run that did not report a figure has NaN in its place (not a zero)
    (row,) = rows
    assert row[0] == "a" and row[1] == [1.0, 3.0] and row[2][0] == 2.0 and row[2][1] != row[2][1]


@pytest.mark.usefixtures("build")
@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs a checkout")
def test_main_runs_the_benchmark_on_each_tree_turn_about_and_prints_the_ratios(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A benchmark that reports the tree it measured (benchlib.UNDER_TEST)
    and that tree's agentwrap: each tree's run saw its own. This checkout is
    measured in place here (``AGENTWRAP_BENCH_IN_PLACE``): built, a clean
    checkout is HEAD's own tree and the two runs would read alike."""
    monkeypatch.setenv("AGENTWRAP_BENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("AGENTWRAP_BENCH_IN_PLACE", "1")
    script = tmp_path / "bench_toy.py"
    script.write_text(
        "import argparse, json, sys\n"
        f"sys.path.insert(0, {str(SCRIPTS)!r})\n"
        "from benchlib import UNDER_TEST\n"
        "import agentwrap\n"
        "ap = argparse.ArgumentParser(); ap.add_argument('--n', type=int)\n"
        "ap.add_argument('--json')\n"
        "a = ap.parse_args()\n"
        "json.dump({'tree': str(UNDER_TEST), 'at': agentwrap.__file__,"
        " 'size_ms': len(str(UNDER_TEST)) * a.n}, open(a.json, 'w'))\n", encoding="utf-8")
    ba = bench_against()
    out = tmp_path / "summary.json"
    args = type("Args", (), {"against": "HEAD", "against_rounds": 2, "json": str(out)})()
    status = ba.main(script, args, ["--n", "2", "--against", "HEAD", "--json", str(out)],
                     json_file=True)
    assert status == 0, capsys.readouterr()
    printed = capsys.readouterr().out
    assert "size_ms" in printed and "ratio" in printed and "round 2" in printed
    got = json.loads(out.read_text())
    ref_root = tmp_path / "cache" / os.popen(f"git -C {ROOT} rev-parse HEAD").read().strip() / "tree"
    assert {r["tree"] for r in got["runs"]["ref"][""]} == {str(ref_root)}
    assert {r["at"] for r in got["runs"]["ref"][""]} == {str(ref_root / "agentwrap" / "__init__.py")}
    assert {r["tree"] for r in got["runs"]["this"][""]} == {str(ROOT)}
    (row,) = got["figures"]
    assert row["figure"] == "size_ms" and row["ratio"] == len(str(ROOT)) / len(str(ref_root))
