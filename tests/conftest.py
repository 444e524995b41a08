"""Shared fixtures: every test gets its own XDG dirs, and with them its own
tmux servers (one per session, sockets in the runtime dir), store and profiles.

Paths are kept short (``/tmp/awt-XXXX``) because unix socket paths are
limited to about 100 bytes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support import pg, stores
from support.waiting import wait_for

from agentwrap.paths import Paths
from agentwrap.queue.sqlite import SQLiteMessageStore
from agentwrap.service import Service
from agentwrap.sessions.registry import Registry, SessionRecord

ROOT = Path(__file__).resolve().parent.parent
STANDIN = ROOT / "tests" / "support" / "standin_agent.py"
STANDIN_PROFILE = ROOT / "tests" / "fixtures" / "profiles" / "standin.toml"


@dataclass
class AwEnv:
    root: Path
    env: dict[str, str]
    paths: Paths
    project: Path
    log: Path
    # argv put before every command this environment runs: a host in a network
    # namespace of its own (tests/support/netns.py: ``ip netns exec NAME``)
    wrap: tuple[str, ...] = ()

    def cli(
        self, *args: str, input: str | bytes | None = None, timeout: float = 60, check: bool = False,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``agentwrap ARGS`` as a real subprocess in this environment
        (``env``: variables to change for this run)."""
        data = input.decode() if isinstance(input, bytes) else input
        proc = subprocess.run(
            [*self.wrap, sys.executable, "-m", "agentwrap", *args], env={**self.env, **(env or {})},
            cwd=self.project,
            input=data, capture_output=True, text=True, timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"agentwrap {args} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc

    def standin(self, *extra: str) -> list[str]:
        """argv of the scripted stand-in agent, logging to ``self.log``."""
        return [sys.executable, str(STANDIN), "--log", str(self.log), *extra]

    def start_standin(self, name: str = "sa", *extra: str, run_args: tuple[str, ...] = ()) -> None:
        self.cli(
            "run", "--detach", "--name", name, "--profile", "standin", "--cols", "100",
            "--rows", "30", *run_args, "--", *self.standin(*extra), check=True,
        )

    def received(self) -> list[str]:
        """Every message the stand-in agent received, in order."""
        if not self.log.exists():
            return []
        return [json.loads(x)["text"] for x in self.log.read_text().splitlines() if x.strip()]

    def registry(self) -> Registry:
        """The registry this environment's commands use (the shared store if its
        AGENTWRAP_STORE_URL names one, as this host if it is given a name)."""
        return Registry(self.paths.db_path, url=self.env.get("AGENTWRAP_STORE_URL", ""),
                        host=self.env.get("AGENTWRAP_HOST_NAME"))

    def store(self) -> SQLiteMessageStore:
        return SQLiteMessageStore(self.paths.db_path)

    def wait_state(self, name: str, *states: str, timeout: float = 20.0) -> SessionRecord:
        """Until the session is in one of ``states`` (it may not be registered
        yet: `agentwrap run` in another process is still starting)."""
        reg = self.registry()
        last: list[SessionRecord | None] = [None]

        def reached() -> SessionRecord | None:
            last[0] = reg.find(name)
            rec = last[0]
            return rec if rec is not None and rec.state in states else None

        try:
            got: SessionRecord = wait_for(
                reached, timeout, f"{name} in {states}", on_timeout=lambda: f"last: {last[0]}"
            )
            return got
        finally:
            reg.close()

    def wait_for(self, cond: Any, timeout: float = 20.0, what: str = "condition") -> Any:
        return wait_for(cond, timeout, what)


def _teardown(aw: AwEnv) -> None:
    try:
        reg = aw.registry()
        for rec in reg.list(include_ended=True):
            if rec.supervisor_pid and rec.supervisor_alive:
                try:
                    os.kill(rec.supervisor_pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        reg.close()
    except Exception:
        pass
    if not shutil.which("tmux"):
        return
    # one tmux server per session, plus the shared one of older versions
    sockets = sorted(aw.paths.tmux_dir.glob("*.sock")) if aw.paths.tmux_dir.is_dir() else []
    for socket in [*sockets, aw.paths.tmux_socket]:
        if socket.exists():
            subprocess.run(
                ["tmux", "-S", str(socket), "kill-server"],
                capture_output=True, timeout=10, check=False,
            )


@contextmanager
def make_aw() -> Iterator[AwEnv]:
    """An environment of its own (XDG dirs, tmux servers, store): one simulated
    host. The ``aw`` fixture is one; a test of several hosts makes more."""
    root = Path(tempfile.mkdtemp(prefix="awt-", dir="/tmp"))
    env = dict(os.environ)
    env.update(
        HOME=str(root / "home"),
        XDG_CONFIG_HOME=str(root / "c"),
        XDG_STATE_HOME=str(root / "s"),
        XDG_RUNTIME_DIR=str(root / "r"),
        PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
    )
    env.pop("TMUX", None)
    env.pop("TMUX_PANE", None)
    paths = Paths.from_env(env).ensure()
    (root / "home").mkdir()
    paths.user_patterns_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(STANDIN_PROFILE, paths.user_patterns_dir / "standin.toml")
    project = root / "project"
    project.mkdir()
    aw = AwEnv(root=root, env=env, paths=paths, project=project, log=root / "received.jsonl")
    try:
        yield aw
    finally:
        _teardown(aw)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def aw() -> Iterator[AwEnv]:
    with make_aw() as env:
        yield env


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """tmux is a hard requirement in CI; locally say how to get it."""
    if shutil.which("tmux") or os.environ.get("CI"):
        return
    skip = pytest.mark.skip(reason="tmux not installed: apt-get install -y tmux")
    for item in items:
        if "aw" in getattr(item, "fixturenames", ()):
            item.add_marker(skip)


@pytest.fixture
def svc(aw: AwEnv) -> Iterator[Service]:
    """A service over the test's store with one registered session, "fake" (no process)."""
    s = Service.open(aw.paths)
    s.registry.register(SessionRecord(name="fake", profile="standin", backend="tmux",
                                      command=["x"], cwd=str(aw.project), started=time.time()))
    yield s
    s.close()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[pg.PgServer]:
    """One real PostgreSQL for the whole run (tests/support/pg.py), started on first use."""
    try:
        server = pg.start()
    except RuntimeError as exc:
        pytest.fail(f"cannot start PostgreSQL for the tests: {exc}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server: pg.PgServer) -> Iterator[str]:
    """A URL whose connections see a fresh, empty schema of their own."""
    name, url = pg_server.new_schema()
    try:
        yield url
    finally:
        pg_server.drop_schema(name)


@pytest.fixture(params=stores.BACKENDS)
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> stores.StoreTarget:
    """The contract tests' store: each test runs once per backend."""
    if request.param == "postgres":
        return stores.StoreTarget("postgres", request.getfixturevalue("pg_url"))
    return stores.StoreTarget("sqlite", str(tmp_path / "agentwrap.db"))


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A live process whose pid and start time a record can name (a running supervisor)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield proc
    proc.kill()
    proc.wait()
