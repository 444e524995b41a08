"""A session started by ``agentwrap run`` gets its project's feedback: the
supervisor host starts the trusted ``[[feedback]]`` watchers, ``start``
sources and ``[[schedule]]`` tables with the session, and stops them with it
(the stand-in agent, real tmux, a real host)."""

from __future__ import annotations

import sys
import textwrap

from conftest import AwEnv
from support.waiting import wait_for

PY = sys.executable


def _lint_source(aw: AwEnv, more: str) -> None:
    """A trusted project whose "lint" source (watch, *.py) fails on the files
    that say 'bad', then ``more`` of its .agentwrap.toml."""
    check = aw.root / "check.py"
    check.write_text("import sys, pathlib\nbad = [f for f in sys.argv[1:] if 'bad' in "
                     "pathlib.Path(f).read_text()]\nprint('BROKEN:', bad) if bad else None\n"
                     "sys.exit(1 if bad else 0)\n")
    (aw.project / ".agentwrap.toml").write_text(textwrap.dedent(f"""\
        [[feedback]]
        name = "lint"
        run = "{PY} {check} {{files}}"
        on = ["watch"]
        paths = ["*.py"]
        """) + textwrap.dedent(more))
    aw.paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    aw.paths.config_file.write_text(f'[trust]\nfeedback_projects = ["{aw.project}"]\n')


def test_the_projects_watch_and_start_sources_run_with_the_session(aw: AwEnv) -> None:
    _lint_source(aw, f"""
        [[feedback]]
        name = "hello"
        run = "{PY} -c \\"print('HELLO FROM START')\\""
        on = ["start"]

        [feedback_options]
        debounce_ms = 100
        """)
    aw.start_standin("sa")
    aw.wait_state("sa", "ready")
    wait_for(lambda: any("HELLO FROM START" in t for t in aw.received()), timeout=30,
             what="the start source's output typed into the agent")
    (aw.project / "a.py").write_text("bad")
    wait_for(lambda: any("BROKEN: ['a.py']" in t for t in aw.received()), timeout=30,
             what="the watch source's failure typed into the agent")
    typed = next(t for t in aw.received() if "BROKEN" in t)
    assert "[filesystem:lint]" in typed and "not a request from the person" in typed
    memory = aw.paths.feedback_memory("sa")  # what was said, so it is not said twice
    assert memory.is_file()
    aw.cli("stop", "sa", check=True)
    # the session ended: its memory goes with its launch files (a new "sa" starts afresh)
    wait_for(lambda: not memory.exists(), timeout=30, what="the session's feedback memory gone")
    log = aw.paths.supervisor_log("sa").read_text()
    assert "feedback for sa: watch ['lint'], start ['hello']" in log


def test_an_untrusted_projects_sources_do_not_start(aw: AwEnv) -> None:
    (aw.project / ".agentwrap.toml").write_text(
        f'[[feedback]]\nname = "x"\nrun = "{PY} -c \\"open(\'ran\', \'w\')\\""\non = ["start"]\n')
    aw.start_standin("sa")
    aw.wait_state("sa", "ready")
    log = aw.paths.supervisor_log("sa")
    wait_for(lambda: log.exists() and "not run: the project is not trusted" in log.read_text(),
             timeout=30, what="the host saying why")
    assert not (aw.project / "ran").exists()
    aw.cli("stop", "sa", check=True)


def test_a_pty_session_gets_its_projects_watchers_too(aw: AwEnv) -> None:
    """`run --backend pty` supervises in the person's own process: the feedback
    companions start there with the session and stop when the agent exits."""
    import pexpect

    _lint_source(aw, """
        [feedback_options]
        debounce_ms = 100
        """)
    child = pexpect.spawn(
        PY, ["-m", "agentwrap", "run", "--backend", "pty", "--name", "pt", "--profile",
             "standin", "--", *aw.standin()],
        env=aw.env, cwd=str(aw.project), dimensions=(30, 100), timeout=60,
    )
    try:
        aw.wait_state("pt", "ready")
        log = aw.paths.supervisor_log("pt")
        wait_for(lambda: log.exists() and "feedback for pt: watch ['lint']" in log.read_text(),
                 timeout=30, what="the watcher started with the pty session")
        (aw.project / "b.py").write_text("bad")
        wait_for(lambda: any("BROKEN: ['b.py']" in t for t in aw.received()), timeout=30,
                 what="the watch source's failure typed into the agent")
        aw.wait_state("pt", "ready")
        child.send("\x04")  # Ctrl-D on an empty box: the stand-in exits
        child.expect(pexpect.EOF, timeout=30)
    finally:
        child.close()
    typed = next(t for t in aw.received() if "BROKEN" in t)
    assert "[filesystem:lint]" in typed
