"""Hosts (issue 23): each machine has a name and, in a shared store, a
heartbeat; another host's sessions are judged by it, a host silent past its
deadline is ``unreachable since ...`` and its sessions ``unknown``, without
hiding the others. Several hosts are simulated on one machine: separate
state/runtime dirs and host names on one PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from conftest import AwEnv
from support import hosts_kit
from support.hosts_kit import ls
from support.records import record

from agentwrap.config import load_config
from agentwrap.detect.states import State
from agentwrap.errors import ConfigError, SessionNameTaken
from agentwrap.message import NewMessage, Status
from agentwrap.paths import Paths
from agentwrap.queue.backend import open_database
from agentwrap.queue.postgres import PostgresMessageStore
from agentwrap.sessions import hosts
from agentwrap.sessions.hosts import ENV, host_name
from agentwrap.sessions.registry import Registry
from agentwrap.terminal.proctree import start_time

# --- the name ---------------------------------------------------------------------------


def test_the_host_name_comes_from_the_environment_the_config_or_the_hostname(
    tmp_path: Path,
) -> None:
    assert host_name("devbox", {ENV: "ci-runner-3"}) == "ci-runner-3"
    assert host_name("devbox", {}) == "devbox"
    default = host_name("", {})
    assert default and default == host_name("", {})
    assert default.startswith(socket.gethostname().split(".")[0][:1])
    with pytest.raises(ConfigError, match="invalid host name") as info:
        host_name("", {ENV: "a/b"})
    assert info.value.hint
    with pytest.raises(ConfigError):
        host_name("../x", {})
    paths = Paths.from_env({"HOME": str(tmp_path / "h"), "XDG_CONFIG_HOME": str(tmp_path / "c"),
                            "XDG_STATE_HOME": str(tmp_path / "s"),
                            "XDG_RUNTIME_DIR": str(tmp_path / "r")}).ensure()
    paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    paths.config_file.write_text('[host]\nname = "laptop"\nheartbeat_s = 0.5\n')
    cfg = load_config(paths, tmp_path)
    assert (cfg.host.name, cfg.host.heartbeat_s) == ("laptop", 0.5)
    paths.config_file.write_text("[host]\nheartbeat_s = 0\n")
    with pytest.raises(ConfigError, match="heartbeat_s"):
        load_config(paths, tmp_path)
    assert cfg.host.hub_poll_s == 60.0  # joined to a hub: a settled session's look for a lost wake
    paths.config_file.write_text("[host]\nhub_poll_s = 5\n")
    assert load_config(paths, tmp_path).host.hub_poll_s == 5.0
    for bad in ("0.5", "-1", '"soon"'):  # under a second would poll a hub as hard as no wakes
        paths.config_file.write_text(f"[host]\nhub_poll_s = {bad}\n")
        with pytest.raises(ConfigError, match="hub_poll_s"):
            load_config(paths, tmp_path)
    paths.config_file.write_text("")
    project = tmp_path / "proj"
    project.mkdir()
    (project / ".agentwrap.toml").write_text('[host]\nname = "spoofed"\n')
    with pytest.raises(ConfigError, match=r"\[host\] may only be set in your own config"):
        load_config(paths, project)


# --- two hosts on one store, judged at chosen times ----------------------------------------


def test_another_hosts_sessions_follow_its_heartbeat(
    tmp_path: Path, pg_url: str, sleeper: subprocess.Popen[bytes],
) -> None:
    live = {"supervisor_pid": sleeper.pid, "supervisor_start": start_time(sleeper.pid)}
    alpha = Registry(tmp_path / "a.db", url=pg_url, host="alpha", heartbeat_s=1.0)
    beta = Registry(tmp_path / "b.db", url=pg_url, host="beta", heartbeat_s=1.0)
    try:
        alpha.register(record("a1", **live))
        beta.register(record("b1", **live))
        beta.set_state("b1", State.READY, signal="s", rule="r", reason="prompt", evidence="",
                       quiet_ms=0, draft=False, changed=True)
        seen = {r.name: r for r in alpha.list()}
        assert (seen["a1"].host, seen["a1"].seen, seen["a1"].liveness) == ("alpha", None, "running")
        b1 = seen["b1"]
        assert (b1.host, b1.liveness, b1.host_liveness, b1.state) == (
            "beta", "running", "up", State.READY)
        beta.register(record("b2"))
        beta.mark_ended("b2", 0)  # an end recorded before beta fell silent stays known
        # beta falls silent: its last beat long past 3 periods
        last = time.time() - 100
        hosts.beat(beta.db, "beta", 1.0, now=last)
        b1 = alpha.get("beta/b1")
        assert (b1.liveness, b1.host_liveness, b1.state) == ("unreachable", "unreachable",
                                                              State.UNKNOWN)
        assert b1.to_json()["unreachable_since"] == last
        # nothing of the verdict beta's supervisor stored before it fell silent
        # ("prompt", its rule and signal) is shown as if it held now (issue 35)
        assert (b1.state_signal, b1.state_rule, b1.state_evidence, b1.question) == (
            "host", "host-unreachable", "", None)
        assert b1.state_reason.startswith("host 'beta' is unreachable since "), b1.state_reason
        assert "prompt" not in b1.state_reason and b1.state_since == last
        assert b1.to_json()["host_liveness"] == "unreachable"
        assert {r.name: r.liveness for r in alpha.list()} == {"a1": "running",
                                                               "b1": "unreachable"}
        # beta itself judges its session by its pids, as ever
        assert beta.get("b1").liveness == "running" and beta.get("b1").state is State.READY
        # sessions are keyed (host, name): alpha's own b1 takes nothing of beta's,
        # which stays there for when beta comes back; a second alpha/b1 is refused
        alpha.register(record("b1", **live))
        with pytest.raises(SessionNameTaken, match="'b1' is already running"):
            alpha.register(record("b1"))
        assert alpha.get("beta/b1").state is State.UNKNOWN
        b2 = next(r for r in alpha.list(include_ended=True) if r.name == "b2")
        assert (b2.liveness, b2.state, b2.host_liveness) == ("ended", State.EXITED, "unreachable")
        hosts.beat(beta.db, "beta", 1.0)  # back
        b1 = alpha.get("beta/b1")
        assert (b1.liveness, b1.state, b1.to_json()["unreachable_since"]) == (
            "running", State.READY, None)
        assert (b1.state_reason, b1.state_rule) == ("prompt", "r")
        assert set(alpha.hosts()) == {"alpha", "beta"}
    finally:
        alpha.close()
        beta.close()


def test_sqlite_knows_one_machine_and_writes_no_heartbeat(
    tmp_path: Path, sleeper: subprocess.Popen[bytes],
) -> None:
    reg = Registry(tmp_path / "q.db", host="alpha")
    other = Registry(tmp_path / "q.db", host="beta")  # a renamed host, same file
    try:
        reg.register(record("a1", supervisor_pid=sleeper.pid,
                            supervisor_start=start_time(sleeper.pid)))
        rec = other.get("a1")
        assert rec.host == "alpha" and rec.seen is None and rec.liveness == "running"
        assert reg.hosts() == {} and reg.db.read("SELECT * FROM hosts") == []
        reg.keep_host_alive()  # nothing to do on one machine
        assert reg.db.read("SELECT * FROM hosts") == []
    finally:
        reg.close()
        other.close()


# --- the beat: one sweep of the store per period, stopped with its registry ----------------


def test_the_beats_of_several_processes_sweep_the_store_once_per_period(
    tmp_path: Path, pg_url: str,
) -> None:
    """Every process of every host beats, and each beat looks for messages past
    their TTL; the store is swept by one of them per period (whichever claims
    it), and a look that finds nothing claims nothing."""
    Registry(tmp_path / "q.db", url=pg_url, host="alpha").close()  # the hosts' tables
    store = PostgresMessageStore(pg_url, host="alpha")
    beats = [hosts.HostBeat(open_database(Path(os.devnull), pg_url), name, 3600.0, pg_url)
             for name in ("alpha", "beta", "beta")]  # a process of alpha's, two of beta's

    def sql(statement: str, *params: object) -> list[tuple[object, ...]]:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            cur = conn.execute(statement.encode(), params)
            return cur.fetchall() if cur.description else []

    def overdue(session: str) -> str:
        m, _ = store.enqueue(NewMessage(session=session, content=f"for {session}"))
        sql("UPDATE messages SET expires = 0 WHERE id = %s", m.id)
        return m.id

    try:
        assert [b.sweep() for b in beats] == [False, False, False]  # nothing overdue
        assert sql("SELECT * FROM sweeps") == []  # ... and nothing claimed
        first = overdue("beta/b1")
        assert [b.sweep() for b in beats] == [True, False, False]
        assert store.get(first).status is Status.EXPIRED
        second = overdue("alpha/a1")  # overdue again within the same period: it waits for the next
        assert [b.sweep() for b in beats] == [False, False, False]
        assert store.get(second).status is Status.PENDING
        beats[2].period_s = 0.0  # the next period, as this one sees it
        assert [b.sweep() for b in reversed(beats)] == [True, False, False]
        assert store.get(second).status is Status.EXPIRED
        assert [b.sweeps for b in beats] == [1, 0, 1]
    finally:
        for b in beats:
            b.db.close()
        store.close()


def test_closing_the_registries_that_kept_a_host_alive_stops_its_beat(
    tmp_path: Path, pg_url: str,
) -> None:
    """The beat of a process is shared by whoever keeps its host alive (the
    supervisors of a supervisor host, a ``serve``): it goes on while one of
    them is open and stops, closing its connections, with the last (a test's
    dropped schema saw beats of closed stores fail for the rest of the run)."""
    regs = [Registry(tmp_path / "q.db", url=pg_url, host="gamma", heartbeat_s=0.1)
            for _ in range(2)]
    try:
        for reg in regs:
            reg.keep_host_alive()
        beat = hosts.HostBeat.running(pg_url, "gamma")
        assert beat is not None and beat.users == 2 and beat.beaten.wait(30)
        regs[0].close()
        regs[0].close()  # closing twice releases once
        assert beat.users == 1 and beat.thread.is_alive() and not beat.stopped.is_set()
        regs[1].close()
        beat.thread.join(30)
        assert not beat.thread.is_alive() and hosts.HostBeat.running(pg_url, "gamma") is None
        again = Registry(tmp_path / "q.db", url=pg_url, host="gamma", heartbeat_s=0.1)
        again.keep_host_alive()  # a new user starts a new beat
        fresh = hosts.HostBeat.running(pg_url, "gamma")
        assert fresh is not None and fresh is not beat and fresh.beaten.wait(30)
        again.close()
        fresh.thread.join(30)
        assert not fresh.thread.is_alive()
    finally:
        for reg in regs:
            reg.close()


# --- real supervisors on two simulated hosts ------------------------------------------------


@pytest.fixture
def two_hosts(pg_url: str) -> Iterator[tuple[AwEnv, AwEnv]]:
    with hosts_kit.two_hosts(pg_url) as hosts:
        yield hosts




def test_one_ls_shows_both_hosts_and_a_silent_one_as_unreachable(
    two_hosts: tuple[AwEnv, AwEnv],
) -> None:
    alpha, beta = two_hosts
    alpha.start_standin("a1")
    beta.start_standin("b1")
    both = alpha.wait_for(lambda: (got := ls(alpha)) and got.get("a1", {}).get("state") == "ready"
                          and got.get("b1", {}).get("state") == "ready" and got,
                          timeout=40, what="both sessions ready in alpha's ls")
    assert (both["a1"]["host"], both["b1"]["host"]) == ("alpha", "beta")
    assert both["b1"]["liveness"] == "running" and both["b1"]["host_liveness"] == "up"
    assert ls(beta).keys() == {"a1", "b1"}  # one list, from either host
    # a send from alpha to beta's session (NAME or HOST/NAME) is typed by beta, once each
    alpha.cli("send", "b1", "from alpha", check=True)
    alpha.cli("send", "beta/b1", "to beta/b1", check=True)
    beta.wait_for(lambda: "to beta/b1" in "".join(beta.received()), timeout=30,
                  what="delivered on beta")  # in one batch or two
    typed = "".join(beta.received())
    assert typed.count("from alpha") == 1 and typed.count("to beta/b1") == 1
    assert alpha.received() == []
    wrong = alpha.cli("send", "alpha/b1", "lost?")
    assert wrong.returncode != 0 and "no session 'b1' on host 'alpha'" in wrong.stderr
    assert "runs on host 'beta': beta/b1" in wrong.stderr
    state = json.loads(alpha.cli("state", "beta/b1", "--json", check=True).stdout)
    assert state["name"] == "b1"
    # only the owning host stops (or adopts, attaches to) a session
    res = alpha.cli("stop", "b1")
    assert res.returncode == 3 and "runs on host 'beta'" in res.stderr
    # beta's supervisor dies: nothing beats for beta any more
    sup = beta.registry().get("b1").supervisor_pid
    assert sup
    os.kill(sup, signal.SIGKILL)
    gone = alpha.wait_for(lambda: (got := ls(alpha))["b1"]["liveness"] == "unreachable" and got,
                          timeout=30, what="beta unreachable in alpha's ls")
    assert gone["b1"]["state"] == "unknown" and gone["b1"]["unreachable_since"]
    assert gone["a1"]["liveness"] == "running" and gone["a1"]["state"] == "ready"
    text = alpha.cli("ls", check=True).stdout
    line = next(x for x in text.splitlines() if x.startswith("b1"))
    assert "beta" in line and "unreachable since" in line and "unknown" in line
    # back: beta adopts its session again, and alpha sees it resume
    beta.cli("adopt", "b1", check=True)
    back = alpha.wait_for(lambda: (got := ls(alpha))["b1"]["liveness"] == "running" and got,
                          timeout=30, what="beta back in alpha's ls")
    assert back["b1"]["host_liveness"] == "up" and back["b1"]["unreachable_since"] is None
    for aw, name in ((alpha, "a1"), (beta, "b1")):
        aw.cli("stop", name, check=True)


def test_the_api_lists_every_hosts_sessions_with_their_host(
    aw: AwEnv, pg_url: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    got = {s["name"]: s for s in hosts_kit.api_seen_from_alpha(
        aw, monkeypatch, pg_url, "/api/sessions")["sessions"]}
    assert (got["a1"]["host"], got["a1"]["hostLiveness"], got["a1"]["unreachableSince"]) == (
        "alpha", "up", None)
    assert (got["b1"]["host"], got["b1"]["hostLiveness"], got["b1"]["liveness"],
            got["b1"]["state"], got["b1"]["unreachableSince"]) == (
        "beta", "unreachable", "unreachable", "unknown", 1_700_000_000.0)
