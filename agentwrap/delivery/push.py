"""Sending notices to push services through Apprise, never on the supervisor's time.

``[notify] urls`` are Apprise URLs (``ntfy://``, ``tgram://``, ``slack://``,
``mailto://``, ...): a maintained library speaks each service's protocol, so
none is hand-written here. Apprise is imported only when URLs are configured.

Each URL has a worker thread of its own and a bounded queue: :meth:`Push.send`
only queues (a full queue drops the notice, logged), so a slow or dead service
never delays delivery, nor another service. A send is bounded in time
(``send_timeout_s``: the connect and read timeouts of Apprise's plugin); one
that fails is tried again after :data:`RETRY_S` (each service separately: a
retry never doubles a notice on a service that took it), then given up, logged.
Every log line goes through :class:`~.notices.Scrub`: a URL's secrets (a token,
a password) never reach a log, whatever Apprise or the service says.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..config import NotifyConfig
from ..errors import ConfigError
from .notices import Notice, Notices, Scrub, redact

log = logging.getLogger("agentwrap.push")

RETRY_S = (2.0, 10.0, 60.0)  # after each failed try; then the notice is given up
MAX_QUEUED = 256  # notices waiting for one service; more are dropped (logged)


@dataclass
class _Job:
    notice: Notice
    tries: int = 0


class _Target:
    """One URL: its Apprise object and the worker thread that sends to it."""

    def __init__(self, url: str, index: int, timeout_s: float, scrub: Scrub,
                 done: Callable[[str, Notice, bool], None]) -> None:
        import apprise

        self.name = f"{index}:{redact(url)}"  # what the logs call it
        self.apprise = apprise.Apprise()
        plugin = apprise.Apprise.instantiate(url)
        if plugin is None:
            raise ConfigError(f"notify.urls[{index}]: {redact(url)} is not a URL Apprise knows",
                              hint="see https://github.com/caronc/apprise/wiki for the schemes")
        for attr in ("socket_connect_timeout", "socket_read_timeout", "timeout"):
            if hasattr(plugin, attr):
                setattr(plugin, attr, timeout_s)
        # Apprise spaces a plugin's requests (ntfy: 5 s) by sleeping in the sender; one
        # question's notice must not wait for the last one's. One worker per URL already
        # sends one request at a time, and a retry waits RETRY_S.
        if hasattr(plugin, "request_rate_per_sec"):
            plugin.request_rate_per_sec = 0
        self.apprise.add(plugin)
        self.format = apprise.NotifyFormat.TEXT
        self.scrub = scrub
        self.done = done
        self._heap: list[tuple[float, int, _Job]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self.busy = False
        self.thread = threading.Thread(target=self._run, name=f"agentwrap-push-{index}",
                                       daemon=True)
        self.thread.start()

    def put(self, notice: Notice) -> bool:
        with self._cond:
            if len(self._heap) >= MAX_QUEUED:
                log.warning("push %s: %d notices queued; dropping one for %s", self.name,
                            len(self._heap), notice.session)
                return False
            heapq.heappush(self._heap, (time.monotonic(), next(self._seq), _Job(notice)))
            self._cond.notify()
        return True

    def idle(self) -> bool:
        with self._cond:
            return not self._heap and not self.busy

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._heap or self._heap[0][0] > time.monotonic():
                    self._cond.wait(None if not self._heap
                                    else max(0.0, self._heap[0][0] - time.monotonic()))
                _, _, job = heapq.heappop(self._heap)
                self.busy = True
            try:
                ok = self._send(job.notice)
            finally:
                with self._cond:
                    self.busy = False
            if ok:
                self.done(self.name, job.notice, True)
                continue
            job.tries += 1
            if job.tries > len(RETRY_S):
                log.warning("push %s: gave up on the notice for %s after %d tries", self.name,
                            job.notice.session, job.tries)
                self.done(self.name, job.notice, False)
                continue
            with self._cond:
                heapq.heappush(self._heap, (time.monotonic() + RETRY_S[job.tries - 1],
                                            next(self._seq), job))
                self._cond.notify()

    def _send(self, notice: Notice) -> bool:
        try:
            return bool(self.apprise.notify(body=notice.body, title=notice.title,
                                            body_format=self.format))
        except Exception as exc:  # noqa: BLE001 - a service's failure is logged, never the supervisor's end
            log.warning("push %s: %s", self.name, self.scrub.clean(f"{type(exc).__name__}: {exc}"))
            return False


class Push:
    """The push services of ``[notify] urls``: :meth:`send` queues a notice for
    each and returns at once."""

    def __init__(self, urls: Sequence[str], *, timeout_s: float = 10.0) -> None:
        self.scrub = Scrub(urls)
        for name in ("apprise", "agentwrap.push", "agentwrap.notices"):
            logger = logging.getLogger(name)
            if not any(isinstance(f, Scrub) and f.secrets == self.scrub.secrets
                       for f in logger.filters):
                logger.addFilter(self.scrub)
        self.delivered: list[tuple[str, str, bool]] = []  # (target, key, ok): tests and doctor
        self._lock = threading.Lock()
        self.targets = [_Target(u, i, timeout_s, self.scrub, self._done)
                        for i, u in enumerate(urls)]

    def send(self, notice: Notice) -> bool:
        """Queue ``notice`` for every service; False if none took it."""
        return any([t.put(notice) for t in self.targets])

    def idle(self) -> bool:
        """Nothing queued, nothing being sent (tests, the benchmark)."""
        return all(t.idle() for t in self.targets)

    def _done(self, target: str, notice: Notice, ok: bool) -> None:
        with self._lock:
            self.delivered.append((target, notice.key, ok))
            del self.delivered[:-1000]


_pushers: dict[tuple[tuple[str, ...], float], Push] = {}
_pushers_lock = threading.Lock()


def notices_of(cfg: NotifyConfig) -> Notices:
    """The channels ``cfg`` names; the push worker is one per process and set of
    URLs (a host supervisor's sessions share it), made, and Apprise imported,
    only when ``[notify] urls`` is set."""
    if not cfg.urls:
        return Notices(cfg, push=None)
    key = (tuple(cfg.urls), cfg.send_timeout_s)
    with _pushers_lock:
        found = _pushers.get(key)
        if found is None:
            found = _pushers[key] = Push(cfg.urls, timeout_s=cfg.send_timeout_s)
    return Notices(cfg, push=found)


def check_urls(urls: Sequence[str]) -> list[dict[str, Any]]:
    """Each URL as ``doctor`` shows it (redacted) and whether Apprise knows it."""
    import apprise

    return [{"url": redact(u), "known": apprise.Apprise.instantiate(u) is not None}
            for u in urls]


__all__ = ["MAX_QUEUED", "RETRY_S", "Push", "check_urls", "notices_of"]
