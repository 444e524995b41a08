"""Simulated hosts of one shared store (issue 23): an environment of
:func:`conftest.make_aw` made a host by its name, the store's URL and a quick
heartbeat, and what the tests read of them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from conftest import AwEnv, make_aw

from agentwrap.queue.backend import ENV as STORE_ENV
from agentwrap.sessions import hosts
from agentwrap.sessions.hosts import ENV as HOST_ENV
from agentwrap.sessions.registry import Registry


def as_host(aw: AwEnv, name: str, url: str, heartbeat_s: float | None = 0.3,
            config: str = "") -> AwEnv:
    """``aw`` becomes host ``name`` of the store at ``url``, beating every
    ``heartbeat_s`` (None: the default period), with ``config`` in its config file."""
    aw.env.update({STORE_ENV: url, HOST_ENV: name})
    aw.paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    beat = f"[host]\nheartbeat_s = {heartbeat_s}\n" if heartbeat_s is not None else ""
    aw.paths.config_file.write_text(config + beat)
    return aw


@contextmanager
def two_hosts(url: str, heartbeat_s: float | None = 0.3,
              config: str = "") -> Iterator[tuple[AwEnv, AwEnv]]:
    """Hosts ``alpha`` and ``beta`` of the store at ``url`` (see :func:`as_host`)."""
    with make_aw() as alpha, make_aw() as beta:
        yield (as_host(alpha, "alpha", url, heartbeat_s, config),
               as_host(beta, "beta", url, heartbeat_s, config))


def be_host(aw: AwEnv, monkeypatch: pytest.MonkeyPatch, url: str, name: str) -> None:
    """This test process and ``aw``'s CLI are host ``name`` of the store at ``url``."""
    for env in (aw.env, None):
        if env is None:
            monkeypatch.setenv(STORE_ENV, url)
            monkeypatch.setenv(HOST_ENV, name)
        else:
            env.update({STORE_ENV: url, HOST_ENV: name})


def ls(aw: AwEnv) -> dict[str, dict[str, Any]]:
    """``ls --json`` on this host, by session name."""
    return {d["name"]: d for d in json.loads(aw.cli("ls", "--json", check=True).stdout)}


def history(aw: AwEnv, name: str) -> dict[str, dict[str, Any]]:
    """``history --json NAME`` on this host, by message content."""
    out = json.loads(aw.cli("history", name, "--json", check=True).stdout)
    rows = out["messages"] if isinstance(out, dict) else out
    return {r["content"]: r for r in rows}


def api_seen_from_alpha(aw: AwEnv, monkeypatch: pytest.MonkeyPatch, url: str, path: str) -> Any:
    """``GET path`` of an in-process API on host ``alpha``, with session ``a1``
    there and ``b1`` on host ``beta``, silent since its one beat (2023)."""
    from support.http_kit import in_process
    from support.records import record

    monkeypatch.setenv(STORE_ENV, url)
    monkeypatch.setenv(HOST_ENV, "alpha")
    beta = Registry(aw.paths.db_path, url=url, host="beta", heartbeat_s=1.0)
    alpha = Registry(aw.paths.db_path, url=url, host="alpha")
    try:
        alpha.register(record("a1"))
        beta.register(record("b1"))
        hosts.beat(beta.db, "beta", 1.0, now=1_700_000_000.0)  # silent since then
    finally:
        alpha.close()
        beta.close()
    api = in_process(aw)
    try:
        return api.get(path).json()
    finally:
        api.app.state.pool.close()
