"""Where agentwrap keeps things, following the XDG base-directory spec.

All paths come from one :class:`Paths` value built from an environment
mapping, never from module globals, so tests get full isolation by passing a
temporary ``XDG_*`` environment (and with it their own tmux server, whose
socket lives in the runtime dir).

Everything agentwrap keeps is private: messages and their metadata may hold
secrets. The state and runtime dirs are created 0700 and every file in them
0600, at creation (``mkdir``/``open`` with the mode, never a chmod after the
fact), and :meth:`Paths.ensure` checks them at every start. The runtime dir may
live in the shared ``/tmp`` (no ``XDG_RUNTIME_DIR``), where another user can
create it first: like tmux, a dir that is not ours, is a symlink or is open to
others is refused, and files in it are written with :func:`write_private`
(``O_EXCL|O_NOFOLLOW``, then an atomic rename), so a planted link is never
followed.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from .errors import InvalidMessage, UnsafePath

T = TypeVar("T")

# sun_path holds 108 bytes with the NUL on Linux, 104 on the BSDs: stay below both
_SOCKET_PATH_MAX = 100

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def check_session_name(name: str) -> str:
    """Session names become file and tmux names: keep them boring."""
    if not _NAME_RE.match(name):
        raise InvalidMessage(
            f"invalid session name {name!r}",
            hint="use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
        )
    return name


@dataclass(frozen=True)
class Paths:
    config_dir: Path
    state_dir: Path
    runtime_dir: Path

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Paths:
        env = os.environ if env is None else env
        home = Path(env.get("HOME") or Path.home())
        config = Path(env.get("XDG_CONFIG_HOME") or home / ".config") / "agentwrap"
        state = Path(env.get("XDG_STATE_HOME") or home / ".local" / "state") / "agentwrap"
        if env.get("XDG_RUNTIME_DIR"):
            runtime = Path(env["XDG_RUNTIME_DIR"]) / "agentwrap"
        else:
            runtime = Path("/tmp") / f"agentwrap-{os.getuid()}"
        return cls(config_dir=config, state_dir=state, runtime_dir=runtime)

    def ensure(self) -> Paths:
        """Create the dirs, and check (and where safe repair) their privacy.

        The state dir lives in the user's home: one left 0755 by an older
        agentwrap is tightened to 0700, and the files in it to 0600. The
        runtime dir may be in the shared /tmp, so a wrong owner or mode there
        is refused, never repaired: someone else may have made it.
        """
        self.config_dir.mkdir(parents=True, exist_ok=True)
        private_dir(self.state_dir, repair=True)
        private_dir(self.logs_dir, repair=True)
        private_dir(self.runtime_dir, repair=False)
        for path in self.private_files():
            try:
                check_private_file(path, repair=True)
            except FileNotFoundError:
                pass  # gone since listed: SQLite removes -wal/-shm as the last connection closes
        return self

    def private_files(self) -> list[Path]:
        """The files of the state dir that must be 0600 (those that exist)."""
        db = self.db_path
        candidates = [db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")]
        candidates.append(self.audit_log)
        if self.logs_dir.is_dir():  # files and links, not dirs someone made in there
            candidates.extend(
                p for p in sorted(self.logs_dir.iterdir()) if p.is_symlink() or not p.is_dir()
            )
        return [p for p in candidates if os.path.lexists(p)]

    @property
    def config_file(self) -> Path:
        return self.config_dir / "config.toml"

    @property
    def user_patterns_dir(self) -> Path:
        return self.config_dir / "patterns"

    @property
    def db_path(self) -> Path:
        return self.state_dir / "agentwrap.db"

    @property
    def audit_log(self) -> Path:
        return self.state_dir / "audit.jsonl"

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def tmux_socket(self) -> Path:
        """The single tmux server agentwrap used before each session got its own
        (see :meth:`tmux_socket_for`); only sessions recorded without a socket
        of their own are looked for there."""
        return self.runtime_dir / "tmux.sock"

    @property
    def tmux_dir(self) -> Path:
        """agentwrap's own tmux servers, never the user's default one."""
        return self.runtime_dir / "tmux"

    def tmux_socket_for(self, session: str) -> Path:
        """Each session runs on a tmux server of its own, so one server crash
        (tmux 3.3a can segfault) takes one agent down, not all of them.

        A unix socket path is limited to about 100 bytes (``sun_path``): a
        name too long for this runtime dir is replaced by a digest of it.
        """
        path = self.tmux_dir / f"{session}.sock"
        if len(os.fsencode(path)) > _SOCKET_PATH_MAX:
            import hashlib  # here: every hook imports this module, and needs no digest

            digest = hashlib.sha256(session.encode("utf-8")).hexdigest()[:16]
            path = self.tmux_dir / f"{digest}.sock"
        return path

    @property
    def events_dir(self) -> Path:
        """The event bus's wake-up sockets, one per reader (see :mod:`agentwrap.events`).

        Made 0700 by the first reader (like :attr:`tmux_dir` by the first
        server), and checked by ``doctor``; writers only look into it."""
        return self.runtime_dir / "events"

    @property
    def answers_root(self) -> Path:
        """The parent of every session's answer folder (see :meth:`answers_dir`)."""
        return self.runtime_dir / "answers"

    def answers_dir(self, session: str) -> Path:
        """The session's answer folder: a JSON file dropped here answers the
        question its agent shows (:mod:`agentwrap.answers.folder`).
        0700 and ours, like the runtime dir: whoever may write into it may
        answer the agent's permission prompts."""
        return self.answers_root / check_session_name(session)

    def wake_socket(self, session: str) -> Path:
        return self.runtime_dir / f"{session}.sock"

    def supervisor_log(self, session: str) -> Path:
        return self.logs_dir / f"{session}.log"

    def started_batches(self, session: str) -> Path:
        """The batches a session's SessionStart hook handed over, in flight
        until the session's first model turn takes them
        (:mod:`agentwrap.delivery.handover`); beside the launch's other files,
        removed with them at the session's end."""
        return self.state_dir / "launch" / check_session_name(session) / "session-start.json"

    def session_started(self, session: str) -> Path:
        """Made by the agent's SessionStart hook once it has handed the queue
        over: until then the supervisor does not type (it would race the hook
        for the startup context)."""
        return self.state_dir / "launch" / check_session_name(session) / "session-start.seen"

    def feedback_memory(self, session: str) -> Path:
        """What each feedback source last told the session
        (:mod:`agentwrap.feedback.results`); here so the supervisor that records
        the session's end can remove it without knowing about feedback.
        Another host's session (``HOST/NAME``, a loop run here for it) has
        ``HOST@NAME.json``."""
        host, sep, name = session.rpartition("/")
        stem = f"{check_session_name(host)}@{check_session_name(name)}" if sep \
            else check_session_name(session)
        return self.state_dir / "feedback" / f"{stem}.json"


