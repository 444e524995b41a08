"""A real hub process and hosts joined to it (issue 38): a test CA made with
``cryptography``, ``agentwrap hub`` started (and killed, and restarted) on a
free port of loopback, and hosts joined with one-time codes; the fixtures
of the hub tests (``hub``, ``alpha``, ``beta``, and ``_stop_hosts``, which
stops the supervisor hosts a test started: import it where ``start_session``
is used)."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import AwEnv, make_aw
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from agentwrap.hub.server import open_hub_store
from agentwrap.message import NewMessage, Status
from agentwrap.queue.link import LinkClient, load_link
from support.waiting import wait_for


@dataclass(frozen=True)
class HubCert:
    cert: Path
    key: Path
    ca: Path


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_cert(where: Path, cn: str = "agentwrap test hub") -> HubCert:
    """A test CA and a hub certificate it signs (127.0.0.1, localhost)."""
    where.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name("agentwrap test CA"))
          .issuer_name(_name("agentwrap test CA")).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .sign(ca_key, hashes.SHA256()))
    out = HubCert(where / f"{cn.replace(' ', '-')}.crt", where / f"{cn.replace(' ', '-')}.key",
                  where / "ca.crt")
    out.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    out.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    out.key.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                          serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    os.chmod(out.key, 0o600)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Hub:
    """``agentwrap hub`` in environment ``aw``, TLS from ``cert``."""

    aw: AwEnv
    cert: HubCert
    port: int = field(default_factory=free_port)
    store_url: str = ""  # the hub's PostgreSQL (AGENTWRAP_STORE_URL), or its SQLite file
    proc: subprocess.Popen[bytes] | None = None

    address: str = "127.0.0.1"

    @property
    def url(self) -> str:
        return f"https://{self.address}:{self.port}"

    def start(self) -> Hub:
        return self.start_on("127.0.0.1")

    def start_on(self, address: str) -> Hub:
        """Serve on ``address`` (TLS: not loopback is fine), :attr:`url` with it."""
        self.address = address
        log = open(self.aw.root / "hub.log", "ab")  # noqa: SIM115 - the child keeps it
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agentwrap", "hub", "--listen", f"{address}:{self.port}",
             "--tls-cert", str(self.cert.cert), "--tls-key", str(self.cert.key)],
            env={**self.aw.env, **({"AGENTWRAP_STORE_URL": self.store_url} if self.store_url
                                   else {})},
            cwd=self.aw.project, stdout=log, stderr=log)
        wait_for(self.healthy, 60, "the hub's /healthz", interval=0.1, on_timeout=self.log)
        return self

    def healthy(self) -> dict[str, object] | None:
        ctx = ssl.create_default_context(cafile=str(self.cert.ca))
        ctx.check_hostname = False  # the test CA's, on whatever address the hub serves
        try:
            r = httpx.get(self.url + "/healthz", timeout=2, verify=ctx)
        except httpx.HTTPError:
            return None
        return r.json() if r.status_code == 200 else None

    def links(self) -> int:
        got = self.healthy()
        return int(got["links"]) if got else -1  # type: ignore[call-overload]

    def log(self) -> str:
        path = self.aw.root / "hub.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)
        self.proc = None

    def invite(self, host: str | None = None, ttl: float = 600.0) -> str:
        args = ["hub", "invite", *([host] if host else []), "--tls-cert", str(self.cert.cert),
                "--ttl", str(ttl)]
        return self.aw.cli(*args, check=True, env=self.store_env).stdout.strip()

    @property
    def store_env(self) -> dict[str, str]:
        """The hub's store for its commands (invite, hosts, revoke): a PostgreSQL hub's keys are there."""
        return {"AGENTWRAP_STORE_URL": self.store_url} if self.store_url else {}

    def join(self, host_aw: AwEnv, name: str, code: str | None = None,
             also: tuple[Hub, ...] = ()) -> None:
        # the code on standard input, as the docs advise (never in `ps`)
        extra = [a for other in also for a in ("--also", other.url)]
        host_aw.cli("join", self.url, "--host", name, *extra,
                    input=(code or self.invite(name)) + "\n", check=True)


class PlainHub(Hub):
    """The hub on plain HTTP (loopback only), so a relay can read the link's
    frames; on :attr:`store_url` when it is set (a PostgreSQL hub)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> PlainHub:
        log = open(self.aw.root / "hub.log", "ab")  # noqa: SIM115 - the child keeps it
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agentwrap", "hub", "--listen", f"127.0.0.1:{self.port}"],
            env={**self.aw.env, **self.store_env}, cwd=self.aw.project, stdout=log, stderr=log)
        wait_for(self.healthy, 60, "the hub's /healthz", interval=0.1, on_timeout=self.log)
        return self

    def invite(self, host: str | None = None, ttl: float = 600.0) -> str:
        return self.aw.cli("hub", "invite", *([host] if host else []), "--ttl", str(ttl),
                           check=True, env=self.store_env).stdout.strip()


HOSTS: list[subprocess.Popen[bytes]] = []  # supervisor hosts the tests started


@pytest.fixture(autouse=True, name="_stop_hosts")
def stop_hosts() -> Iterator[None]:
    yield
    while HOSTS:
        proc = HOSTS.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


@pytest.fixture(name="hub")
def hub_fixture(tmp_path: Path) -> Iterator[Hub]:
    with make_aw() as aw:
        h = Hub(aw, make_cert(tmp_path / "tls")).start()
        try:
            yield h
        finally:
            h.kill()


