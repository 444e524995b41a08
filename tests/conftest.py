"""Shared fixtures: every test gets its own XDG dirs, and with them its own
tmux servers (one per session, sockets in the runtime dir), store and profiles.

Paths are kept short (``/tmp/awt-XXXX``) because unix socket paths are
limited to about 100 bytes.

The test layers (issue 36) follow from the fixtures. What a test starts
besides Python (a tmux server, PostgreSQL, Chromium, a network namespace, a
container, a real agent CLI) is started by a fixture that depends on the
*capability fixture* of that name (:data:`LAYERS`: ``tmux``, ``postgres``,
``browser``, ``netns``, ``container``, ``e2e``; and ``build``, a test that
builds a wheel or another commit's tree), and a test that reaches one,
directly or through other fixtures, gets the marker of the same name. The
capability fixture says why a test cannot run here (skipped locally with the
command that installs what is missing; failed in CI). The fast layer is what
reaches none: ``pytest -m "not (tmux or postgres or browser or netns or
container or e2e or build)"`` (``scripts/check.sh``). In the fast layer, ``tmux`` on
PATH is a stub (``tests/support/no_tmux/tmux``) and a test that calls it fails:
a test that starts tmux without saying so cannot hide in the fast layer.
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


#: The layers beside the fast one: each is a capability fixture below and the
#: marker (pyproject.toml) of every test that reaches it; scripts/check.sh runs
#: the tests that reach none.
LAYERS = ("tmux", "postgres", "browser", "netns", "container", "e2e", "build")
#: Markers that are no layer: ``timing`` splits the e2e layer (tests/e2e/conftest.py).
NOT_LAYERS = ("timing",)
NO_TMUX = ROOT / "tests" / "support" / "no_tmux"  # its `tmux` fails the test that calls it
TMUX_CALLED = "AGENTWRAP_TEST_TMUX_CALLED"  # where the stub says it was called


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C heard, however the suite was launched. A non-interactive shell starts a
    background job (``bash .ci/run &``, a harness's ``cmd &``) with SIGINT *ignored*,
    and an ignored signal is inherited through every fork and exec: each ``agentwrap``
    the tests start would then ignore the SIGINT a test sends it (``events --follow``
    did not stop in two clean-clone runs started that way, and stopped in every run
    from a terminal). The tests are about agentwrap's own handling, not the
    launcher's, so the suite starts from the default a terminal gives."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(tryfirst=True)  # before -m selects by the markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test gets the marker of every capability fixture it reaches."""
    for item in items:
        reached = getattr(item, "fixturenames", ())
        for layer in LAYERS:
            if layer in reached and item.get_closest_marker(layer) is None:
                item.add_marker(layer)


def _missing(why: str) -> None:
    """CI installs everything (scripts/setup.sh): there a missing tool fails the
    test; locally the test is skipped with the way to get it."""
    if os.environ.get("CI"):
        pytest.fail(why)
    pytest.skip(why)


@pytest.fixture(scope="session")
def tmux() -> None:
    """The test starts tmux servers (its own sockets): the ``tmux`` layer."""
    if not shutil.which("tmux"):
        _missing("tmux not installed: apt-get install -y tmux")


@pytest.fixture(scope="session")
def postgres() -> None:
    """The test starts a PostgreSQL server (tests/support/pg.py): the ``postgres`` layer."""
    if pg.find_bin("initdb") is None:
        _missing("PostgreSQL not installed: apt-get install -y postgresql")


@pytest.fixture(scope="session")
def browser() -> None:
    """The test drives headless Chromium (tests/support/browser.py): the ``browser`` layer."""
    from support.browser import require_browser

    require_browser()


@pytest.fixture(scope="session")
def netns() -> None:
    """The test puts a host in a network namespace of its own (tests/support/netns.py,
    as root): the ``netns`` layer. CI runs as root, so there they must run."""
    from support import netns as ns

    why = ns.unavailable()
    if why is not None and os.environ.get("CI") and os.geteuid() == 0:
        pytest.fail(f"CI runs as root, yet {why}")
    if why is not None:
        pytest.skip(why)


