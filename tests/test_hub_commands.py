"""A joined host's own commands through its link (issue 38), with real processes:
a hub (``agentwrap hub``, TLS from a test CA, SQLite), hosts with their own
state and runtime dirs joined with one-time codes, supervising tmux
stand-in sessions, and ``agentwrap ls`` / ``send`` run on a host as a
person runs them. The hub's queue is the only queue: a host keeps none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import AwEnv
from support.hub_kit import (  # the fixtures by their names: hub, alpha, beta, _stop_hosts
    HOSTS,
    Hub,
    alpha_fixture,  # noqa: F401
    beta_fixture,  # noqa: F401
    host_client,
    hub_fixture,  # noqa: F401
    start_session,
    status_on_hub,
    stop_hosts,  # noqa: F401
)
from support.waiting import wait_for

from agentwrap.errors import ForeignSession
from agentwrap.message import Status
from agentwrap.queue.link import HubStore
from agentwrap.queue.sqlite import SQLiteMessageStore

pytestmark = pytest.mark.usefixtures("tmux")


def listed(aw: AwEnv) -> list[dict[str, object]]:
    """``agentwrap ls --all --json`` on host ``aw`` (every host's sessions)."""
    got = aw.cli("ls", "--all", "--json", check=True)
    rows: list[dict[str, object]] = json.loads(got.stdout)
    return rows


def lists(aw: AwEnv, host: str, name: str) -> dict[str, object] | None:
    return next((r for r in listed(aw) if r["host"] == host and r["name"] == name), None)


def nothing_queued_here(aw: AwEnv) -> bool:
    """The host's own SQLite queue holds no message (a joined host keeps none)."""
    if not aw.paths.db_path.exists():
        return True
    store = SQLiteMessageStore(aw.paths.db_path)
    try:
        return store.history(None, limit=10) == []
    finally:
        store.close()


def beat_fast(aw: AwEnv, period_s: float = 0.5) -> None:
    """The host reports its sessions every ``period_s`` (``[host] heartbeat_s``)."""
    aw.paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    aw.paths.config_file.write_text(f"[host]\nheartbeat_s = {period_s}\n")


def betas_session_listed_on_alpha(hub: Hub, alpha: AwEnv, beta: AwEnv) -> None:
    """Both hosts joined, beta supervising ``api`` (reporting every 0.5 s),
    until ``ls`` on alpha lists it."""
    hub.join(alpha, "alpha")
    hub.join(beta, "beta")
    beat_fast(beta)
    start_session(beta, "api")
    wait_for(lambda: lists(alpha, "beta", "api"), 60, "beta's session listed on alpha",
             on_timeout=hub.log)


def test_ls_on_alpha_lists_betas_session_and_send_beta_name_is_typed_once_on_beta(
        hub: Hub, alpha: AwEnv, beta: AwEnv) -> None:
    betas_session_listed_on_alpha(hub, alpha, beta)
    row = lists(alpha, "beta", "api")
    assert row is not None and row["liveness"] == "running" and row["profile"] == "standin"
    table = alpha.cli("ls", check=True).stdout
    assert "HOST" in table and "beta" in table and "api" in table
    state = json.loads(alpha.cli("state", "beta/api", "--json", check=True).stdout)
    assert state["state"] == row["state"] and state["host"] == "beta"

    sent = alpha.cli("send", "beta/api", "from alpha, typed once", "--json", check=True)
    message_id = json.loads(sent.stdout)["id"]
    wait_for(lambda: "from alpha, typed once" in " ".join(beta.received()), 60,
             "beta's delivery", on_timeout=hub.log)
    wait_for(lambda: status_on_hub(hub, message_id).terminal, 60, "recorded on the hub")
    assert status_on_hub(hub, message_id) in (Status.DELIVERED, Status.ACKNOWLEDGED)
    assert [r for r in beta.received() if "from alpha" in r].__len__() == 1
    assert nothing_queued_here(alpha), "a joined host queued the message locally"
    history = alpha.cli("history", "beta/api", "--json")  # the hub's policy: beta's own
    assert history.returncode == 77 and "may not act" in history.stderr


def test_a_host_silent_past_its_deadline_is_listed_unreachable_since(
        hub: Hub, alpha: AwEnv, beta: AwEnv) -> None:
    betas_session_listed_on_alpha(hub, alpha, beta)
    for proc in HOSTS:  # beta's supervisor host, kill -9: its reports stop
        proc.kill()
        proc.wait(30)
    row = wait_for(lambda: (r := lists(alpha, "beta", "api")) and r["liveness"] == "unreachable"
                   and r, 60, "beta judged unreachable on alpha")
    assert isinstance(row["unreachable_since"], float)
    assert "unreachable since" in alpha.cli("ls", check=True).stdout


def test_with_the_hub_down_ls_and_send_on_a_host_exit_75_and_nothing_is_queued_locally(
        hub: Hub, alpha: AwEnv) -> None:
    hub.join(alpha, "alpha")
    assert alpha.cli("ls", check=True).returncode == 0
    hub.kill()
    ls = alpha.cli("ls")
    assert ls.returncode == 75, ls.stderr
    assert "unreachable" in ls.stderr and "healthz" in ls.stderr  # says so, with the hint
    send = alpha.cli("send", "beta/api", "must wait for the hub")
    assert send.returncode == 75 and "unreachable" in send.stderr
    assert nothing_queued_here(alpha)
    credential = json.loads((alpha.paths.state_dir / "hub-link.json").read_text())["credential"]
    assert credential not in ls.stderr + send.stderr


def test_a_host_registering_another_hosts_session_is_refused(
        hub: Hub, alpha: AwEnv, beta: AwEnv, tmp_path: Path) -> None:
    hub.join(alpha, "alpha")
    hub.join(beta, "beta")
    store = HubStore(host_client(alpha))
    try:
        record = {"name": "api", "profile": "standin", "backend": "tmux", "command": [],
                  "cwd": "/", "started": 1.0, "state": "ready"}
        with pytest.raises(ForeignSession):
            store.register([{**record, "host": "beta"}], 1.0)
        with pytest.raises(ForeignSession):
            store.register([{**record, "name": "beta/api"}], 1.0)
        assert store.sessions()["hosts"] == []  # the refused report kept nothing
        assert store.register([record], 1.0) == 1  # its own is kept, as alpha's
        hosts = store.sessions()["hosts"]
        assert [(h["host"], [s["name"] for s in h["sessions"]]) for h in hosts] == [
            ("alpha", ["api"])]
    finally:
        store.close()
