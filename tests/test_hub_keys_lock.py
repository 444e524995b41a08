"""A host's credential check holds no write lock while it hashes (issue 38's
scale run): the check's scrypt (16 MB, tens of ms of CPU) ran inside the keys'
write transaction, so a hundred hosts linking at once queued on the lock until
SQLite gave up ("database is locked", an error that is no AgentwrapError, so
the link's handshake died with a traceback) and a PostgreSQL hub held its
advisory lock and a pooled connection per check.

The real keys file (SQLite) and the real hash; while the hash runs, a second
connection takes the write lock at once (``BEGIN IMMEDIATE`` with no wait)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agentwrap.errors import LinkRefused
from agentwrap.hub import keys as keys_mod
from agentwrap.hub.keys import HubKeys


def test_a_credential_check_hashes_outside_the_write_lock(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = HubKeys(tmp_path / "hub-keys.db")
    credential = keys.join(keys.invite("plain", "alpha"), "alpha")
    real_hash, probes = keys_mod._hash, []

    def hash_and_probe(secret: str, salt: bytes) -> bytes:
        other = sqlite3.connect(tmp_path / "hub-keys.db", timeout=0, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # the write lock, not waited for
            other.execute("ROLLBACK")
            probes.append("free")
        except sqlite3.OperationalError as exc:
            probes.append(str(exc))
        finally:
            other.close()
        return real_hash(secret, salt)

    monkeypatch.setattr(keys_mod, "_hash", hash_and_probe)
    keys.check("alpha", credential)
    assert probes == ["free"]
    with pytest.raises(LinkRefused):
        keys.check("alpha", "wrong")
    keys.revoke("alpha")
    with pytest.raises(LinkRefused):
        keys.check("alpha", credential)
