"""`agentwrap serve` and `agentwrap token` as a new user meets them (issue 26).

Real processes on free loopback ports: a port in use and a ``--uds`` that
names a file are two clear lines, never a traceback; ``token --link`` points
at the port the running server listens on; ``token --new`` takes effect in
the running server at once.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
from conftest import AwEnv
from support.http_kit import Served, serve
from support.waiting import wait_for


@pytest.fixture
def server(aw: AwEnv) -> Iterator[Served]:
    yield from serve(aw)


def run_serve(aw: AwEnv, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentwrap", "serve", *args], env=aw.env,
                          cwd=aw.project, capture_output=True, text=True, timeout=60)


def test_a_port_in_use_is_two_lines_and_no_traceback(aw: AwEnv) -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    try:
        port = holder.getsockname()[1]
        res = run_serve(aw, "--port", str(port))
    finally:
        holder.close()
    assert res.returncode == 75, res
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert lines[0] == f"error: 127.0.0.1:{port} is in use by another program", lines
    assert lines[1].startswith("hint: pick another with --port N"), lines
    assert not (aw.paths.runtime_dir / "serve.url").exists()


def test_uds_naming_a_file_is_refused_and_the_file_kept(aw: AwEnv) -> None:
    victim = aw.root / "notes.txt"
    victim.write_text("mine\n")
    res = run_serve(aw, "--uds", str(victim))
    assert res.returncode == 75, res
    assert "Traceback" not in res.stderr
    assert res.stderr.startswith(f"error: --uds {victim} exists and is not a socket"), res.stderr
    assert victim.read_text() == "mine\n"


def test_token_link_points_at_the_running_server(aw: AwEnv, server: Served) -> None:
    assert not server.url.endswith(":7878")  # port 0: a free one
    link = aw.cli("token", "--link", check=True).stdout.strip()
    assert link.startswith(f"{server.url}/#login="), link
    code = link.split("#login=", 1)[1]
    got = httpx.post(f"{server.url}/api/login", json={"code": code}, timeout=30)
    assert got.status_code == 200, got.text
    explicit = aw.cli("token", "--link", "--url", "http://example.test:9", check=True).stdout
    assert explicit.startswith("http://example.test:9/#login=")


def test_token_link_without_a_server_uses_the_default(aw: AwEnv) -> None:
    link = aw.cli("token", "--link", check=True).stdout.strip()
    assert link.startswith("http://127.0.0.1:7878/#login="), link


def test_token_new_takes_effect_in_the_running_server_at_once(aw: AwEnv, server: Served) -> None:
    old = server.token
    with server.client() as c:
        assert c.get("/api/sessions").status_code == 200
    res = aw.cli("token", "--new", check=True)
    new = res.stdout.strip()
    assert new != old and "takes it within a second" in " ".join(res.stderr.split())
    ask = lambda token: httpx.get(  # noqa: E731
        f"{server.url}/api/sessions", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    wait_for(lambda: ask(old).status_code == 401, 10, "the old token refused")
    assert ask(new).status_code == 200


def test_the_url_file_goes_with_the_server(aw: AwEnv) -> None:
    gen = serve(aw)
    served = next(gen)
    url_file = aw.paths.runtime_dir / "serve.url"
    assert url_file.read_text().splitlines()[0] == served.url  # then its owner: pid, start
    assert url_file.stat().st_mode & 0o777 == 0o600
    gen.close()  # SIGTERM, then waits for the exit
    wait_for(lambda: not url_file.exists(), 30, "serve.url removed")
