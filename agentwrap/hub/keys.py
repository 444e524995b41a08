"""Who may link to the hub: one-time join codes and per-host credentials, hashed at rest.

A join code is ``ID.SECRET.PIN``: ``ID`` finds the invite, ``SECRET`` (32
random bytes) proves it, and ``PIN`` is the first 20 hex digits of the
SHA-256 fingerprint of the hub's TLS certificate (``plain`` for a loopback
hub without TLS). Binding the pin into the code is the trust on first use:
``agentwrap join`` refuses a hub whose certificate does not match before it
sends the secret, so a person who copies one string gets both the
permission and the hub's identity, with nothing else to compare by eye.
An invite is used once (marked in the same transaction that makes the
host's credential) and only before its ``expires``.

Only scrypt hashes (``hashlib.scrypt``, a salt per row) are stored for the
secrets and the credentials; the credential itself is shown once, to the
joining host, in the answer to its join request.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import JoinRefused, LinkRefused
from ..paths import check_session_name
from .tables import Conn, SQLiteTables, Tables

INVITE_TTL_S = 600.0
_SCRYPT = {"n": 2**14, "r": 8, "p": 1, "dklen": 32}


def _hash(secret: str, salt: bytes) -> bytes:
    return hashlib.scrypt(secret.encode(), salt=salt, **_SCRYPT)


@dataclass(frozen=True)
class JoinedHost:
    """A host that joined: when, when its link was last seen, whether revoked."""

    name: str
    joined: float
    last_seen: float | None
    revoked: float | None

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "joined": self.joined, "lastSeen": self.last_seen,
                "revoked": self.revoked}


class HubKeys:
    """The hub's invites and hosts, in ``hub-keys.db`` beside its store, or in
    its PostgreSQL (:mod:`.tables`: every hub on it knows every host)."""

    def __init__(self, where: Path | Tables) -> None:
        self.tables = SQLiteTables(where) if isinstance(where, Path) else where
        self._now = time.time
        i, h, blob = self._names("invites"), self._names("hosts"), self.tables.blob
        with self._db() as db:
            db.execute(f"CREATE TABLE IF NOT EXISTS {i} (id TEXT PRIMARY KEY, salt {blob} NOT NULL,"
                       f" hash {blob} NOT NULL, host TEXT, pin TEXT NOT NULL,"
                       " expires DOUBLE PRECISION NOT NULL, used DOUBLE PRECISION)")
            db.execute(f"CREATE TABLE IF NOT EXISTS {h} (name TEXT PRIMARY KEY,"
                       f" salt {blob} NOT NULL, hash {blob} NOT NULL,"
                       " joined DOUBLE PRECISION NOT NULL, last_seen DOUBLE PRECISION,"
                       " revoked DOUBLE PRECISION)")

    def _names(self, table: str) -> str:
        return self.tables.prefix + table

    def _db(self) -> contextlib.AbstractContextManager[Conn]:
        return self.tables.transaction()

    def invite(self, pin: str, host: str | None = None, ttl_s: float = INVITE_TTL_S) -> str:
        """A new one-time join code (``host``: the only name it joins as)."""
        if host is not None:
            check_session_name(host)
        invite_id, secret, salt = secrets.token_hex(6), secrets.token_urlsafe(32), \
            secrets.token_bytes(16)
        with self._db() as db:
            db.execute(f"INSERT INTO {self._names('invites')} VALUES (?, ?, ?, ?, ?, ?, NULL)",
                       (invite_id, salt, _hash(secret, salt), host, pin,
                        self._now() + ttl_s))
        return f"{invite_id}.{secret}.{pin}"

    def join(self, code: str, host: str) -> str:
        """Trade ``code`` for ``host``'s new credential (returned once), or
        :class:`JoinRefused` with nothing changed."""
        check_session_name(host)
        invite_id, _, rest = code.partition(".")
        secret, _, _pin = rest.partition(".")
        with self._db() as db:
            row = db.execute(f"SELECT salt, hash, host, expires, used FROM {self._names('invites')}"
                             " WHERE id = ?",
                             (invite_id,)).fetchone()
            if row is None or not hmac.compare_digest(_hash(secret, row[0]), row[1]):
                raise JoinRefused("the hub knows no such join code")
            if row[4] is not None:
                raise JoinRefused("this join code was already used")
            if row[3] < self._now():
                raise JoinRefused("this join code has expired")
            if row[2] is not None and row[2] != host:
                raise JoinRefused(f"this join code is for host {row[2]!r}, not {host!r}")
            hosts = self._names("hosts")
            taken = db.execute(f"SELECT revoked FROM {hosts} WHERE name = ?", (host,)).fetchone()
            if taken is not None and taken[0] is None:
                raise JoinRefused(f"a host named {host!r} has already joined",
                                  hint="pick another name ([host] name), or revoke the old"
                                  " one on the hub first (`agentwrap hub revoke NAME`)")
            credential, salt = secrets.token_urlsafe(32), secrets.token_bytes(16)
            db.execute(f"UPDATE {self._names('invites')} SET used = ? WHERE id = ?",
                       (self._now(), invite_id))
            db.execute(f"DELETE FROM {hosts} WHERE name = ?", (host,))
            db.execute(f"INSERT INTO {hosts} VALUES (?, ?, ?, ?, NULL, NULL)",
                       (host, salt, _hash(credential, salt), self._now()))
        return credential

    def check(self, host: str, credential: str) -> None:
        """:class:`LinkRefused` unless ``credential`` is ``host``'s and not revoked;
        records the host seen now. The hash (scrypt: 16 MB and tens of ms of
        CPU) is computed outside any transaction: inside one it held the
        write lock (SQLite ``BEGIN IMMEDIATE``, PostgreSQL the owner's
        advisory lock and a pooled connection) for each check, so a hundred
        hosts linking at once queued on it until SQLite gave up ("database
        is locked") and PostgreSQL's pool ran dry. The row is read, hashed
        against, and the host marked seen only if it is still not revoked."""
        with self._db() as db:
            row = db.execute(f"SELECT salt, hash, revoked FROM {self._names('hosts')}"
                             " WHERE name = ?", (host,)).fetchone()
        if (row is None or row[2] is not None
                or not hmac.compare_digest(_hash(credential, bytes(row[0])), bytes(row[1]))):
            raise LinkRefused(f"the hub refused host {host!r}'s credential")
        with self._db() as db:
            cur = db.execute(f"UPDATE {self._names('hosts')} SET last_seen = ? WHERE name = ?"
                             " AND revoked IS NULL", (self._now(), host))
            if cur.rowcount != 1:  # revoked while it was hashed
                raise LinkRefused(f"the hub refused host {host!r}'s credential")

    def seen(self, host: str) -> None:
        with self._db() as db:
            db.execute(f"UPDATE {self._names('hosts')} SET last_seen = ? WHERE name = ?", (self._now(), host))

    def revoke(self, host: str) -> bool:
        """Revoke ``host``'s credential; False if it never joined (or is revoked)."""
        with self._db() as db:
            cur = db.execute(f"UPDATE {self._names('hosts')} SET revoked = ?"
                             " WHERE name = ? AND revoked IS NULL", (self._now(), host))
            return cur.rowcount == 1

    def hosts(self) -> list[JoinedHost]:
        with self._db() as db:
            rows = db.execute("SELECT name, joined, last_seen, revoked FROM"
                              f" {self._names('hosts')} ORDER BY name").fetchall()
        return [JoinedHost(*tuple(r)) for r in rows]
