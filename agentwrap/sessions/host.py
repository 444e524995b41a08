"""The supervisor host: one long-lived process that supervises every tmux session.

Why one process. A supervisor process per session costs a Python interpreter
each: ~30 MB RSS and ~0.8 s to start, 1.5 GB and 40 s for fifty agents
(``scripts/bench_scale.py``). The host runs each session's
:class:`~agentwrap.sessions.supervisor.Supervisor` on a thread of its own
(the loop sleeps in ``select``; idle threads cost no CPU and hold no GIL) and
takes new sessions from a datagram socket (``adopt NAME``).

Blast radius. Each session keeps its own tmux server, so the agents survive
anything that happens here. An error inside one session's loop is caught and
logged by that loop. If the host *process* dies (kill -9, out of memory),
supervision of all its sessions stops at once, but nothing is lost: the
sessions show as ``stale``, messages wait in the store, and the next ``run``,
``adopt`` or ``attach`` starts a new host, which adopts every orphaned
session and resumes in-flight batches from their write-ahead phase (nothing
is typed twice). ``[run] supervisor = "process"`` keeps the old model, a
process per session, for whoever prefers isolation to cost.

Lifetime. One host per user and runtime dir, guaranteed by an exclusive lock
on ``host.lock`` taken before anything else; a second host leaves at once. It
exits on SIGTERM, or once it has had no session for ``idle_exit_s``.
"""

from __future__ import annotations

import fcntl
import logging
import os
import select
import signal
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from ..datagram import WakeSocket
from ..errors import AgentwrapError
from ..paths import Paths, open_private_append, private_dir
from ..terminal.tmux import server_for
from .compose import Companion, start_companions
from .lifecycle import host_log, host_socket, tmux_supervisor
from .live import tmux_socket_of
from .registry import open_registry
from .supervisor import Supervisor

log = logging.getLogger("agentwrap.host")

_THREAD_PREFIX = "session:"


class SupervisorHost:
    def __init__(
        self, paths: Paths, *, idle_exit_s: float = 30.0, logs: SessionLogs | None = None,
        companions: Sequence[Companion] = (),
    ) -> None:
        self.paths = paths
        self.companions = tuple(companions)
        self.idle_exit_s = idle_exit_s
        self.logs = logs
        self._threads: dict[str, threading.Thread] = {}
        self._sups: dict[str, Supervisor] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()

    # --- the process ---------------------------------------------------------------

    def serve(self) -> int:
        """Run until SIGTERM or idle; 0 also when another host already serves."""
        self.paths.ensure()
        lock_fd = os.open(
            host_lock(self.paths),
            os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
        )
        try:
            try:
                fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return 0  # another host serves this runtime dir
            self.control = WakeSocket(host_socket(self.paths))
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(sig, lambda *_: self.shutdown())
            log.info("supervisor host %d serving %s", os.getpid(), self.paths.runtime_dir)
            try:
                self._adopt_orphans()
                self._loop()
            finally:
                self._stop_all()
                self.control.close()
            log.info("supervisor host %d exits", os.getpid())
            return 0
        finally:
            os.close(lock_fd)  # releases the lock

    def shutdown(self) -> None:
        self._stopping.set()

    def _loop(self) -> None:
        idle_since: float | None = None
        while not self._stopping.is_set():
            ready, _, _ = select.select([self.control], [], [], 1.0)
            if ready:
                for command in self.control.drain():
                    if command.startswith(b"adopt "):
                        self.adopt(command[len(b"adopt "):].decode("utf-8", "replace"))
            self._reap()
            if self._threads:
                idle_since = None
            elif idle_since is None:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since >= self.idle_exit_s:
                return

    # --- sessions ------------------------------------------------------------------

    def adopt(self, name: str) -> None:
        """Supervise ``name`` on a thread of its own (no-op if already)."""
        with self._lock:
            thread = self._threads.get(name)
            if thread is not None and thread.is_alive():
                return
            thread = threading.Thread(
                target=self._supervise, args=(name,), name=_THREAD_PREFIX + name, daemon=True
            )
            self._threads[name] = thread
            thread.start()

    def _supervise(self, name: str) -> None:
        registry = open_registry(self.paths)
        try:
            sup = tmux_supervisor(self.paths, name, registry)
            with self._lock:
                self._sups[name] = sup
            started = start_companions(self.companions, self.paths, name)
            try:
                sup.run()
            finally:
                for c in started:
                    c.stop()
        except AgentwrapError as exc:
            log.warning("cannot supervise %s: %s", name, exc)
        except Exception:
            log.exception("supervision of %s failed", name)
        finally:
            with self._lock:
                self._sups.pop(name, None)
            try:  # not ended but no longer supervised: let `adopt` restart it
                rec = registry.find(name)
                if rec is not None and rec.ended is None and rec.supervisor_pid == os.getpid():
                    registry.update(name, supervisor_pid=None, supervisor_start=None)
            except AgentwrapError as exc:
                log.warning("could not release %s: %s", name, exc)
            registry.close()

    def _adopt_orphans(self) -> None:
        """After a host crash: every running host-supervised session nobody supervises."""
        registry = open_registry(self.paths)
        try:
            for rec in registry.list():
                if (not registry.here(rec)  # another machine's session
                        or rec.backend != "tmux" or rec.ended is not None or rec.supervisor_alive
                        or rec.options.supervisor != "host"):
                    continue
                server = server_for(tmux_socket_of(self.paths, rec))
                if server.is_alive() and server.has_session(rec.name):
                    log.info("adopting orphaned session %s", rec.name)
                    self.adopt(rec.name)
        finally:
            registry.close()

    def _reap(self) -> None:
        with self._lock:
            for name, thread in list(self._threads.items()):
                if not thread.is_alive():
                    del self._threads[name]
                    if self.logs is not None:
                        self.logs.forget(self.paths.supervisor_log(name))

    def _stop_all(self) -> None:
        with self._lock:
            sups = list(self._sups.values())
            threads = list(self._threads.values())
        for sup in sups:
            sup.stop()
        for thread in threads:
            thread.join(timeout=5.0)


