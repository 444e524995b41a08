"""Stand-in notification services on loopback: what a notice looked like when it arrived.

* :class:`NtfyStandIn`: an ntfy-compatible HTTP endpoint (a real HTTP server on
  127.0.0.1) that records every request (method, path, headers, body) and
  answers as ntfy does; it can be told to fail the next N requests (a service
  down) or to be slow.
* :class:`SmtpSink`: a real SMTP server (aiosmtpd) that keeps every message it
  is handed: where ``mailto://`` notices arrive.
"""

from __future__ import annotations

import email
import email.policy
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Arrived:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.monotonic)
    wall: float = field(default_factory=time.time)  # to compare with another process's stamps

    @property
    def json(self) -> dict[str, Any]:
        return json.loads(self.body) if self.body.startswith(b"{") else {}

    @property
    def text(self) -> str:
        """The notice's title and message, however the client sent them."""
        data = self.json
        if data:
            return f"{data.get('title', '')}\n{data.get('message', '')}"
        return f"{self.headers.get('x-title', '')}\n{self.body.decode('utf-8', 'replace')}"


class NtfyStandIn:
    """An ntfy server's publish endpoint, on an ephemeral loopback port."""

    def __init__(self) -> None:
        self.arrived: list[Arrived] = []
        self.fail_next = 0  # answer this many requests with 500
        self.delay_s = 0.0
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                n = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(n)
                if outer.delay_s:
                    time.sleep(outer.delay_s)
                with outer._lock:
                    failing = outer.fail_next > 0
                    if failing:
                        outer.fail_next -= 1
                    else:
                        outer.arrived.append(Arrived(
                            "POST", self.path, {k.lower(): v for k, v in self.headers.items()},
                            body))
                status = 500 if failing else 200
                reply = json.dumps({"id": "x1", "time": int(time.time()), "event": "message",
                                    "topic": self.path.strip("/") or "t"}).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            do_PUT = do_POST

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, topic: str = "agents", **query: str) -> str:
        tail = "&".join(f"{k}={v}" for k, v in query.items())
        return f"ntfy://127.0.0.1:{self.port}/{topic}" + (f"?{tail}" if tail else "")

    def texts(self) -> list[str]:
        with self._lock:
            return [a.text for a in self.arrived]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class SmtpSink:
    """An SMTP server on loopback that keeps what it is handed (aiosmtpd)."""

    def __init__(self) -> None:
        from aiosmtpd.controller import Controller
        from aiosmtpd.smtp import AuthResult

        self.messages: list[EmailMessage] = []
        outer = self

        class Handler:
            async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
                msg = email.message_from_bytes(envelope.content, policy=email.policy.default)
                outer.messages.append(msg)  # type: ignore[arg-type]
                return "250 OK"

        with socket.socket() as probe:  # Controller checks its port by connecting: no port 0
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.logins: list[tuple[str, str]] = []  # (mechanism, user) of each AUTH

        def authenticator(server: Any, session: Any, envelope: Any, mechanism: str,
                          auth_data: Any) -> AuthResult:
            outer.logins.append((mechanism, getattr(auth_data, "login", b"").decode()))
            return AuthResult(success=True)

        self.controller = Controller(Handler(), hostname="127.0.0.1", port=self.port,
                                     authenticator=authenticator, auth_require_tls=False)
        self.controller.start()

    def url(self, to: str = "me@example.com") -> str:
        return (f"mailto://127.0.0.1:{self.port}?from=agentwrap@example.com&to={to}"
                "&mode=insecure&user=aw&pass=s3cretSMTPpass")

    def texts(self) -> list[str]:
        out = []
        for m in list(self.messages):
            body = m.get_body(("plain", "html"))
            out.append(f"{m['subject']}\n{body.get_content() if body is not None else ''}")
        return out

    def close(self) -> None:
        self.controller.stop()


__all__ = ["Arrived", "NtfyStandIn", "SmtpSink"]
