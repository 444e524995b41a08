"""``agentwrap watch``, ``agentwrap schedule`` and ``history --source`` as real
subprocesses against a registered session."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import AwEnv
from support.waiting import wait_for

from agentwrap.service import Service

PY = sys.executable


def test_watch_queues_changes_and_a_checks_result_until_ctrl_c(aw: AwEnv, svc: Service) -> None:
    (aw.project / "src").mkdir()
    check = aw.root / "check.py"
    check.write_text("import sys\nprint('checked', sys.argv[1:])\nsys.exit(3)\n")
    proc = subprocess.Popen(
        [PY, "-m", "agentwrap", "watch", "src", "--session", "fake", "--json",
         "--run", f"{PY} {check} {{files}}", "--name", "lint", "--debounce-ms", "100"],
        cwd=aw.project, env=aw.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def saved_and_reported() -> bool:  # saved again until the watcher is up and reports
            (aw.project / "src" / "a.py").write_text("x")
            time.sleep(0.5)
            return any(e.message.source_id == "lint" for e in svc.history("fake"))

        wait_for(saved_and_reported,
                 timeout=30, what="the check's failure queued",
                 on_timeout=lambda: (proc.poll() is not None and proc.communicate()[1]) or "")
    finally:
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 0, stderr
    events = [json.loads(line) for line in stdout.splitlines()]
    kinds = [e["event"] for e in events]
    assert "burst" in kinds and "ran" in kinds and "queued" in kinds
    ran = next(e for e in events if e["event"] == "ran")
    assert ran["source"] == "lint" and ran["exit"] == 3
    [m] = [e.message for e in svc.history("fake")]
    assert "checked ['a.py']" in m.content and str(m.source) == "filesystem"
    hist = aw.cli("history", "fake", "--source", "lint", "--json", check=True)
    assert [h["id"] for h in json.loads(hist.stdout)] == [m.id]
    none = aw.cli("history", "fake", "--source", "ruff", "--json", check=True)
    assert json.loads(none.stdout) == []


def test_schedule_start_runs_every_period_and_list_shows_trust(aw: AwEnv, svc: Service) -> None:
    counter = aw.root / "n"
    tick = aw.root / "tick.py"
    tick.write_text(f"import pathlib\np = pathlib.Path({str(counter)!r})\n"
                    "n = int(p.read_text()) + 1 if p.exists() else 1\np.write_text(str(n))\n"
                    "print('tick', n)\n")
    r = aw.cli("schedule", "start", "fake", "--every", "1s", "--run", f"{PY} {tick}",
               "--name", "tick", "--now", "--times", "2", "--json", timeout=60)
    assert r.returncode == 0, r.stderr
    msgs = [e.message for e in reversed(svc.history("fake"))]
    assert [str(m.source) for m in msgs] == ["scheduler", "scheduler"]
    assert "tick 1" in msgs[0].content and "tick 2" in msgs[1].content
    (aw.project / ".agentwrap.toml").write_text(
        '[[schedule]]\nname = "pr"\nevery = "15m"\nrun = "gh pr checks"\nsession = "fake"\n')
    listed = json.loads(aw.cli("schedule", "list", "--json", check=True).stdout)
    assert listed["schedules"] == [] and "feedback_projects" in listed["skipped"][0]
    Path(aw.paths.config_file).write_text(f'[trust]\nfeedback_projects = ["{aw.project}"]\n')
    listed = json.loads(aw.cli("schedule", "list", "--json", check=True).stdout)
    assert [(s["name"], s["every_s"], s["run"]) for s in listed["schedules"]] == [
        ("pr", 900.0, "gh pr checks")]


def test_watch_refuses_an_unknown_session_with_a_hint(aw: AwEnv, svc: Service) -> None:
    r = aw.cli("watch", ".", "--session", "nobody")
    assert r.returncode != 0 and "nobody" in r.stderr
