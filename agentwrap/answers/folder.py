"""The answer folder: a JSON file dropped in it answers the question the agent shows.

The file contract of the container-agent design: whoever can write into the
session's folder (``agentwrap state NAME --json`` gives it as ``answer_dir``;
``$XDG_RUNTIME_DIR/agentwrap/answers/NAME``, 0700, ours) can answer without a
CLI, a socket or a token: a sidecar, a mounted volume, a phone's sync client.

The file (``*.json``, UTF-8, at most :data:`MAX_BYTES`)::

    {"questionId": "3f2a9c0d1b7e", "answers": {"option": 2}}
    {"answers": {"option": "Yes, and don't ask again"}}
    {"answers": {"deny": true}}
    {"answers": {"text": "Use SQLite, in memory"}}
    {"answers": {"options": [1, "Metrics"]}}
    {"answers": {"questions": {"Database": "SQLite", "Features": ["Search", 3]}}}

``answers`` holds exactly one of ``option`` (the number shown, or a label:
exact, then a case-insensitive unique prefix), ``options`` (a multi-select
question: the options to tick, numbers or labels), ``questions`` (a dialog of
several questions: each question's header or number -> its option, or a list
of options where it is multi-select; like ``agentwrap answer --answer``),
``deny`` (true: the dialog's own way to say no, usually Esc) or ``text`` (free
text, where the question offers it). ``questionId`` (``agentwrap state NAME --json``: ``question.id``)
is optional but recommended: with it, an answer meant for a question the agent
no longer asks is refused (``StaleAnswer``) instead of answering the next one.
No other keys are taken: a typo must not go unnoticed.

Write it atomically: to a temporary name first (a dot file, or any name not
ending in ``.json``), then rename it to ``NAME.json``. A file written in place
is read once it is closed; one moved in from another folder, copied or linked
is read at once. Inotify reports a file moved in from an unwatched folder as
*created*, like one being written, and no close follows: so a created file is
taken as complete when no process holds it open for writing (Linux cannot
grant a read lease then: :func:`_held_open`). Each file is checked by the same rules as
``agentwrap answer`` (:mod:`agentwrap.answers.intake`), then
**removed**; the answer's outcome is on the event stream
(``session.answered``, source ``file``) and in the audit log. A file that is
refused is moved aside to ``NAME.json.rejected``, with ``NAME.json.error``
next to it: one line of JSON, ``{"error": "StaleAnswer", "message": ...,
"hint": ...}``. Nothing is typed for it.

Watched with inotify (watchdog, one observer thread per process): a rename
into the folder or a file closed after writing wakes the session's supervisor
through its wake socket, and the supervisor takes the file on its own thread,
where it reads the screen: picked up in milliseconds. The folder is also
looked at every :data:`RESCAN_S` on the supervisor's ticks, as a safety net
(an event lost to a full inotify queue, a writer's close that never came), and
only on those ticks where inotify cannot be had (watch limit reached).
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import signal
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver, ObservedWatch

from ..audit import AuditLog
from ..datagram import wake
from ..errors import AgentwrapError, InvalidAnswer, StoreError, UnsafePath
from ..paths import Paths, private_dir, write_private
from .intake import AnswerIntake, AnswerResult

log = logging.getLogger("agentwrap.answer_folder")

MAX_BYTES = 64 * 1024
SUFFIX = ".json"
REJECTED, ERROR = ".rejected", ".error"
_TOP_KEYS = frozenset({"questionId", "answers"})
_ANSWER_KEYS = ("option", "options", "questions", "text", "deny")
_KNOWN = ", ".join(_ANSWER_KEYS)
#: The folder is looked at this often without an event (a lost one never leaves a file).
RESCAN_S = 2.0
#: Where leases cannot tell (another file system): a file created in place is
#: taken once its size and time have not changed for this long.
SETTLE_S = 5.0


@dataclass(frozen=True)
class FileAnswer:
    """An answer file, parsed and checked for shape (the rules come later, in the intake)."""

    answers: dict[str, Any]
    question_id: str | None = None


def parse(data: bytes) -> FileAnswer:
    """The answer in a file's bytes, or :class:`InvalidAnswer` saying what is wrong."""
    if len(data) > MAX_BYTES:
        raise InvalidAnswer(f"the file has {len(data)} bytes; an answer file holds at most"
                            f" {MAX_BYTES}")
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidAnswer(f"not a JSON document: {exc}",
                            hint='write e.g. {"answers": {"option": 1}}') from None
    if not isinstance(doc, dict):
        raise InvalidAnswer("the file must hold a JSON object",
                            hint='write e.g. {"answers": {"option": 1}}')
    unknown = sorted(set(doc) - _TOP_KEYS)
    if unknown:
        raise InvalidAnswer(f"unknown key {unknown[0]!r} (known: questionId, answers)")
    qid = doc.get("questionId")
    if qid is not None and (not isinstance(qid, str) or not qid.strip()):
        raise InvalidAnswer(f"questionId must be the question's id (a string), not {qid!r}",
                            hint="`agentwrap state NAME --json` shows question.id")
    answers = doc.get("answers")
    if not isinstance(answers, dict):
        raise InvalidAnswer('the file needs "answers": an object such as {"option": 1},'
                            ' {"deny": true} or {"text": "..."}')
    unknown = sorted(set(answers) - set(_ANSWER_KEYS))
    if unknown:
        raise InvalidAnswer(f"unknown answer {unknown[0]!r} (one of: {_KNOWN})")
    if len(answers) != 1:
        raise InvalidAnswer(f"answers holds exactly one of: {_KNOWN}")
    ((key, value),) = answers.items()
    if key == "option" and (isinstance(value, bool) or not isinstance(value, (int, str))):
        raise InvalidAnswer(f"option is a number or a label, not {value!r}")
    if key == "options" and not _choices(value):
        raise InvalidAnswer(f"options is a list of numbers or labels, not {value!r}")
    if key == "questions" and not (isinstance(value, dict) and value and all(
            isinstance(k, str) and (_choices(v) or _choices([v])) for k, v in value.items())):
        raise InvalidAnswer(f"questions maps each question (its header or number) to an option"
                            f" or a list of options, not {value!r}",
                            hint='e.g. {"questions": {"Database": "SQLite", "Features": [1, 3]}}')
    if key == "text" and not isinstance(value, str):
        raise InvalidAnswer(f"text is a string, not {value!r}")
    if key == "deny" and value is not True:
        raise InvalidAnswer(f"deny must be true, not {value!r}",
                            hint="to say yes, pick the option: {\"option\": 1}")
    return FileAnswer(dict(answers), qid.strip() if isinstance(qid, str) else None)


