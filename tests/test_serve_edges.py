"""What a new user of ``agentwrap serve`` trips on (issue 35, item 5), each
against a real ``serve`` process: a port out of range is a usage error, not
a traceback; the person's own bad config.toml answers 503 with what is wrong
and stores nothing; a second ``serve`` neither takes nor removes the first
one's URL file; a request without the token is answered 401 from its head,
before its body; a body trickled in a byte at a time is answered 408 once
its time is up (raw sockets, as a slow client is)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
from conftest import AwEnv
from support.http_kit import Served, register, serve
from support.waiting import wait_for

from agentwrap.surfaces.http.middleware import BODY_TIMEOUT_S


@pytest.fixture
def server(aw: AwEnv) -> Iterator[Served]:
    register(aw, "s1")
    yield from serve(aw)


def _host_port(served: Served) -> tuple[str, int]:
    host, _, port = served.url.removeprefix("http://").rpartition(":")
    return host, int(port)


def _answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes (the deadline is for a hung test)."""
    sock.settimeout(120)
    got = b""
    while chunk := sock.recv(65536):
        got += chunk
    return got


@pytest.mark.parametrize("port", ["99999", "-1", "65536", "http"])
def test_a_port_out_of_range_is_a_usage_error_not_a_traceback(aw: AwEnv, port: str) -> None:
    res = subprocess.run([sys.executable, "-m", "agentwrap", "serve", f"--port={port}"],
                         env=aw.env, cwd=aw.project, capture_output=True, text=True, timeout=60)
    assert res.returncode == 2, res
    assert "Traceback" not in res.stderr, res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert "--port" in last and ("0-65535" in last or "not a port number" in last), last
    assert not (aw.paths.runtime_dir / "serve.url").exists()


def test_a_bad_config_answers_503_saying_what_is_wrong_and_stores_nothing(
    aw: AwEnv, server: Served,
) -> None:
    body = {"content": "x", "source": "webhook", "sourceId": "ci"}
    with server.client() as c:
        for bad, named in (("[limits]\nrate_per_minute = -5\n", "limits.rate_per_minute"),
                           ("[trust\n", "not valid TOML"), ("[sources]\nx = 5\n", "'x'")):
            aw.paths.config_file.write_text(bad)
            for path in ("/api/sessions/s1/input", "/api/sessions/s1/input?wait=0"):
                r = c.post(path, json=body)
                assert r.status_code == 503, (bad, path, r.status_code, r.text)
                got = r.json()
                assert got["error"] == "Configuration error", got
                assert "config.toml" in got["detail"] and named in got["detail"], got
                assert got["hint"], got
        aw.paths.config_file.write_text("")
        assert c.get("/api/sessions/s1/input").json()["total"] == 0
    assert "Traceback" not in (aw.root / "serve.log").read_text()


def test_a_second_serve_neither_takes_nor_removes_the_first_ones_url_file(aw: AwEnv) -> None:
    url_file = aw.paths.runtime_dir / "serve.url"
    first_gen = serve(aw)
    first = next(first_gen)
    try:
        second_gen = serve(aw)
        second = next(second_gen)
        assert second.url != first.url
        assert url_file.read_text().splitlines()[0] == first.url
        link = aw.cli("token", "--link", check=True).stdout
        assert link.startswith(first.url + "/#login="), link
        second_gen.close()  # SIGTERM, then waits for the exit
        assert second.proc.returncode is not None
        assert url_file.read_text().splitlines()[0] == first.url  # still the first one's
        assert "another `agentwrap serve` runs at" in (aw.root / "serve.log").read_text()
    finally:
        first_gen.close()
    wait_for(lambda: not url_file.exists(), 30, "serve.url removed with its own serve")


@pytest.mark.parametrize("auth", ["", "Authorization: Bearer wrong\r\n", "Authorization: x\r\n"])
def test_a_request_without_the_token_is_refused_before_its_body(server: Served, auth: str) -> None:
    """Headers only, a body of 10000 bytes announced and none sent: the 401
    comes without it (before, the server waited for the body first)."""
    with socket.create_connection(_host_port(server)) as sock:
        sock.sendall(f"POST /api/sessions/s1/input HTTP/1.1\r\nHost: x\r\n{auth}"
                     "Content-Type: application/json\r\nContent-Length: 10000\r\n\r\n".encode())
        got = _answer(sock)
    head, _, rest = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 401"), got
    assert b"www-authenticate: Bearer" in head.lower().replace(b"bearer", b"Bearer"), head
    assert json.loads(rest)["error"] == "Unauthorized"


def test_a_body_trickled_a_byte_a_second_is_timed_out(aw: AwEnv, server: Served) -> None:
    """The token is right, the head is in, the body comes a byte a second:
    once the body's time is up the server answers 408 and closes; nothing is
    stored. A body sent at once is taken as always."""
    body = json.dumps({"content": "slow", "source": "webhook", "sourceId": "ci"}).encode()
    body = body + b" " * 400  # longer than the trickle lasts
    stop = threading.Event()
    sent = [0]
    with socket.create_connection(_host_port(server)) as sock:
        sock.sendall(f"POST /api/sessions/s1/input HTTP/1.1\r\nHost: x\r\n"
                     f"Authorization: Bearer {server.token}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(body)}\r\n\r\n".encode())

        def trickle() -> None:
            while not stop.wait(1.0) and sent[0] < len(body):
                try:
                    sock.sendall(body[sent[0]:sent[0] + 1])
                except OSError:
                    return
                sent[0] += 1

        thread = threading.Thread(target=trickle, daemon=True)
        thread.start()
        try:
            got = _answer(sock)
        finally:
            stop.set()
            thread.join(5)
    assert sent[0] < len(body), "the whole body went in: nothing was timed out"
    head, _, rest = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), got
    answer = json.loads(rest)
    assert answer["error"] == "Request timeout" and f"{BODY_TIMEOUT_S:g} s" in answer["detail"]
    with server.client() as c:
        assert c.get("/api/sessions/s1/input").json()["total"] == 0
        ok = c.post("/api/sessions/s1/input", content=body,
                    headers={"content-type": "application/json"})
        assert ok.status_code == 201, ok.text
