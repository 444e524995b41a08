"""A PostgreSQL store that is down, or out of connections, is a temporary
failure (issue 35): ``send`` exits 75 (EX_TEMPFAIL) saying so and what to do,
not 77 ("not trusted"), and a refusal of who we are (a role that does not
exist) stays 77. A supervisor that cannot start because of it says the real
cause (PostgreSQL's "too many connections") and leaves no agent running
unsupervised, on either backend. Real parts: the suite's PostgreSQL, reached
through a proxy the test takes down (tests/support/pg_faults.py) or as a role
whose connection limit the test sets; the real CLI; real tmux and ptys."""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass

import pytest
from conftest import AwEnv, make_aw
from support import pg
from support.pg_faults import Proxy
from support.records import record

from agentwrap.queue.backend import ENV as STORE_ENV
from agentwrap.sessions.hosts import ENV as HOST_ENV
from agentwrap.sessions.lifecycle import launch_marker
from agentwrap.sessions.registry import Registry
from agentwrap.terminal.proctree import alive, descendants, kill_pids, marked, start_time
from agentwrap.terminal.tmux import server_for


def clean(res: subprocess.CompletedProcess[str], code: int) -> str:
    """The error line of a CLI call that failed with ``code``, no traceback."""
    assert res.returncode == code, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout, res.stderr
    return res.stderr


@dataclass
class Role:
    """A login role of the suite's server with a schema of its own."""

    server: pg.PgServer
    name: str

    @property
    def url(self) -> str:
        return (f"postgresql://{self.name}@127.0.0.1:{self.server.port}/postgres"
                f"?options=-csearch_path%3D{self.name}&connect_timeout=5")

    def limit(self, n: int) -> None:
        """At most ``n`` connections of this role at once (-1: no limit)."""
        self.server.psql(f"ALTER ROLE {self.name} CONNECTION LIMIT {n}")


@pytest.fixture
def role(pg_server: pg.PgServer) -> Iterator[Role]:
    name = "r_" + secrets.token_hex(5)
    pg_server.psql(f"CREATE ROLE {name} LOGIN")
    pg_server.psql(f"CREATE SCHEMA {name} AUTHORIZATION {name}")
    yield Role(pg_server, name)
    pg_server.psql(f"ALTER ROLE {name} CONNECTION LIMIT -1")
    pg_server.psql(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                   f" WHERE usename = '{name}'")
    pg_server.drop_schema(name)
    pg_server.psql(f"DROP ROLE IF EXISTS {name}")


def as_role(aw: AwEnv, role: Role) -> AwEnv:
    """``aw`` is host alpha of the store ``role`` owns, its tables made."""
    aw.env.update({STORE_ENV: role.url, HOST_ENV: "alpha"})
    aw.cli("ls", check=True)
    return aw


def test_send_with_the_store_down_exits_75_and_says_to_retry(
    pg_server: pg.PgServer, sleeper: subprocess.Popen[bytes],
) -> None:
    schema, direct = pg_server.new_schema()
    with ExitStack() as stack:
        stack.callback(pg_server.drop_schema, schema)
        proxy = Proxy(("127.0.0.1", pg_server.port))
        stack.callback(proxy.close)
        aw = stack.enter_context(make_aw())
        aw.env.update({STORE_ENV: proxy.url(pg_server.user, schema), HOST_ENV: "alpha"})
        reg = Registry(aw.paths.db_path, url=direct, host="alpha")
        stack.callback(reg.close)
        reg.register(record("s1", supervisor_pid=sleeper.pid,
                            supervisor_start=start_time(sleeper.pid)))
        proxy.down()
        res = aw.cli("send", "s1", "while it is down")
        line = clean(res, 75)
        assert "down for now" in line and "retry" in line, line
        refused = json.loads(aw.cli("send", "s1", "again", "--json").stdout)
        assert (refused["error"], refused["exitCode"]) == ("StoreDown", 75), refused
        proxy.up()
        aw.cli("send", "s1", "once it is back", check=True)
        queued = json.loads(aw.cli("queue", "s1", "--json", check=True).stdout)
        assert [q["content"] for q in queued] == ["once it is back"]  # nothing half-written


def test_out_of_connections_is_temporary_and_a_refused_role_is_not(
    aw: AwEnv, role: Role, sleeper: subprocess.Popen[bytes],
) -> None:
    as_role(aw, role)
    reg = Registry(aw.paths.db_path, url=role.url, host="alpha")
    try:
        reg.register(record("s1", supervisor_pid=sleeper.pid,
                            supervisor_start=start_time(sleeper.pid)))
    finally:
        reg.close()
    role.limit(0)
    line = clean(aw.cli("send", "s1", "no room"), 75)
    assert "too many connections" in line and "retry" in line, line
    role.limit(-1)
    aw.env[STORE_ENV] = role.url.replace(role.name + "@", "nobody_" + role.name + "@")
    line = clean(aw.cli("send", "s1", "who?"), 77)
    assert "does not exist" in line, line


def _agent_gone(aw: AwEnv, name: str) -> bool:
    """Nothing of the launch of ``name`` runs: its tmux server is gone and no
    process carries its launch marker (the agent and what it started)."""
    alive = server_for(aw.paths.tmux_socket_for(name)).is_alive()
    return not alive and not marked(launch_marker(aw.paths, name))


@pytest.mark.parametrize("mode", ["host", "process"])
def test_a_supervisor_out_of_connections_stops_its_agent_and_says_why(
    aw: AwEnv, role: Role, mode: str,
) -> None:
    """``run --detach`` holds one connection; the supervisor (the supervisor
    host, or a process of its own) cannot get another: the CLI says
    PostgreSQL's own words, stops the agent and records its end."""
    as_role(aw, role)
    aw.paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    aw.paths.config_file.write_text(f'[run]\nsupervisor = "{mode}"\n')
    role.limit(1)
    res = aw.cli("run", "--detach", "--name", "sa", "--profile", "standin", "--",
                 *aw.standin())
    line = clean(res, 3)
    assert "did not" in line and "too many connections" in line, line
    assert "agent was stopped" in line, line
    assert _agent_gone(aw, "sa")
    role.limit(-1)
    listed = {d["name"]: d for d in json.loads(aw.cli("ls", "--all", "--json",
                                                      check=True).stdout)}
    assert listed["sa"]["liveness"] == "ended", listed


def test_a_pty_session_whose_supervisor_cannot_start_leaves_no_agent(
    aw: AwEnv, role: Role,
) -> None:
    """The pty backend supervises in the ``run`` process: its store, opened
    after the agent was spawned, fails, and the agent goes with it (this one
    ignores the SIGHUP a closed terminal sends: only being stopped ends it)."""
    as_role(aw, role)
    role.limit(1)
    pid_file = aw.root / "agent.pid"
    agent = f'trap "" HUP; echo $$ > {pid_file}; while :; do sleep 1; done'
    res = aw.cli("run", "--backend", "pty", "--name", "pa", "--profile", "standin", "--",
                 "sh", "-c", agent)
    line = clean(res, 75)
    assert "too many connections" in line, line
    pid = int(pid_file.read_text())  # it was started, before the supervisor failed
    try:
        assert not alive(pid) and not marked(launch_marker(aw.paths, "pa"))
    finally:
        kill_pids([pid, *descendants(pid)], signal.SIGKILL, grace=0)
    role.limit(-1)
    listed = {d["name"]: d for d in json.loads(aw.cli("ls", "--all", "--json",
                                                      check=True).stdout)}
    assert listed["pa"]["liveness"] == "ended", listed
