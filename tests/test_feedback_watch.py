"""Watching files (agentwrap.feedback.watcher and .companion) with real
watchdog observers on temporary trees: what is seen, what is ignored, bursts,
and a session's loop running its checks and schedules."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from conftest import AwEnv
from support.waiting import wait_for

from agentwrap.feedback.companion import FeedbackLoop, LoopOptions
from agentwrap.feedback.sources import ScheduleSource, feedback_source
from agentwrap.feedback.watcher import Burst, IgnoreRules, Watcher
from agentwrap.message import Source
from agentwrap.service import Service

PY = sys.executable


class Bursts:
    def __init__(self) -> None:
        self.got: list[Burst] = []
        self.lock = threading.Lock()

    def __call__(self, b: Burst) -> None:
        with self.lock:
            self.got.append(b)

    def changes(self) -> dict[str, str]:
        with self.lock:
            return {c.path: c.kind for b in self.got for c in b.changes}


def watch(root: Path, debounce_s: float = 0.2) -> tuple[Watcher, Bursts]:
    b = Bursts()
    return Watcher(root, b, debounce_s=debounce_s).start(), b


def test_create_modify_delete_and_rename_are_seen(tmp_path: Path) -> None:
    (tmp_path / "old.py").write_text("x")
    (tmp_path / "gone.py").write_text("x")
    (tmp_path / "sub").mkdir()  # a dir made while watching gets its watch a moment later
    w, b = watch(tmp_path)
    try:
        (tmp_path / "sub" / "new.py").write_text("a")
        with open(tmp_path / "old.py", "a") as f:
            f.write("more")
        (tmp_path / "gone.py").unlink()
        os.rename(tmp_path / "sub" / "new.py", tmp_path / "sub" / "renamed.py")
        want = {"sub/renamed.py", "old.py", "gone.py", "sub/new.py"}
        got = wait_for(lambda: (c := b.changes()) and want <= set(c) and c, timeout=20,
                       what="all four changes")
        assert got["old.py"] == "modified" and got["gone.py"] == "deleted"
        assert got["sub/renamed.py"] == "moved" and got["sub/new.py"] == "deleted"
        (tmp_path / "later" / "deep").mkdir(parents=True)  # a new tree: its files are seen too
        (tmp_path / "later" / "deep" / "x.py").write_text("x")
        wait_for(lambda: "later/deep/x.py" in b.changes(), timeout=20, what="a file in a new dir")
    finally:
        w.stop()


def test_ignored_paths_never_reach_a_burst(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("*.log\nbuild/\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / ".gitignore").write_text("generated.py\n")
    for d in ("node_modules/x", "myenv", "__pycache__", "build/out", ".mypy_cache"):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / "myenv" / "pyvenv.cfg").write_text("home = /usr\n")
    w, b = watch(tmp_path)
    try:
        for rel in ("node_modules/x/i.js", "myenv/lib.py", "__pycache__/m.pyc", "build/out/a.py",
                    "debug.log", "pkg/generated.py", ".mypy_cache/c.json", ".agentwrap.toml",
                    "notes.py.swp", ".git/index.lock"):
            (tmp_path / rel).write_text("x")
        (tmp_path / "pkg" / "kept.py").write_text("x")  # the marker: seen after the others
        wait_for(lambda: "pkg/kept.py" in b.changes(), timeout=20, what="the kept file")
        time.sleep(0.5)
        assert set(b.changes()) == {"pkg/kept.py"}
        assert w.ignored >= 10
    finally:
        w.stop()
    rules = IgnoreRules(tmp_path)
    assert rules.ignored("build/x.py") and rules.ignored("a/b/c.log")
    assert not rules.ignored("src/build.py") and not rules.ignored("pkg/kept.py")


def test_a_formatter_rewriting_200_files_is_one_message(aw: AwEnv, svc: Service) -> None:
    src = aw.project / "src"
    src.mkdir()
    for i in range(200):
        (src / f"m{i:03}.py").write_text("x = 1\n")
    loop = FeedbackLoop(aw.paths, "fake", aw.project,
                        options=LoopOptions(debounce_s=0.3, changes_as="watch")).start()
    try:
        time.sleep(0.3)
        subprocess.run([PY, "-c", "import pathlib\nfor p in sorted(pathlib.Path('src').glob("
                        "'*.py')): p.write_text('x = 2\\n')"], cwd=aw.project, check=True)
        wait_for(lambda: loop.queued >= 1, timeout=20, what="a message")
        time.sleep(1.0)  # nothing more comes of the same burst
        assert loop.bursts == 1 and loop.queued == 1
    finally:
        loop.stop()
    [entry] = svc.history("fake")
    m = entry.message
    assert m.source is Source.FILESYSTEM and m.source_id == "watch"
    assert "200 files changed:" in m.content and "- src/m000.py (modified)" in m.content
    assert "... and 190 more" in m.content and len(m.content) < 1000
    assert m.metadata["feedback"]["files"][:2] == ["src/m000.py", "src/m001.py"]


def test_a_watch_source_runs_on_the_changed_files_and_reports(aw: AwEnv, svc: Service) -> None:
    check = aw.root / "check.py"
    check.write_text("import sys, pathlib\nbad = [f for f in sys.argv[1:] if 'bad' in "
                     "pathlib.Path(f).read_text()]\nprint('bad:', bad)\nsys.exit(1 if bad else 0)\n")
    src = feedback_source({"name": "lint", "run": f"{PY} {check} {{files}}",
                           "paths": ["*.py"]}, "t")
    loop = FeedbackLoop(aw.paths, "fake", aw.project, watch=[src],
                        options=LoopOptions(debounce_s=0.2)).start()
    try:
        (aw.project / "a.py").write_text("bad")
        (aw.project / "notes.txt").write_text("bad")  # not a *.py: not given to the check
        wait_for(lambda: loop.queued >= 1, timeout=20, what="the failure")
        (aw.project / "a.py").write_text("good")
        wait_for(lambda: loop.queued >= 2, timeout=20, what="the recovery")
    finally:
        loop.stop()
    fail, fixed = [e.message for e in reversed(svc.history("fake"))]
    assert fail.source is Source.FILESYSTEM and fail.source_id == "lint"
    assert "bad: ['a.py']" in fail.content and "[watch: a.py" in fail.content
    assert "now passing" in fixed.content


def test_start_sources_and_schedules_report_their_output(aw: AwEnv, svc: Service) -> None:
    counter = aw.root / "n"
    tick = aw.root / "tick.py"
    tick.write_text(f"import pathlib\np = pathlib.Path({str(counter)!r})\n"
                    "n = int(p.read_text()) + 1 if p.exists() else 1\np.write_text(str(n))\n"
                    "print('run', n)\n")
    start = feedback_source({"name": "hello", "run": f"{PY} -c \"print('hi there')\"",
                             "on": ["start"]}, "t")
    sched = ScheduleSource("tick", (PY, str(tick)), every_s=1.0, session="fake")
    loop = FeedbackLoop(aw.paths, "fake", aw.project, start_sources=[start],
                        schedules=[sched]).start()
    try:
        wait_for(lambda: loop.queued >= 3, timeout=30, what="start output and two ticks")
    finally:
        loop.stop()
    msgs = [e.message for e in reversed(svc.history("fake"))]
    hello = [m for m in msgs if m.source_id == "hello"]
    ticks = [m for m in msgs if m.source_id == "tick"]
    assert len(hello) == 1 and "hi there" in hello[0].content
    assert ticks[0].source is Source.SCHEDULER and "run 1" in ticks[0].content
    assert "run 2" in ticks[1].content and "on a schedule" in ticks[1].content


def test_an_agent_without_hooks_gets_its_edit_sources_from_the_watcher(
        aw: AwEnv, svc: Service) -> None:
    import time as _t

    from agentwrap.feedback.companion import for_session
    from agentwrap.sessions.registry import SessionRecord

    (aw.project / ".agentwrap.toml").write_text(
        '[[feedback]]\nname = "ruff"\non = ["edit"]\n[[feedback]]\nname = "git-status"\n')
    aw.paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    aw.paths.config_file.write_text(f'[trust]\nfeedback_projects = ["{aw.project}"]\n')
    for name, profile in (("ai", "aider"), ("cl", "claude")):
        svc.registry.register(SessionRecord(name=name, profile=profile, backend="tmux",
                                            command=["x"], cwd=str(aw.project),
                                            started=_t.time()))
    aider = for_session(aw.paths, "ai")
    claude = for_session(aw.paths, "cl")
    try:
        assert aider is not None and [s.name for s in aider.watch] == ["ruff"]
        assert claude is not None and claude.watch == []  # its edits come through hooks
        assert [s.name for s in claude.start_sources] == ["git-status"]
    finally:
        for loop in (aider, claude):
            if loop is not None:
                loop.stop()


def test_a_virtualenv_made_while_watching_is_ignored_once_it_is_one(tmp_path: Path) -> None:
    rules = IgnoreRules(tmp_path)
    (tmp_path / "env2" / "bin").mkdir(parents=True)
    assert not rules.ignored("env2/bin/python")  # no pyvenv.cfg yet: an ordinary dir
    (tmp_path / "env2" / "pyvenv.cfg").write_text("home = /usr\n")
    assert rules.ignored("env2/lib/site.py") and rules.ignored("env2/bin/python")


def test_stopping_the_loop_of_an_ended_session_removes_its_memory(aw: AwEnv, svc: Service) -> None:
    """A check still running when the supervisor removed an ended session's
    memory writes it again: the loop, stopped after it, removes it for good
    (and leaves a live session's memory alone)."""
    memory = aw.paths.feedback_memory("fake")
    memory.parent.mkdir(parents=True, exist_ok=True)
    memory.write_text("{}")
    FeedbackLoop(aw.paths, "fake", aw.project).start().stop()
    assert memory.exists()  # the session lives on (a host restart): kept
    svc.registry.mark_ended("fake", 0)
    FeedbackLoop(aw.paths, "fake", aw.project).start().stop()
    assert not memory.exists()
    FeedbackLoop(aw.paths, "nosuch", aw.project).start().stop()  # `watch` for no session