class SessionLogs(logging.Handler):
    """Each session's lines in its own log file (``logs/NAME.log``, as with a
    process per session), chosen by the thread that logs; the host's own lines
    in ``logs/host.log``. Files are 0600: log lines quote message content."""

    def __init__(self, paths: Paths) -> None:
        super().__init__()
        self.paths = paths
        self._streams: dict[Path, IO[str]] = {}
        self.setFormatter(logging.Formatter(
            "%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        thread = record.threadName or ""
        path = (self.paths.supervisor_log(thread[len(_THREAD_PREFIX):])
                if thread.startswith(_THREAD_PREFIX) else host_log(self.paths))
        try:
            stream = self._streams.get(path)
            if stream is None:
                private_dir(path.parent, repair=True)
                stream = os.fdopen(open_private_append(path), "a", encoding="utf-8", buffering=1)
                self._streams[path] = stream
            stream.write(self.format(record) + "\n")
        except Exception:  # noqa: BLE001 - logging's contract: report, never raise
            self.handleError(record)

    def forget(self, path: Path) -> None:
        """Close a session's log file once its thread has ended."""
        self.acquire()  # the handler's lock: emit() may be writing it
        try:
            stream = self._streams.pop(path, None)
        finally:
            self.release()
        if stream is not None:
            stream.close()

    def close(self) -> None:
        for stream in self._streams.values():
            stream.close()
        self._streams.clear()
        super().close()


def host_lock(paths: Paths) -> Path:
    """The lock a running host holds (exclusively) for as long as it serves."""
    return paths.runtime_dir / "host.lock"


def host_running(paths: Paths) -> bool:
    """A supervisor host serves this runtime dir now (it holds :func:`host_lock`),
    with sessions or idle, on the store it was started with (``store migrate``
    waits for it)."""
    try:
        fd = os.open(host_lock(paths), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # releases a lock taken: a host starting now is not kept out for long
    return False


#: A test-only knob: the seconds an idle host lingers instead of 30 (a test of the
#: idle exit, ``tests/test_store_migrate.py``, waits for it; a person has no reason to set it).
IDLE_EXIT_ENV = "AGENTWRAP_HOST_IDLE_EXIT_S"


def idle_exit_s(env: Mapping[str, str]) -> float:
    """:data:`IDLE_EXIT_ENV` when it is a number above 0, else the 30 s default."""
    try:
        value = float(env.get(IDLE_EXIT_ENV, ""))
    except ValueError:
        return 30.0
    return value if 0 < value < float("inf") else 30.0


def serve(paths: Paths, companions: Sequence[Companion] = ()) -> int:
    """Entry point of ``agentwrap _host``."""
    logs = SessionLogs(paths)
    logging.basicConfig(handlers=[logs], level=logging.INFO)
    return SupervisorHost(paths, idle_exit_s=idle_exit_s(os.environ), logs=logs,
                          companions=companions).serve()
