"""Telling the person that an agent waits for them, and again if nobody answers.

The ``session.waiting_input`` event (with the parsed question) reaches every
surface that listens: the API's streams, the dashboard's toast. The person may
be in none of them, so the supervisor also tells them where they are, once per
question (a question's id comes from its content: the cursor moving is not a
new question, nor is a repaint), and again every ``renotify_after_s`` while it
stays open:

* a message on the tmux status line of any attached client;
* the channels of :class:`~agentwrap.delivery.notices.Notices`: a desktop
  notification (``notify-send``), where there is one, and the push services of
  ``[notify] urls`` (Apprise: ntfy, Telegram, Slack, e-mail, ...), with which
  session on which host, what it asks (the exact command, the options), since
  when, and the links that answer it when one-tap links are wired in;
* the user's own command, ``[notify] on_waiting_input``, with the question as
  JSON on stdin and ``AGENTWRAP_SESSION`` / ``AGENTWRAP_QUESTION_ID`` in its
  environment: a phone push, a chat message, a sound. It is split into words
  like a shell line but never run by a shell, runs detached from the
  supervisor (a slow command never delays delivery) and is killed after
  :data:`COMMAND_TIMEOUT_S`.

Every telling is a line in the audit log. Nothing here answers anything.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import subprocess
import threading
import time
from collections.abc import Callable

from ..audit import AuditLog
from ..config import NotifyConfig
from ..delivery.fallback import notify_desktop
from ..delivery.notices import NO_LINKS, AnswerLinks, Notices, waiting_notice
from ..detect.question import Question
from ..errors import AgentwrapError
from ..hook_wire import SESSION_ENV

log = logging.getLogger("agentwrap.telling")

COMMAND_TIMEOUT_S = 30.0


def summary(q: Question) -> str:
    """One line a person reads at a glance: what is asked, about what."""
    asked = q.questions[0].question if q.questions else q.title
    about = " ".join(x for x in (q.tool or "", q.command or "") if x)
    return f"{asked} [{about}]" if about else asked


class Teller:
    """Tells about the open question of one session; :meth:`update` on every verdict."""

    def __init__(
        self, session: str, config: NotifyConfig, audit: AuditLog, *,
        display: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        notices: Notices | None = None, host: str = "", links: AnswerLinks = NO_LINKS,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.session = session
        self.config = config
        self.audit = audit
        self.display = display
        self.clock = clock
        self.wall = wall
        self.notices = notices if notices is not None else Notices(config, push=None)
        self.host = host
        self.links = links
        self._open: str | None = None  # the id of the question told about
        self._told_at = 0.0
        self._since = 0.0  # wall-clock time the open question appeared
        self.told = 0  # how many times, for tests and `doctor`

    def update(self, question: Question | None, note: str = "") -> None:
        """The question on screen now (None: the agent asks nothing). ``note``:
        why no rule answered it (the answer policy vetoed or left it), told along."""
        if question is None:
            self._open = None  # it closed: the same question asked again is a new one
            return
        now = self.clock()
        if question.id != self._open:
            self._open, self._told_at, self._since = question.id, now, self.wall()
            self._tell(question, again=False, note=note)
        elif self.config.renotify_after_s > 0 and now - self._told_at >= self.config.renotify_after_s:
            self._told_at = now
            self._tell(question, again=True, note=note)

    def announce(self, line: str) -> None:
        """Tell the person something an answer rule did (an automatic answer), where
        they would hear of a question: the tmux status line and the desktop."""
        if self.config.tmux_message and self.display is not None:
            try:
                self.display(line)
            except (OSError, AgentwrapError) as exc:
                log.debug("tmux message failed: %s", exc)
        if self.notices.desktop:
            notify_desktop(f"{self.session}: answered automatically", line)

    def _tell(self, q: Question, *, again: bool, note: str = "") -> None:
        self.told += 1
        line = f"agentwrap: {self.session} waits for you: {summary(q)}"
        if note:
            line += f" ({note})"
        channels: list[str] = []
        if self.config.tmux_message and self.display is not None:
            try:
                self.display(line)
                channels.append("tmux")
            except (OSError, AgentwrapError) as exc:  # a courtesy, never a failure
                log.debug("tmux message failed: %s", exc)
        channels += self.notices.tell(waiting_notice(
            self.session, self.host, q, self._since, again=again, note=note, links=self.links))
        if self.config.on_waiting_input and self._run_command(q, again=again):
            channels.append("command")
        self.audit.write(event="told_waiting", session=self.session, question=q.id,
                         again=again, channels=channels)

    def _run_command(self, q: Question, *, again: bool) -> bool:
        argv = shlex.split(self.config.on_waiting_input)
        env = {**os.environ, SESSION_ENV: self.session, "AGENTWRAP_QUESTION_ID": q.id,
               "AGENTWRAP_RENOTIFY": "1" if again else "0"}
        payload = json.dumps({"session": self.session, "again": again, "question": q.to_json()})
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, env=env, start_new_session=True,
            )
        except OSError as exc:
            log.warning("on_waiting_input %r did not start: %s", argv[0] if argv else "", exc)
            return False
        threading.Thread(target=_feed_and_reap, args=(proc, payload), daemon=True,
                         name=f"notify-{self.session}").start()
        return True


def _feed_and_reap(proc: subprocess.Popen[bytes], payload: str) -> None:
    try:
        proc.communicate(payload.encode("utf-8"), timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    except OSError:  # it closed stdin early: its business
        proc.wait()