def _choices(value: Any) -> bool:
    """A non-empty list of option numbers or labels."""
    return isinstance(value, list) and bool(value) and all(
        isinstance(v, (int, str)) and not isinstance(v, bool) for v in value)


def is_answer_file(name: str) -> bool:
    """``NAME.json``: not a dot file (a writer's temporary), not one moved aside."""
    return name.endswith(SUFFIX) and not name.startswith(".") and len(name) > len(SUFFIX)


# --- watching ----------------------------------------------------------------------------

_observer_lock = threading.Lock()
_observers: list[BaseObserver] = []  # at most one, alive


def _shared_observer() -> BaseObserver:
    """One inotify observer thread for every folder of this process (the host
    supervises many sessions: a thread each would be waste)."""
    with _observer_lock:
        if not _observers or not _observers[0].is_alive():
            observer = Observer()
            observer.daemon = True
            observer.name = "answer-folders"
            observer.start()
            _observers[:] = [observer]
        return _observers[0]


class _Handler(FileSystemEventHandler):
    """Runs on the observer's thread: notes what is being written, pokes the folder."""

    def __init__(self, folder: AnswerFolder) -> None:
        self.folder = folder

    @staticmethod
    def _name(path: str | bytes) -> str:
        name = os.path.basename(os.fsdecode(path))
        return name if is_answer_file(name) else ""

    def on_created(self, event: FileSystemEvent) -> None:  # written in place, or moved in
        if name := self._name(event.src_path):
            try:  # a symlink or a hard link is complete (and never closed after writing)
                st = os.lstat(event.src_path)
                # moved in from elsewhere (no close will come): complete, unless still
                # open for writing; empty, it may be a writer's open not yet counted
                writing = stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and (
                    st.st_size == 0 or _held_open(os.fsdecode(event.src_path)) is not False)
            except OSError:
                writing = False
            self.folder._writing(name, writing)
            if not writing:
                self.folder._poke()

    def on_closed(self, event: FileSystemEvent) -> None:  # ... now it is complete
        if name := self._name(event.src_path):
            self.folder._writing(name, False)
            self.folder._poke()

    def on_moved(self, event: FileSystemEvent) -> None:  # the atomic writer's rename
        if name := self._name(event.dest_path):
            self.folder._writing(name, False)
            self.folder._poke()

    def on_deleted(self, event: FileSystemEvent) -> None:
        if name := self._name(event.src_path):
            self.folder._writing(name, False)