# --- privacy -------------------------------------------------------------------------

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def _mode(st: os.stat_result) -> str:
    return f"{stat.S_IMODE(st.st_mode):04o}"


def private_dirs(path: Path) -> Path:
    """Create ``path`` and each missing dir above it 0700; dirs that exist are
    left as they are. The one way agentwrap makes a dir for what it keeps:
    ``Path.mkdir(mode=0o700, parents=True)`` gives only the last dir that mode
    and the ones above it the umask's (0755), and a runtime dir made 0755 (by
    the library's :func:`~agentwrap.delivery.fallback.write_section`, say) is
    refused by the next command (:meth:`Paths.ensure`: another user's?)."""
    missing: list[Path] = []
    at = path
    while not os.path.lexists(at) and at != at.parent:
        missing.append(at)
        at = at.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, PRIVATE_DIR_MODE)  # the umask can only take bits away
        except FileExistsError:
            pass  # made meanwhile by another process: judged by whoever checks it
    return path


def private_dir(path: Path, *, repair: bool) -> Path:
    """Create ``path`` as a 0700 dir of ours (missing parents 0700 too), or check it.

    ``repair``: an existing dir of ours with a wider mode is tightened to 0700
    (for dirs only we can have written into); otherwise it is refused.
    """
    try:
        private_dirs(path.parent)
    except OSError as exc:
        raise UnsafePath(
            f"cannot create {path.parent}: {exc.strerror}",
            hint=f"check the permissions of the dirs above {path.parent}",
        ) from None
    try:
        os.mkdir(path, PRIVATE_DIR_MODE)  # the umask can only take bits away
    except FileExistsError:
        pass
    except OSError as exc:
        raise UnsafePath(
            f"cannot create {path}: {exc.strerror}",
            hint=f"check the permissions of {path.parent}",
        ) from None
    check_private_dir(path, repair=repair)
    return path


def check_private_dir(path: Path, *, repair: bool) -> None:
    """Refuse a dir that is a symlink, not a dir, not ours, or (unless repaired)
    open to others. ``lstat``: a symlink is judged, never followed."""
    st = os.lstat(path)
    uid = os.getuid()
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        what = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a directory"
        raise UnsafePath(
            f"{path} is {what}; agentwrap keeps private files there and will not use it",
            hint=f"remove {path} and run agentwrap again (or set XDG_RUNTIME_DIR to a dir of yours)",
        )
    if st.st_uid != uid:
        raise UnsafePath(
            f"{path} is owned by uid {st.st_uid}, not by you (uid {uid})",
            hint="someone else created it: remove it (as root) or set XDG_RUNTIME_DIR to a dir"
            " of yours",
        )
    if stat.S_IMODE(st.st_mode) & 0o077:
        if not repair:
            raise UnsafePath(
                f"{path} has mode {_mode(st)}; it must be 0700 (only you)",
                hint=f"check nothing in it is foreign, then `chmod 700 {path}` (or remove it)",
            )
        os.chmod(path, PRIVATE_DIR_MODE)


