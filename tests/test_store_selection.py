"""Choosing the store (issue 23): this machine's SQLite file unless the user's
``[store] url`` or AGENTWRAP_STORE_URL names a PostgreSQL server (the queue,
the sessions and the answers alike); a project's file cannot redirect it, and
the password is never shown (doctor included)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import AwEnv
from support.pg import PgServer

from agentwrap.answers.actions import DenyAnswer
from agentwrap.answers.store import AnswerStore
from agentwrap.config import load_config
from agentwrap.errors import ConfigError
from agentwrap.message import NewMessage
from agentwrap.paths import Paths
from agentwrap.queue.backend import ENV, describe, open_store, store_url
from agentwrap.queue.postgres import PgDatabase, PostgresMessageStore
from agentwrap.queue.sqlite import SQLiteDatabase, SQLiteMessageStore
from agentwrap.service import Service
from agentwrap.sessions.registry import Registry, SessionRecord, open_registry

SECRET = "s3cr3t-pw"


def _paths(tmp_path: Path) -> Paths:
    return Paths.from_env({"HOME": str(tmp_path / "h"), "XDG_CONFIG_HOME": str(tmp_path / "c"),
                           "XDG_STATE_HOME": str(tmp_path / "s"),
                           "XDG_RUNTIME_DIR": str(tmp_path / "r")}).ensure()


def test_the_url_is_the_users_to_set_and_the_environment_wins(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    assert load_config(paths, tmp_path).store.url == ""
    paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    paths.config_file.write_text('[store]\nurl = "postgresql://aw@db/agentwrap"\n')
    cfg = load_config(paths, tmp_path)
    assert cfg.store.url == "postgresql://aw@db/agentwrap"
    assert store_url(cfg.store.url, {}) == "postgresql://aw@db/agentwrap"
    assert store_url(cfg.store.url, {ENV: "postgresql://ci@other/q"}) == "postgresql://ci@other/q"
    assert store_url("", {}) == ""
    project = tmp_path / "proj"
    project.mkdir()
    (project / ".agentwrap.toml").write_text('[store]\nurl = "postgresql://evil@x/y"\n')
    with pytest.raises(ConfigError, match=r"\[store\] may only be set in your own config"):
        load_config(paths, project)
    paths.config_file.write_text('[profiles.claude.store]\nurl = "postgresql://a@b/c"\n')
    with pytest.raises(ConfigError, match=r"\[store\] is set at the top level"):
        load_config(paths, tmp_path)


def test_a_url_that_is_not_postgresql_is_refused_without_repeating_it() -> None:
    with pytest.raises(ConfigError) as info:
        store_url("", {ENV: f"mysql://u:{SECRET}@h/d"})
    assert SECRET not in f"{info.value.message} {info.value.hint}"


def test_sqlite_stays_the_default_and_a_url_opens_postgresql(
    tmp_path: Path, pg_url: str,
) -> None:
    sqlite = open_store(tmp_path / "q.db")
    assert type(sqlite) is SQLiteMessageStore
    sqlite.close()
    pg = open_store(tmp_path / "unused.db", url=pg_url)
    assert isinstance(pg, PostgresMessageStore)
    pg.close()
    assert not (tmp_path / "unused.db").exists()
    assert describe(tmp_path / "q.db") == f"sqlite {tmp_path / 'q.db'}"


def test_the_service_uses_the_url_from_the_environment(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    paths = _paths(tmp_path)
    monkeypatch.setenv(ENV, pg_url)
    with Service.open(paths) as svc:
        assert isinstance(svc.store, PostgresMessageStore)
        assert svc.store_where.startswith("postgresql ")
        m, _ = svc.store.enqueue(NewMessage(session="s1", content="to the shared store"))
    check = PostgresMessageStore(pg_url)
    assert check.get(m.id).content == "to the shared store"
    check.close()


UNREADABLE = [f"postgresql://u:{SECRET}@[::1/db",  # no closing ]
              f"postgresql://u:{SECRET}@h/db?foo=bar",  # a parameter libpq does not know
              f"postgresql://u:{SECRET}%00@h/db",  # a NUL in the password
              f"postgresql://u@h/db?password={SECRET}&sslmode=%zz"]  # a bad %-escape


@pytest.mark.parametrize("url", UNREADABLE)
def test_a_url_libpq_cannot_read_is_a_clear_error_that_quotes_none_of_it(
        aw: AwEnv, url: str) -> None:
    """Every command (doctor included) used to print psycopg's traceback, which
    quoted the URL with its password: a config error (exit 78) says why, with
    libpq's reason and nothing of the URL."""
    with pytest.raises(ConfigError) as info:
        PgDatabase(url)
    assert SECRET not in f"{info.value.message} {info.value.hint}"
    assert "cannot be read" in info.value.message
    for args in (("ls",), ("send", "sa", "hi"), ("doctor",)):
        res = aw.cli(*args, env={ENV: url})
        assert SECRET not in res.stdout + res.stderr and "Traceback" not in res.stderr, args
        assert res.returncode == (1 if args == ("doctor",) else 78), (args, res.stderr)
    rep = json.loads(aw.cli("doctor", "--json", env={ENV: url}).stdout)
    assert [p["problem"] for p in rep["problems"] if "cannot be read" in p["problem"]]


