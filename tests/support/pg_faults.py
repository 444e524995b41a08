"""Real connection faults between a host and its PostgreSQL, for the fault tests.

Two parts, no mocks:

* :class:`Proxy`, a TCP proxy in the test between a host's connections and
  the server. The test cuts it: one connection (``cut``), one direction
  (``mute``: what the server says no longer reaches the host), or all of
  it (``down``: every connection closed, new ones closed at once, as a
  server that went away; ``up`` again).
* :class:`FaultPoint`, a trigger in the test's schema that holds a writer
  at the commit of one write-ahead phase (or of a message's insert): a deferred constraint trigger on
  ``messages`` runs at COMMIT, and when the row is entering the phase the
  test armed it waits for an advisory lock the test holds. The test then
  finds the writer (``pg_locks``: waiting for that lock) and cuts it
  *before* the commit (``pg_terminate_backend``: the phase is never
  written) or *after* it (the proxy mutes the server's answer, the lock is
  let go, the commit is seen from the test's own connection, then the
  connection is cut: the phase is written, the host never hears so).
"""

from __future__ import annotations

import contextlib
import secrets
import socket
import threading
from dataclasses import dataclass, field

import psycopg

from .waiting import wait_for


@dataclass
class _Pair:
    client: socket.socket
    server: socket.socket
    muted: threading.Event = field(default_factory=threading.Event)  # server -> client
    stalled: threading.Event = field(default_factory=threading.Event)  # client -> server

    def close(self) -> None:
        for s in (self.client, self.server):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()


class Proxy:
    """127.0.0.1:``port`` -> the server at ``upstream``, one pair of sockets a
    connection, keyed by the server side's local port (what the server's
    ``pg_stat_activity.client_port`` shows)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.pairs: dict[int, _Pair] = {}
        self.accepting = True
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.accepting:
                client.close()  # the store is gone: a connection is closed at once
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=10)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            pair = _Pair(client, server)
            with self._lock:
                self.pairs[int(server.getsockname()[1])] = pair
            threading.Thread(target=self._pump, args=(pair, client, server, pair.stalled),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(pair, server, client, pair.muted),
                             daemon=True).start()

    @staticmethod
    def _pump(pair: _Pair, src: socket.socket, dst: socket.socket,
              muted: threading.Event | None) -> None:
        try:
            while data := src.recv(65536):
                if muted is None or not muted.is_set():
                    dst.sendall(data)
        except OSError:
            pass
        pair.close()

    def url(self, user: str, schema: str, dbname: str = "postgres") -> str:
        return (f"postgresql://{user}@127.0.0.1:{self.port}/{dbname}"
                f"?options=-csearch_path%3D{schema}&connect_timeout=5")

    def mute(self, port: int) -> None:
        """What the server sends on connection ``port`` is dropped from now on."""
        self.pairs[port].muted.set()

    def stall(self, port: int) -> None:
        """Connection ``port`` carries nothing either way from now on, and
        stays open: the host is cut off as by a partition, and neither side hears."""
        self.pairs[port].stalled.set()
        self.pairs[port].muted.set()

    def cut(self, port: int) -> None:
        with self._lock:
            pair = self.pairs.pop(port, None)
        if pair is not None:
            pair.close()

    def down(self) -> None:
        """The store is gone for whoever connects through here."""
        self.accepting = False
        with self._lock:
            pairs, self.pairs = list(self.pairs.values()), {}
        for pair in pairs:
            pair.close()

    def up(self) -> None:
        self.accepting = True

    def close(self) -> None:
        self._closed = True
        self.down()
        with contextlib.suppress(OSError):
            self.listener.close()


TRIGGER = """
CREATE TABLE IF NOT EXISTS fault_spec (phase TEXT, status TEXT NOT NULL, lock_key BIGINT NOT NULL);
CREATE OR REPLACE FUNCTION fault_hold() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    spec RECORD;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF NEW.phase IS NOT DISTINCT FROM OLD.phase AND NEW.status = OLD.status THEN
            RETURN NULL;
        END IF;
    END IF;
    FOR spec IN SELECT * FROM fault_spec LOOP
        IF NEW.status = spec.status AND NEW.phase IS NOT DISTINCT FROM spec.phase THEN
            PERFORM pg_advisory_xact_lock_shared(spec.lock_key);
        END IF;
    END LOOP;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS fault_hold ON messages;
CREATE CONSTRAINT TRIGGER fault_hold AFTER INSERT OR UPDATE ON messages
    {when} FOR EACH ROW EXECUTE FUNCTION fault_hold();
"""


class FaultPoint:
    """Holds the writer of a message row at the commit that moves it into
    ``(status, phase)``; see the module. ``url``: straight to the server, in
    the schema the store is in (its ``messages`` table exists).

    ``at_commit`` False: held at the end of the ``UPDATE`` instead, before the
    transaction appends its events (so other writers are not kept waiting
    for the event log's lock meanwhile)."""

    def __init__(self, url: str, *, at_commit: bool = True) -> None:
        self.conn = psycopg.connect(url, autocommit=True)
        when = "DEFERRABLE INITIALLY DEFERRED" if at_commit else "NOT DEFERRABLE"
        self.conn.execute(TRIGGER.format(when=when).encode())
        self.key = secrets.randbelow(2**31 - 1) + 1  # pg_locks: classid 0, objid key
        self.held = False

    def arm(self, status: str, phase: str | None) -> None:
        self.conn.execute("SELECT pg_advisory_lock(%s)", (self.key,))
        self.held = True
        self.conn.execute("DELETE FROM fault_spec")
        self.conn.execute("INSERT INTO fault_spec VALUES (%s, %s, %s)", (phase, status, self.key))

    def writer(self, timeout: float = 60.0) -> tuple[int, int]:
        """The (pid, client port) of the backend waiting at the armed point."""
        def waiting() -> tuple[int, int] | None:
            row = self.conn.execute(
                "SELECT a.pid, a.client_port FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
                " WHERE l.locktype = 'advisory' AND NOT l.granted AND l.classid = 0"
                " AND l.objid = %s AND l.objsubid = 1", (self.key,)).fetchone()
            return (int(row[0]), int(row[1] or 0)) if row else None

        got: tuple[int, int] = wait_for(waiting, timeout, "a writer held at the fault point")
        return got

    def release(self) -> None:
        """Let whoever waits go on, and hold nobody from now on."""
        self.conn.execute("DELETE FROM fault_spec")
        if self.held:
            self.conn.execute("SELECT pg_advisory_unlock(%s)", (self.key,))
            self.held = False

    def terminate(self, pid: int) -> None:
        """Cut the writer before its commit: the transaction is rolled back."""
        self.conn.execute("SELECT pg_terminate_backend(%s)", (pid,))

    def row(self, message_id: str) -> tuple[str, str | None]:
        got = self.conn.execute("SELECT status, phase FROM messages WHERE id = %s",
                                (message_id,)).fetchone()
        assert got is not None
        return str(got[0]), got[1]

    def close(self) -> None:
        with contextlib.suppress(psycopg.Error):  # a restarted server cut it: nothing held
            self.release()
            self.conn.execute("DROP TRIGGER IF EXISTS fault_hold ON messages")
        self.conn.close()
