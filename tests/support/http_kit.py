"""Helpers for the HTTP API's tests: the app in-process over httpx's ASGI
transport (called synchronously, one event loop per request), and the real
server as a subprocess of the test's own environment.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
from conftest import AwEnv
from fastapi import FastAPI

from agentwrap.message import QueueLimits
from agentwrap.sessions.registry import SessionRecord
from agentwrap.surfaces.http.app import create_app

TOKEN = "test-token-" + "x" * 20


@dataclass
class InProcess:
    """The app in this process; ``request`` returns the whole response."""

    app: FastAPI
    token: str = TOKEN

    def request(
        self, method: str, path: str, *, auth: bool = True, headers: dict[str, str] | None = None,
        **kw: Any,
    ) -> httpx.Response:
        hdrs = dict(headers or {})
        if auth:
            hdrs.setdefault("Authorization", f"Bearer {self.token}")

        async def go() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
                return await c.request(method, path, headers=hdrs, **kw)

        return anyio.run(go)

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("GET", path, **kw)

    def post(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("POST", path, **kw)

    def delete(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("DELETE", path, **kw)


def in_process(aw: AwEnv, limits: QueueLimits | None = None) -> InProcess:
    return InProcess(create_app(aw.paths, TOKEN, limits=limits))


def register(aw: AwEnv, name: str, profile: str = "standin") -> None:
    """A session record without a process (its messages wait for `adopt`)."""
    reg = aw.registry()
    try:
        reg.register(SessionRecord(name=name, profile=profile, backend="tmux", command=["x"],
                                   cwd=str(aw.project), started=time.time()))
    finally:
        reg.close()


def body(content: str = "hello", **kw: Any) -> dict[str, Any]:
    return {"source": "webhook", "sourceId": "github", "content": content, **kw}


async def chunks(data: bytes, size: int = 4096) -> AsyncIterator[bytes]:
    """A request body sent chunked (no Content-Length)."""
    for i in range(0, len(data), size):
        yield data[i:i + size]


# --- the real server ------------------------------------------------------------------


@dataclass
class Served:
    proc: subprocess.Popen[str]
    url: str
    token: str

    def client(self, **kw: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token}"},
                            timeout=120, **kw)


def serve_process(env: dict[str, str], cwd: Path, log_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``agentwrap serve --port 0`` with ``env`` in ``cwd``: the process and its
    URL, until the generator is closed (then SIGTERM, and a kill if it hangs)."""
    log = log_path.open("w", encoding="utf-8")  # a pipe nobody reads would fill
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentwrap", "serve", "--port", "0"], env=env, cwd=cwd,
        stdout=subprocess.PIPE, stderr=log, text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "listening on http://" in line, line + log_path.read_text()
        yield proc, line.split("listening on ", 1)[1].split()[0]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def serve(aw: AwEnv) -> Iterator[Served]:
    """``agentwrap serve --port 0`` in the test's environment, until the test ends."""
    with contextlib.closing(serve_process(aw.env, aw.project, aw.root / "serve.log")) as running:
        proc, url = next(running)
        token = aw.cli("token", check=True).stdout.strip()
        yield Served(proc, url, token)


def serve_for_a_page(aw: AwEnv) -> Iterator[Served]:
    """:func:`serve` for a page's tests: the delivery kit's config, and a rate
    limit a page's clicks never reach."""
    from support.delivery_kit import write_config

    write_config(aw)
    with aw.paths.config_file.open("a", encoding="utf-8") as f:
        f.write("\n[limits]\nrate_per_minute = 1000\n")
    yield from serve(aw)


def sse_events(lines: Iterator[str], n: int, within: float = 90.0) -> list[dict[str, Any]]:
    """Read ``n`` events (id, event, data) from an SSE line stream; fails
    naming what it got when they have not come within ``within`` seconds (the
    server's keepalive comments, every 15 s, let the check run on an idle stream)."""
    got: list[dict[str, Any]] = []
    cur: dict[str, Any] = {}
    deadline = time.monotonic() + within
    for line in lines:
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(got)} of {n} events in {within:.0f} s: {got}")
        if line == "":
            if "data" in cur:
                got.append(cur)
                if len(got) == n:
                    return got
            cur = {}
        elif line.startswith(":"):
            continue
        else:
            key, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            cur[key] = json.loads(value) if key == "data" else value
    return got