def test_doctor_shows_the_store_never_its_password(aw: AwEnv, pg_server: PgServer) -> None:
    name, _ = pg_server.new_schema()
    # trust authentication: the server ignores the password, agentwrap must not show it
    url = (f"postgresql://{pg_server.user}:{SECRET}@127.0.0.1:{pg_server.port}/postgres"
           f"?sslmode=disable&options=-csearch_path%3D{name}")
    try:
        res = aw.cli("doctor", "--json", env={ENV: url})
        assert SECRET not in res.stdout + res.stderr
        rep = json.loads(res.stdout)
        assert rep["store"] == (f"postgresql host=127.0.0.1 port={pg_server.port}"
                                f" dbname=postgres user={pg_server.user} sslmode=disable")
        text = aw.cli("doctor", env={ENV: url})
        assert SECRET not in text.stdout + text.stderr and "store" in text.stdout
        down = url.replace(f":{pg_server.port}/", ":1/")
        res = aw.cli("doctor", "--json", env={ENV: down})
        assert res.returncode == 1 and SECRET not in res.stdout + res.stderr
        assert any("cannot use the store" in p["problem"]
                   for p in json.loads(res.stdout)["problems"])
    finally:
        pg_server.drop_schema(name)


def test_the_registry_and_answers_follow_the_store_url(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The composition root opens the sessions and the answers where the
    queue is: with the URL set, nothing goes into this machine's file."""
    paths = _paths(tmp_path)
    monkeypatch.setenv(ENV, pg_url)
    with Service.open(paths) as svc:
        svc.registry.register(SessionRecord(name="shared", profile="standin", backend="tmux",
                                            command=["x"], cwd="/", started=time.time()))
        svc.answers.request("shared", "q1", DenyAnswer(), source="cli")
    assert isinstance(open_registry(paths).db, PgDatabase)
    other = Registry(tmp_path / "unused.db", url=pg_url)  # another host: the same rows
    answers = AnswerStore(tmp_path / "unused.db", url=pg_url)
    try:
        assert other.get("shared").profile == "standin"
        assert [a.session for a in answers.pending("shared")] == [answers.keys.key("shared")]
    finally:
        other.close()
        answers.close()
    assert not (tmp_path / "unused.db").exists()
    local = Registry(paths.db_path)
    try:
        assert local.list(include_ended=True) == []
    finally:
        local.close()
    monkeypatch.delenv(ENV)
    assert isinstance(open_registry(paths).db, SQLiteDatabase)


def test_a_session_run_with_the_url_is_listed_from_the_shared_store(
    aw: AwEnv, pg_url: str,
) -> None:
    aw.env[ENV] = pg_url
    aw.start_standin("sa")
    aw.wait_for(lambda: any(d["name"] == "sa" and d["state"] == "ready" for d in json.loads(
        aw.cli("ls", "--json", check=True).stdout)), timeout=30, what="sa ready in ls")
    shared = Registry(aw.paths.db_path, url=pg_url)
    try:
        assert shared.get("sa").liveness == "running"
    finally:
        shared.close()
    aw.cli("send", "sa", "through the shared store", check=True)
    aw.wait_for(lambda: len(aw.received()) == 1, timeout=30, what="delivered")
    assert "through the shared store" in aw.received()[0]
    aw.cli("stop", "sa", check=True)
    del aw.env[ENV]
    assert json.loads(aw.cli("ls", "--json", check=True).stdout) == []