class AnswerFolder:
    """The answer folder of one session, taken from on its supervisor's thread."""

    def __init__(self, paths: Paths, session: str, intake: AnswerIntake, audit: AuditLog) -> None:
        self.paths = paths
        self.session = session
        self.path = paths.answers_dir(session)
        self.intake = intake
        self.audit = audit
        self._due = threading.Event()  # set by the watcher (another thread), taken by step()
        self._watch: ObservedWatch | None = None
        self._open_files: set[str] = set()  # created in place and not yet closed
        self._seen: dict[str, tuple[tuple[int, int], float]] = {}  # (size, mtime), since
        self._next_scan = 0.0  # monotonic: the safety net's next look
        self._lock = threading.Lock()
        self.watched = False  # False: inotify failed; the supervisor's ticks look instead

    def open(self) -> AnswerFolder:
        """Make the folder (0700, ours: checked like the runtime dir) and watch it;
        a file left from before is taken on the first :meth:`step`."""
        private_dir(self.paths.answers_root, repair=False)
        private_dir(self.path, repair=False)
        try:
            self._watch = _shared_observer().schedule(_Handler(self), str(self.path))
            self.watched = True
        except OSError as exc:  # inotify watch or instance limit: ticks look instead
            log.warning("cannot watch %s (%s); answer files are looked for on each tick",
                        self.path, exc)
        self._due.set()
        return self

    def _writing(self, name: str, still: bool) -> None:
        with self._lock:
            if still:
                self._open_files.add(name)
            else:
                self._open_files.discard(name)

    def _poke(self) -> None:
        self._due.set()
        wake(self.paths, self.session)  # the supervisor's loop wakes and calls step()

    def close(self) -> None:
        if self._watch is not None:
            try:
                _shared_observer().unschedule(self._watch)
            except (KeyError, OSError):
                pass
            self._watch = None

    def step(self) -> list[tuple[str, AnswerResult | AgentwrapError]]:
        """Take every answer file waiting, oldest first: each is handed to the
        intake, then removed (or moved aside with its error). What happened to
        each, by file name."""
        now = time.monotonic()
        if self.watched and not self._due.is_set() and now < self._next_scan:
            return []
        self._due.clear()
        self._next_scan = now + RESCAN_S
        writing = self._still_writing(now)
        try:
            entries = [e for e in os.scandir(self.path)
                       if is_answer_file(e.name) and e.name not in writing
                       and not e.is_dir(follow_symlinks=False)]
        except OSError as exc:
            log.warning("cannot list %s: %s", self.path, exc)
            return []
        done: list[tuple[str, AnswerResult | AgentwrapError]] = []
        for entry in sorted(entries, key=lambda e: (e.stat(follow_symlinks=False).st_mtime_ns,
                                                     e.name)):
            done.append((entry.name, self._take(Path(entry.path))))
        return done

    def _still_writing(self, now: float) -> set[str]:
        """The files created in place that a process still writes: one no
        process holds open for writing any more is complete, whether its
        close was seen or not (a file moved in, a lost event)."""
        with self._lock:
            names = set(self._open_files)
        still = set()
        for name in names:
            path = self.path / name
            held = _held_open(str(path))
            if held is None:  # no lease here (or gone): unchanged for SETTLE_S
                try:
                    st = os.lstat(path)
                except OSError:
                    held = False
                else:
                    sig = (st.st_size, st.st_mtime_ns)
                    before, since = self._seen.get(name, (None, now))
                    self._seen[name] = (sig, since if before == sig else now)
                    held = before != sig or now - since < SETTLE_S
            if held:
                still.add(name)
            else:
                self._writing(name, False)
                self._seen.pop(name, None)
        return still

    def _take(self, path: Path) -> AnswerResult | AgentwrapError:
        try:
            found = parse(_read(path))
            result = self.intake.answer(self.session, question_id=found.question_id,
                                        source="file", **_arguments(found))
        except StoreError as exc:  # the store, not the file: kept, taken on the next turn
            log.warning("answer file %s kept for later: %s", path.name, exc.message)
            self._due.set()
            return exc
        except AgentwrapError as exc:
            self._reject(path, exc)
            return exc
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        log.info("answer file %s: answer %s to question %s", path.name, result.answer.id,
                 result.question.id)
        return result

    def _reject(self, path: Path, exc: AgentwrapError) -> None:
        log.info("answer file %s refused: %s", path.name, exc.message)
        error = {"error": type(exc).__name__, "message": exc.message, "hint": exc.hint}
        try:
            os.replace(path, path.with_name(path.name + REJECTED))
        except OSError:
            try:  # never take the same file again
                path.unlink()
            except OSError as gone:
                log.warning("cannot move %s aside: %s", path, gone)
        try:
            write_private(path.with_name(path.name + ERROR),
                          (json.dumps(error, ensure_ascii=False) + "\n").encode("utf-8"))
        except (OSError, UnsafePath) as failed:
            log.warning("cannot write the error next to %s: %s", path, failed)
        self.audit.write(event="answer_file_rejected", session=self.session, file=path.name,
                         error=type(exc).__name__)