@pytest.fixture(scope="session")
def container() -> None:
    """The test runs an OCI container (rootful Podman): the ``container`` layer."""
    if not shutil.which("podman"):
        _missing("podman not installed: apt-get install -y podman")


@pytest.fixture(scope="session")
def e2e() -> None:
    """The test drives a real agent CLI (tests/e2e/): the ``e2e`` layer. Each agent's
    own absence is told by ``require_agent``."""


@pytest.fixture(scope="session")
def build() -> None:
    """The test builds agentwrap (a wheel with pip and the C compiler, or another
    commit's tree): tens of seconds of CPU each, so not in the fast layer."""


@pytest.fixture(autouse=True)
def _tmux_only_in_its_layer(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                            monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """In the fast layer, ``tmux`` on PATH is a stub that records its call (also
    from the test's subprocesses: the environments it builds copy this PATH),
    and the test fails: one that starts tmux must say so. (A test of another
    slow layer may run tmux unmarked: it is not in the fast layer either.)"""
    if any(request.node.get_closest_marker(layer) for layer in LAYERS):
        yield
        return
    called = tmp_path_factory.mktemp("tmux-called", numbered=True) / "called"
    monkeypatch.setenv("PATH", f"{NO_TMUX}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv(TMUX_CALLED, str(called))
    yield
    if called.exists():
        calls = called.read_text().splitlines()
        pytest.fail(f"{request.node.nodeid} is not in the tmux layer, yet it ran tmux"
                    f" {len(calls)} times ({calls[0][:100]} ...): give it the `tmux` fixture (an"
                    " `aw` environment, or @pytest.mark.usefixtures(\"tmux\"))", pytrace=False)


@pytest.fixture
def aw(tmux: None) -> Iterator[AwEnv]:
    """An environment of its own whose test may start sessions on tmux."""
    with make_aw() as env:
        yield env


@pytest.fixture
def aw_no_tmux() -> Iterator[AwEnv]:
    """An environment of its own for a test that starts no tmux server (it runs
    in the fast layer: a session it starts must use the pty backend)."""
    with make_aw() as env:
        yield env


@pytest.fixture
def svc(request: pytest.FixtureRequest) -> Iterator[Service]:
    """A service over the test's store with one registered session, "fake" (no
    process): the test's ``aw`` if it has one, else an environment without tmux."""
    aw: AwEnv = request.getfixturevalue("aw" if "aw" in request.fixturenames else "aw_no_tmux")
    s = Service.open(aw.paths)
    s.registry.register(SessionRecord(name="fake", profile="standin", backend="tmux",
                                      command=["x"], cwd=str(aw.project), started=time.time()))
    yield s
    s.close()


@pytest.fixture(scope="session")
def pg_server(postgres: None) -> Iterator[pg.PgServer]:
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
def pg_url(pg_server: pg.PgServer, request: pytest.FixtureRequest) -> Iterator[str]:
    """A URL whose connections see a fresh, empty schema of their own. A test that
    reaches it by name at run time (``getfixturevalue``) has no layer marker from
    collection and would run a database server in the fast layer: it must carry
    ``postgres`` itself (``pytest.param(..., marks=pytest.mark.postgres)``)."""
    if request.node.get_closest_marker("postgres") is None:
        pytest.fail(f"{request.node.nodeid} reaches PostgreSQL without the `postgres` marker:"
                    " mark it (pytest.param(..., marks=pytest.mark.postgres))", pytrace=False)
    name, url = pg_server.new_schema()
    try:
        yield url
    finally:
        pg_server.drop_schema(name)


@pytest.fixture(params=[pytest.param(b, marks=[pytest.mark.postgres] if b == "postgres" else [])
                        for b in stores.BACKENDS])
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
