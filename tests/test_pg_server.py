"""The test suite's own PostgreSQL (tests/support/pg.py): it starts, and a
schema of a test is its own."""

from __future__ import annotations

import os

import psycopg
from support.pg import PgServer


def test_the_suite_runs_a_real_postgresql_not_as_root(pg_server: PgServer) -> None:
    with psycopg.connect(pg_server.url()) as conn:
        assert conn.info.server_version >= 120000
        owner = conn.execute("SELECT current_setting('data_directory')").fetchone()
    assert owner is not None
    st = os.stat(pg_server.data)
    assert st.st_uid != 0 or os.getuid() != 0  # as root, the postgres user owns it


def test_each_test_gets_its_own_schema(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE mine (x int)")
        row = conn.execute("SELECT current_schema()").fetchone()
    assert row is not None and row[0].startswith("t_")
