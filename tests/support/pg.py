"""A real PostgreSQL server for the tests, started and stopped by the suite itself.

No service of the machine is used or needed: ``initdb`` makes a throwaway
cluster in a temporary dir, ``pg_ctl`` starts it listening on a unix socket in
that dir only (and on a free loopback TCP port, for URLs with a host), and it
is stopped and removed at the end. PostgreSQL refuses to run as root, and CI
runs as root: then the binaries run as the package's ``postgres`` user (found
with :mod:`pwd`) in a dir that user owns. The binaries are Debian's
(``/usr/lib/postgresql/*/bin``, installed by ``scripts/test.sh``) or any on
the PATH.

Each test that needs a store gets its own schema (:meth:`PgServer.schema_url`):
the URL's ``options=-csearch_path=...`` puts every table the store creates
there, so tests never see each other's rows and nothing needs a new database.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote


def find_bin(name: str) -> str | None:
    """The newest installed PostgreSQL's ``name`` (initdb, pg_ctl), or None."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
                   key=lambda p: int(Path(p).parent.parent.name)
                   if Path(p).parent.parent.name.isdigit() else 0)
    return found[-1] if found else shutil.which(name)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgServer:
    """A running throwaway cluster: its dir, socket dir, port and superuser."""

    root: Path
    data: Path
    port: int
    user: str
    run_as: str | None  # the OS user the server runs as (root can't)
    started_in_s: float

    @property
    def socket_dir(self) -> Path:
        return self.root

    def url(self, dbname: str = "postgres") -> str:
        """A libpq URL over the unix socket (no password: trust, local only)."""
        return (f"postgresql:///{dbname}?host={quote(str(self.socket_dir), safe='')}"
                f"&port={self.port}&user={self.user}")

    def tcp_url(self, dbname: str = "postgres", host: str = "127.0.0.1") -> str:
        return f"postgresql://{self.user}@{host}:{self.port}/{dbname}"

    def schema_url(self, schema: str) -> str:
        """:meth:`url` whose connections put everything in ``schema``."""
        return self.url() + f"&options={quote(f'-csearch_path={schema}', safe='')}"

    def psql(self, sql: str) -> str:
        """Run SQL as the superuser (for setting up and tearing down)."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            cur = conn.execute(sql.encode())
            return "" if cur.description is None else str(cur.fetchall())

    def new_schema(self) -> tuple[str, str]:
        """A fresh empty schema and the URL that uses it."""
        name = "t_" + secrets.token_hex(6)
        self.psql(f"CREATE SCHEMA {name}")
        return name, self.schema_url(name)

    def drop_schema(self, name: str) -> None:
        """Drop a test's schema, asked again when PostgreSQL picks the drop as a
        deadlock's victim: a host process of the test may still be at work in it
        (a heartbeat expiring overdue messages takes row locks the drop's
        exclusive locks wait for, in another order)."""
        import psycopg

        for attempt in range(5):
            try:
                self.psql(f"DROP SCHEMA IF EXISTS {name} CASCADE")
                return
            except psycopg.errors.DeadlockDetected:
                if attempt == 4:
                    raise
                time.sleep(0.2)

    def restart(self) -> None:
        """Stop (every connection is cut) and start again on the same port. Fast,
        not immediate: with synchronous_commit off, an immediate stop may lose
        the last commits, which is the tests' speed setting, not PostgreSQL's."""
        pg_ctl = find_bin("pg_ctl")
        assert pg_ctl is not None
        _run([pg_ctl, "-D", str(self.data), "-l", str(self.root / "log"), "-m", "fast",
              "-w", "-t", "60", "restart"],
             self.run_as)

    def stop(self) -> None:
        pg_ctl = find_bin("pg_ctl")
        if pg_ctl is not None:
            _run([pg_ctl, "-D", str(self.data), "-m", "immediate", "-w", "stop"],
                 self.run_as, check=False)
        shutil.rmtree(self.root, ignore_errors=True)


def _run(argv: list[str], user: str | None, *, check: bool = True) -> None:
    proc = subprocess.run(argv, user=user, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=120, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed ({proc.returncode}): {proc.stderr.strip()}")


def start(listen: Sequence[str] = ("127.0.0.1",), trust: Sequence[str] = ()) -> PgServer:
    """initdb + pg_ctl start a private cluster; raise RuntimeError if impossible.
    ``listen``: the addresses it takes TCP connections on (loopback; a test's
    own veth address too, tests/support/netns.py), ``trust``: networks besides
    loopback whose connections it lets in without a password (such a veth's)."""
    initdb, pg_ctl = find_bin("initdb"), find_bin("pg_ctl")
    if initdb is None or pg_ctl is None:
        raise RuntimeError("PostgreSQL is not installed (bash scripts/test.sh installs it)")
    t0 = time.monotonic()
    run_as: str | None = None
    user = pwd.getpwuid(os.getuid()).pw_name
    root = Path(tempfile.mkdtemp(prefix="awpg-"))  # short: the socket path is limited
    if os.getuid() == 0:
        run_as, user = "postgres", "postgres"
        entry = pwd.getpwnam(run_as)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    data = root / "data"
    port = _free_port()
    try:
        _run([initdb, "-D", str(data), "-U", user, "-A", "trust", "-E", "UTF8",
              "--locale=C", "--no-sync", "--no-instructions"], run_as)
        with (data / "pg_hba.conf").open("a", encoding="utf-8") as hba:
            hba.writelines(f"host all all {net} trust\n" for net in trust)
        opts = (f"-k {root} -p {port} -c listen_addresses={','.join(listen)} -c fsync=off"
                " -c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        _run([pg_ctl, "-D", str(data), "-l", str(root / "log"), "-o", opts, "-w",
              "-t", "60", "start"], run_as)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return PgServer(root, data, port, user, run_as, time.monotonic() - t0)
