"""Fixtures for the end-to-end suite: a real agent CLI, supervised by the real
``agentwrap`` command, talking to the loopback model server.

Every test gets a throwaway HOME (seeded by :func:`agents.prepare_agent` so
the agent starts without first-run dialogs), its own XDG dirs and with them
its own tmux server. A missing CLI fails the test in CI (``CI=true``) and
skips it locally with the command that installs it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from support.waiting import wait_for

from .agents import AGENT_NAMES, find_agent, prepare_agent
from .model_server import ModelServer

ROOT = Path(__file__).resolve().parents[2]

# Keys that quit each agent from an empty prompt.
QUIT_KEYS: dict[str, list[str]] = {
    "claude": ["C-c", "C-c"],
    "codex": ["C-c"],
    "aider": ["C-d"],
    "gemini": ["C-c", "C-c"],
}


#: The real-agent tests whose check is what happens inside a window of time (a
#: message landing between two requests of one turn, a state between Enter and
#: busy, a steer into a running turn): marked ``timing``. When the real agents run
#: in parallel (``AW_E2E_WORKERS`` > 1, scripts/layers.sh) these run afterwards,
#: one at a time, so only their own agent loads the machine. A module, or a
#: module and the start of its tests' names.
TIMING = (
    "test_aider_read.py",
    "test_aider_read_midpair.py",
    "test_aider_turn_end.py",
    "test_codex_steer.py",
    "test_delivery_real.py::test_message_sent_while_streaming",
    "test_feedback.py",
    "test_native_channels.py",
    "test_state_sequence.py",
)


def is_timing(module: str, name: str) -> bool:
    """The test ``name`` of this folder's ``module`` is one of :data:`TIMING`."""
    return any(module == m and name.startswith(t) for m, _, t in
               (entry.partition("::") for entry in TIMING))


@pytest.hookimpl(tryfirst=True)  # before -m selects by the markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The ``timing`` marker on this folder's tests that :data:`TIMING` names."""
    here = Path(__file__).resolve().parent
    for item in items:
        if item.path.resolve().parent == here and is_timing(item.path.name, item.name):
            item.add_marker("timing")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Each phase's report kept on its item (``rep_call``...): a session's
    fixture tells from it whether the test failed, to print its logs."""
    rep = yield
    setattr(item, f"rep_{rep.when}", rep)
    return rep


#: How much of each supervisor's log a failed test prints (the end: the moments
#: before the failure; CI keeps no files, only what is printed).
LOG_TAIL_LINES = 60


def print_logs(sess: AgentSession) -> None:
    """The tail of each agentwrap log of ``sess`` (supervisor, hooks), on stdout:
    pytest shows it under the failed test's teardown."""
    logs = sess._paths().logs_dir
    for log in sorted(logs.glob("*.log")) if logs.is_dir() else []:
        lines = log.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
        print(f"--- {sess.agent}: {log.name} (last {len(lines)} lines) ---")
        print("\n".join(lines))


def require_agent(name: str) -> Path:
    exe = find_agent(name)
    if exe is None:
        msg = f"{name} CLI not installed: run `bash scripts/install_agents.sh`"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return exe


