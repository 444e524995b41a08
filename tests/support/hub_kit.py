"""A real hub process and hosts joined to it (issue 38): a test CA made with
``cryptography``, ``agentwrap hub`` started (and killed, and restarted) on a
free port of loopback, and hosts joined with one-time codes."""

from __future__ import annotations

import datetime
import ipaddress
import os
import signal
import socket
import ssl
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from conftest import AwEnv
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

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

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self) -> Hub:
        log = open(self.aw.root / "hub.log", "ab")  # noqa: SIM115 - the child keeps it
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agentwrap", "hub", "--listen", f"127.0.0.1:{self.port}",
             "--tls-cert", str(self.cert.cert), "--tls-key", str(self.cert.key)],
            env={**self.aw.env, **({"AGENTWRAP_STORE_URL": self.store_url} if self.store_url
                                   else {})},
            cwd=self.aw.project, stdout=log, stderr=log)
        wait_for(self.healthy, 60, "the hub's /healthz", interval=0.1, on_timeout=self.log)
        return self

    def healthy(self) -> dict[str, object] | None:
        try:
            r = httpx.get(self.url + "/healthz", timeout=2,
                          verify=ssl.create_default_context(cafile=str(self.cert.ca)))
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
        return self.aw.cli(*args, check=True).stdout.strip()

    def join(self, host_aw: AwEnv, name: str, code: str | None = None) -> None:
        # the code on standard input, as the docs advise (never in `ps`)
        host_aw.cli("join", self.url, "--host", name, input=(code or self.invite(name)) + "\n",
                    check=True)