def _arguments(found: FileAnswer) -> dict[str, Any]:
    """The intake's keyword for the file's one answer."""
    ((key, value),) = found.answers.items()
    if key == "questions":
        return {"answers": value}
    return {key: True if key == "deny" else value}


def _held_open(path: str) -> bool | None:
    """Whether some process has the file open for writing: Linux grants no
    read lease on such a file (EAGAIN). None where that cannot be told (a file
    system without leases, a file not ours, gone). The lease lives for two
    system calls; a writer opening the file meanwhile breaks it with SIGURG,
    which is ignored, instead of the default SIGIO, which would end the process."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.fcntl(fd, fcntl.F_SETSIG, signal.SIGURG)
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)
    except OSError as exc:
        return True if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK) else None
    else:
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
        return False
    finally:
        os.close(fd)


def _read(path: Path) -> bytes:
    """The file's bytes: a regular file of ours, never through a symlink, not too big."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise UnsafePath(f"cannot open {path.name}: {exc.strerror} (a symlink is never"
                         " followed)", hint="write a regular file and rename it into place"
                         ) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            raise UnsafePath(f"{path.name} is not a regular file of yours",
                             hint="write a regular file and rename it into place")
        if st.st_size > MAX_BYTES:
            raise InvalidAnswer(f"the file has {st.st_size} bytes; an answer file holds at"
                                f" most {MAX_BYTES}")
        chunks = []
        while chunk := os.read(fd, MAX_BYTES + 1):
            chunks.append(chunk)
            if sum(map(len, chunks)) > MAX_BYTES:
                break
        return b"".join(chunks)
    finally:
        os.close(fd)