@pytest.fixture(name="alpha")
def alpha_fixture() -> Iterator[AwEnv]:
    with make_aw() as aw:
        yield aw


@pytest.fixture(name="beta")
def beta_fixture() -> Iterator[AwEnv]:
    with make_aw() as aw:
        yield aw


def send_on_hub(hub: Hub, session: str, content: str) -> str:
    store = open_hub_store(hub.aw.paths.state_dir, hub.store_url)
    try:
        msg, _ = store.enqueue(NewMessage(session=session, content=content))
        return msg.id
    finally:
        store.close()


def status_on_hub(hub: Hub, message_id: str) -> Status:
    store = open_hub_store(hub.aw.paths.state_dir, hub.store_url)
    try:
        return store.get(message_id).status
    finally:
        store.close()


def start_session(aw: AwEnv, name: str = "api", wrap: list[str] | None = None,
                  extra: tuple[str, ...] = ()) -> None:
    """A stand-in session on host ``aw`` (its log shown if it does not start;
    ``wrap``: its supervisor host run under that, e.g. ``ip netns exec NS``;
    ``extra``: the stand-in's own arguments, e.g. ``--dialog-on WORD``).
    The host's supervisor host is started first and awaited: on a loaded
    machine its start-up alone can use up `run`'s wait for it."""
    host_sock = aw.paths.runtime_dir / "host.sock"
    if not host_sock.exists():
        HOSTS.append(subprocess.Popen(
            [*(wrap or ()), sys.executable, "-m", "agentwrap", "_host"], env=aw.env, cwd="/",
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True))
        wait_for(host_sock.exists, 120, "the supervisor host's socket")
    try:
        aw.start_standin(name, *extra)
    except AssertionError as exc:
        logs = "\n".join(f"== {p}\n{p.read_text()[-3000:]}"
                         for p in sorted(aw.paths.logs_dir.glob("*.log")))
        raise AssertionError(f"{exc}\n{logs}") from None


def host_client(aw: AwEnv) -> LinkClient:
    link = load_link(aw.paths.state_dir)
    assert link is not None
    client = LinkClient(link).start()
    assert client.wait_up(30), "the link did not come up"
    return client


def settled_on_slow_poll(hub: Hub, aw: AwEnv, config: str = "") -> None:
    """Host ``aw`` joined, its session "api" started, one message delivered, and
    its screen still past the supervisor's settle time: idle, with its safety poll
    of the queue an hour away (``config``: more of its config file), so only a
    push from the hub brings the next message soon."""
    aw.paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    aw.paths.config_file.write_text("[run]\nidle_tick_s = 3600\n" + config)
    hub.join(aw, "alpha")
    start_session(aw)
    aw.wait_state("api", "ready", timeout=60)
    sent = send_on_hub(hub, "alpha/api", "warm-up")
    wait_for(lambda: status_on_hub(hub, sent).terminal, 60, "the warm-up delivered")
    time.sleep(8)  # the screen still for longer than the supervisor's settle_s (6 s): idle polling


def spki_pin(cert: Path) -> str:
    """The certificate's key as Chromium pins it (base64 of the SPKI's SHA-256)."""
    key = x509.load_pem_x509_certificate(cert.read_bytes()).public_key()
    der = key.public_bytes(serialization.Encoding.DER,
                           serialization.PublicFormat.SubjectPublicKeyInfo)
    digest = hashes.Hash(hashes.SHA256())
    digest.update(der)
    return base64.b64encode(digest.finalize()).decode()


# --- the hub's API and two hosts on it (the one-view tests) ----------------------------


def beat_fast(aw: AwEnv, period_s: float = 0.5) -> None:
    """The host reports its sessions every ``period_s`` (``[host] heartbeat_s``)."""
    aw.paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    aw.paths.config_file.write_text(f"[host]\nheartbeat_s = {period_s}\n")


class HubApi:
    """The hub's HTTP API, with the hub's token (``agentwrap token`` on the hub)."""

    def __init__(self, hub: Hub) -> None:
        token = hub.aw.cli("token", check=True).stdout.strip()
        self.client = httpx.Client(
            base_url=hub.url, timeout=30, headers={"Authorization": f"Bearer {token}"},
            verify=ssl.create_default_context(cafile=str(hub.cert.ca)))

    def sessions(self) -> list[dict[str, Any]]:
        r = self.client.get("/api/sessions")
        assert r.status_code == 200, r.text
        return list(r.json()["sessions"])

    def row(self, host: str, name: str) -> dict[str, Any] | None:
        return next((s for s in self.sessions() if s["host"] == host and s["name"] == name),
                    None)

    def screen(self, address: str) -> httpx.Response:
        return self.client.get(f"/api/sessions/{address.replace('/', '%2F')}/screen")


def two_hosts_on_the_hub(hub: Hub, alpha: AwEnv, beta: AwEnv) -> HubApi:
    hub.join(alpha, "alpha")
    hub.join(beta, "beta")
    beat_fast(alpha)
    beat_fast(beta)
    start_session(alpha, "api")
    start_session(beta, "web")
    api = HubApi(hub)
    wait_for(lambda: api.row("alpha", "api") and api.row("beta", "web"), 90,
             "both hosts' sessions listed by the hub's API", on_timeout=hub.log)
    return api