def check_private_file(path: Path, *, repair: bool) -> None:
    """A file of ours, not a symlink, readable by nobody else (0600 or stricter)."""
    st = os.lstat(path)
    uid = os.getuid()
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
        raise UnsafePath(
            f"{path} is not a regular file; agentwrap will not follow or write through it",
            hint=f"remove {path}",
        )
    if st.st_uid != uid:
        raise UnsafePath(
            f"{path} is owned by uid {st.st_uid}, not by you (uid {uid})",
            hint=f"remove it or `chown {uid} {path}` (as root)",
        )
    if stat.S_IMODE(st.st_mode) & 0o077:
        if not repair:
            raise UnsafePath(
                f"{path} has mode {_mode(st)}; it must be 0600 (only you)",
                hint=f"chmod 600 {path}",
            )
        # owner bits kept: a file made read-only on purpose stays read-only
        os.chmod(path, stat.S_IMODE(st.st_mode) & PRIVATE_DIR_MODE)


def private_problems(paths: Paths) -> list[tuple[str, str]]:
    """``(problem, fix)`` for every private dir or file with a wrong owner or
    mode, changing nothing: what ``agentwrap doctor`` reports."""
    found: list[tuple[str, str]] = []
    dirs = [paths.state_dir, paths.logs_dir, paths.runtime_dir, paths.events_dir,
            paths.answers_root]
    try:  # each session's answer folder too
        if paths.answers_root.is_dir() and not paths.answers_root.is_symlink():
            dirs.extend(sorted(paths.answers_root.iterdir()))
    except OSError:
        pass
    for d in dirs:
        if os.path.lexists(d):
            try:
                check_private_dir(d, repair=False)
            except UnsafePath as exc:
                found.append((exc.message, exc.hint))
    for f in paths.private_files():
        try:
            check_private_file(f, repair=False)
        except UnsafePath as exc:
            found.append((exc.message, exc.hint))
    return found


def create_private(path: Path) -> None:
    """Create ``path`` empty and 0600 if it does not exist; never through a symlink."""
    try:
        fd = os.open(
            path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            PRIVATE_FILE_MODE,
        )
    except FileExistsError:
        return
    os.close(fd)


def open_private_append(path: Path) -> int:
    """An fd appending to ``path``, created 0600; refuses a symlink (ELOOP)."""
    return os.open(
        path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
        PRIVATE_FILE_MODE,
    )


def write_private(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically, readable only by the user.

    The parent must be a dir of ours that nobody else may write (checked on
    the open dir, so it cannot be swapped underneath). The temporary file has
    an unguessable name and is created ``O_CREAT|O_EXCL|O_NOFOLLOW`` 0600: a
    link planted in its place makes this fail instead of writing through it;
    ``os.replace`` then swaps the name itself, never following a link at
    ``path``.
    """
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(dir_fd)
        if st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o022:
            raise UnsafePath(
                f"{path.parent} is not a private dir of yours (owner uid {st.st_uid},"
                f" mode {_mode(st)}); not writing {path.name} there",
                hint=f"remove {path.parent} and run agentwrap again",
            )
        tmp = f".{path.name}.{os.urandom(8).hex()}.tmp"  # what secrets.token_hex does
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            PRIVATE_FILE_MODE, dir_fd=dir_fd,
        )
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
            os.replace(tmp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except FileNotFoundError:
                pass
            raise
    finally:
        os.close(dir_fd)


def create_private_once(path: Path, data: bytes) -> None:
    """Make ``path`` hold ``data`` (0600) unless it exists: written whole under a
    temporary name, then linked into place, so of two processes making it at
    once one wins and both read the winner's (a secret made once: the API
    token, the answer links' key)."""
    tmp = path.with_name(f".{path.name}.{os.urandom(8).hex()}.new")
    write_private(tmp, data)
    try:
        os.link(tmp, path)  # fails if another process made it first: use theirs
    except FileExistsError:
        pass
    finally:
        tmp.unlink()


class ReplacedFile(Generic[T]):
    """What a file holds that another process (a hook) replaces whole, parsed
    again only when it was replaced (its mtime or inode changed): the
    supervisor looks at it on every turn and most turns nothing changed."""

    def __init__(self, path: Path, parse: Callable[[], T | None]) -> None:
        self.path, self.parse = path, parse
        self._key: tuple[int, int] | None = None
        self._last: T | None = None

    def read(self) -> T | None:
        """The parsed content, or None while there is no file (or it is unreadable)."""
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        key = (st.st_mtime_ns, st.st_ino)
        if key != self._key:
            self._key = key
            self._last = self.parse()
        return self._last