@dataclass
class AgentSession:
    agent: str
    name: str
    root: Path
    home: Path
    workdir: Path
    env: dict[str, str]
    argv: list[str]
    server: ModelServer
    started_at: float = 0.0
    extra_run_args: list[str] = field(default_factory=list)

    @property
    def socket(self) -> str:
        """This session's own tmux server (agentwrap runs one per session)."""
        return str(self._paths().tmux_socket_for(self.name))

    def cli(self, *args: str, input: str | None = None, timeout: float = 90) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "agentwrap", *args], env=self.env, cwd=self.workdir,
            input=input, capture_output=True, text=True, timeout=timeout,
        )

    def cli_json(self, *args: str) -> Any:
        res = self.cli(*args, "--json")
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout)

    def start(self, *run_args: str) -> None:
        self.started_at = time.time()
        res = self.cli(
            "run", "--detach", "--name", self.name, "--cwd", str(self.workdir),
            *run_args, *self.extra_run_args, "--", *self.argv,
        )
        assert res.returncode == 0, res.stderr

    def tmux(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["tmux", "-S", self.socket, *args], capture_output=True, text=True, timeout=20,
            check=False,
        )

    def type_keys(self, text: str) -> None:
        """A person typing (literal text, no Enter)."""
        self.tmux("send-keys", "-t", f"={self.name}:0.0", "-l", text)

    def press(self, *keys: str) -> None:
        for key in keys:
            self.tmux("send-keys", "-t", f"={self.name}:0.0", key)
            time.sleep(0.15)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", f"={self.name}:0.0").stdout

    def _paths(self) -> Any:
        from agentwrap.paths import Paths

        return Paths.from_env(self.env)

    def state(self) -> dict[str, Any]:
        """The session's state as `agentwrap state --json` prints it (read in
        process: polling through a new CLI process every 100 ms would load the
        machine the agents run on)."""
        from agentwrap.sessions.registry import Registry
        from agentwrap.surfaces.cli.inspection import _state_json

        reg = Registry(self._paths().db_path)
        try:
            return _state_json(reg.get(self.name))
        finally:
            reg.close()

    def wait_state(self, *states: str, timeout: float = 60.0) -> dict[str, Any]:
        from agentwrap.errors import SessionNotFound

        deadline = time.monotonic() + timeout
        while True:
            try:
                st = self.state()
            except SessionNotFound:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
                continue
            if st["state"] in states:
                return st
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{self.agent}: never reached {states}; last {st}\n--- screen ---\n{self.screen()}"
                )
            time.sleep(0.1)

    def history(self) -> list[dict[str, Any]]:
        from agentwrap.queue.sqlite import SQLiteMessageStore
        from agentwrap.surfaces.cli.messages import _message_json

        store = SQLiteMessageStore(self._paths().db_path)
        try:
            return [_message_json(m) for m in store.history(self.name)]
        finally:
            store.close()

    def message(self, message_id: str) -> dict[str, Any]:
        return next(m for m in self.history() if m["id"] == message_id)

    def send(self, content: str, *args: str, timeout: float = 150) -> subprocess.CompletedProcess[str]:
        """``agentwrap send``; ``timeout`` is a deadline for a hung CLI, above the
        ``--wait --timeout 90`` the tests give (at load ~20 the CLI's own start
        took seconds more, and a 90 s deadline cut off its answer)."""
        return self.cli("send", self.name, content, *args, timeout=timeout)

    def send_id(self, content: str, *args: str) -> str:
        res = self.send(content, *args)
        assert res.returncode == 0, res.stderr
        return res.stdout.strip().splitlines()[-1]

    def received_with(self, needle: str) -> list[str]:
        return [t for t in self.server.user_texts() if needle in t]

    def wait_received(self, needle: str, timeout: float = 60.0, settle: float = 1.5) -> list[str]:
        """The model requests carrying ``needle``, once the first has come and
        a moment has passed for any (wrong) second copy. "Submitted" and "the
        agent has called the model" are different moments: Codex calls later
        for a large prompt."""
        self.wait_until(lambda: self.received_with(needle), timeout, f"{needle!r} at the model")
        time.sleep(settle)
        return self.received_with(needle)

    def wait_until(self, cond: Callable[[], Any], timeout: float, what: str) -> Any:
        return wait_for(
            cond, timeout, f"{self.agent}: {what}", interval=0.1, on_timeout=self.screen
        )

    def write_config(self, text: str) -> None:
        cfg = Path(self.env["XDG_CONFIG_HOME"]) / "agentwrap" / "config.toml"
        cfg.parent.mkdir(parents=True, exist_ok=True)
        cfg.write_text(text)

    def agent_pid(self) -> int | None:
        out = self.tmux("display-message", "-p", "-t", f"={self.name}:0.0", "#{pane_pid}").stdout
        return int(out.strip()) if out.strip().isdigit() else None


def aider_against(s: AgentSession, server: ModelServer, *args: str) -> AgentSession:
    """``s`` (an Aider session not started yet) against ``server`` (a scripted
    ModelServer of the test's), on a scratch README.md it may edit."""
    server.start()
    s.server.stop()
    s.server = server
    launch = prepare_agent(s.agent, s.home, s.workdir, server.url)
    keep = {k: v for k, v in s.env.items() if k.startswith(("XDG_", "PYTHONPATH", "AGENTWRAP_"))}
    s.env = {**launch.env, **keep}
    (s.workdir / "README.md").write_text("# scratch project for agentwrap tests\n")
    s.argv = [*launch.argv, "--edit-format", "diff", *args, "README.md"]
    return s


#: The rows of ``agent-versions.json`` (``agentwrap run``'s cache of what each agent
#: CLI's ``--version`` said, keyed by the executable's real path, size and mtime)
#: that this process's earlier tests wrote. Each test has a state dir of its own,
#: so without them every start asks again: at load ~20 on the 2 cores that took
#: 14-33 s for Kimi Code, Aider, OpenCode, Cline, Qwen Code and Gemini CLI (Node
#: or Python starting up) before the agent itself started, ~250 times a run. The
#: first start of each agent in a process still runs the real probe (and shows it
#: works); a test that wraps an agent in a script of its own (another path) does too.
_VERSIONS: dict[str, str] = {}
VERSIONS_FILE = "agent-versions.json"


def _seed_versions(sess: AgentSession) -> None:
    from agentwrap.paths import private_dir, write_private

    if _VERSIONS:
        state = private_dir(sess._paths().state_dir, repair=True)
        write_private(state / VERSIONS_FILE, json.dumps(_VERSIONS, indent=1).encode())


def _keep_versions(sess: AgentSession) -> None:
    try:
        found = json.loads((sess._paths().state_dir / VERSIONS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(found, dict):  # a row for an executable of the test's own root goes with it
        _VERSIONS.update({str(k): str(v) for k, v in found.items()
                          if v and not str(k).startswith(str(sess.root))})


def _stop(sess: AgentSession) -> None:
    try:
        for rec in json.loads(sess.cli("ls", "--all", "--json").stdout or "[]"):
            pid = rec.get("supervisor_pid")
            if pid and rec.get("liveness") == "running":
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    except Exception:
        pass
    pid = sess.agent_pid()
    if pid:
        from agentwrap.terminal.proctree import kill_tree

        kill_tree(pid, signal.SIGKILL, grace=1.0)
    # and what the launch started outside the agent's tree, Codex's private
    # app-server first (its own process group, reparented to init once the
    # supervisor above is gone): everything carrying this test's state dir
    from agentwrap.terminal.proctree import kill_pids, marked

    kill_pids(marked({"AGENTWRAP_STATE_DIR": str(sess._paths().state_dir)}), signal.SIGKILL, grace=1.0)
    sess.tmux("kill-server")


@pytest.fixture(params=AGENT_NAMES)
def agent_name(request: pytest.FixtureRequest, e2e: None, tmux: None) -> str:
    name: str = request.param
    require_agent(name)
    return name


@pytest.fixture
def make_session(e2e: None, tmux: None, request: pytest.FixtureRequest
                 ) -> Iterator[Callable[..., AgentSession]]:
    made: list[AgentSession] = []
    servers: list[ModelServer] = []
    roots: list[Path] = []

    def make(agent: str, *, trusted: bool = True, onboarded: bool = True) -> AgentSession:
        require_agent(agent)
        server = ModelServer().start()
        servers.append(server)
        root = Path(tempfile.mkdtemp(prefix=f"awe-{agent[:3]}-", dir="/tmp"))
        roots.append(root)
        home, workdir = root / "home", root / "project"
        launch = prepare_agent(agent, home, workdir, server.url, trusted=trusted, onboarded=onboarded)
        env = dict(launch.env)
        env.update(
            XDG_RUNTIME_DIR=str(root / "r"),
            PYTHONPATH=str(ROOT),
            AGENTWRAP_E2E="1",
        )
        (root / "r").mkdir(mode=0o700)
        sess = AgentSession(
            agent=agent, name=agent, root=root, home=home, workdir=workdir, env=env,
            argv=list(launch.argv), server=server,
        )
        made.append(sess)
        _seed_versions(sess)
        return sess

    yield make
    failed = getattr(request.node, "rep_call", None)
    for sess in made:
        if failed is not None and failed.failed:
            print_logs(sess)
        _stop(sess)
        _keep_versions(sess)
    # and the scripted server a test swapped in: a request it holds would keep
    # pytest from exiting (its handler threads are joined) until the hold ends
    for server in [*servers, *(sess.server for sess in made)]:
        server.stop()
    for root in roots:
        shutil.rmtree(root, ignore_errors=True)


class AnsweringTerminal:
    """A pexpect-driven pty that answers terminal queries like a real terminal
    (cursor position, device attributes, colours), so agents that ask before
    drawing (Codex asks all of these) start under the pty backend as they
    would in a person's terminal."""

    _QUERY = re.compile(rb"\x1b\[6n|\x1b\[c|\x1b\]1[01];\?(?:\x07|\x1b\\)")

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        import pexpect

        self.child = pexpect.spawn(
            argv[0], argv[1:], env=env, cwd=str(cwd), dimensions=(45, 160), timeout=90
        )
        self._tail = b""
        self._stop = threading.Event()
        self.output = bytearray()
        import pyte

        class _Screen(pyte.Screen):
            def select_graphic_rendition(self, *attrs: int, **kwargs: Any) -> None:
                if not kwargs.get("private"):  # CSI > ... m: not SGR, pyte rejects it
                    super().select_graphic_rendition(*attrs)

        self.screen = _Screen(160, 45)
        self.stream = pyte.ByteStream(self.screen)
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _answer(self, query: bytes) -> bytes:
        if query == b"\x1b[6n":  # the real cursor position, as a terminal would
            return f"\x1b[{self.screen.cursor.y + 1};{self.screen.cursor.x + 1}R".encode()
        if query == b"\x1b[c":
            return b"\x1b[?62;22c"
        num = query[2:4]
        return b"\x1b]" + num + b";rgb:0000/0000/0000\x1b\\"

    def _pump(self) -> None:
        import pexpect

        while not self._stop.is_set():
            try:
                data = self.child.read_nonblocking(65536, timeout=0.2)
            except pexpect.TIMEOUT:
                continue
            except (pexpect.EOF, OSError):
                return
            self.output += data
            window = self._tail + data
            fed = 0
            for m in self._QUERY.finditer(window):
                if m.end() > len(self._tail):  # not answered with the previous chunk
                    upto = m.end() - len(self._tail)
                    self.stream.feed(data[fed:upto])
                    fed = upto
                    self.child.send(self._answer(m.group(0)))
            self.stream.feed(data[fed:])
            self._tail = window[-16:]

    def send(self, data: bytes) -> None:
        self.child.send(data)

    def wait_exit(self, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while self.child.isalive() and time.monotonic() < deadline:
            time.sleep(0.1)
        self._stop.set()
        self.thread.join(timeout=2)
        self.child.close()
        status: int | None = self.child.exitstatus
        return status

    def close(self) -> None:
        self._stop.set()
        if self.child.isalive():
            self.child.terminate(force=True)
