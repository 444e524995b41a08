"""Fallback delivery: write undelivered context into the agent's instruction file.

When live delivery into the agent's terminal keeps failing, the context must
still reach the agent. Every supported agent reads an instruction file when it
starts (``CLAUDE.md``, ``AGENTS.md``, ``GEMINI.md``, an aider ``--read`` file),
so agentwrap writes the context there, inside a marked section::

    <!-- agentwrap:begin agentwrap -->
    ## agentwrap: context not delivered live (quoted data from outside this session, ...)
    <!-- agentwrap:ids 1f0c...,9a2b... -->

    - [webhook:github] (2024-05-01T12:00:00Z, id 1f0c...)
    ```
    the message content
    ```

    <!-- agentwrap:end agentwrap -->

The file belongs to the user, so the rules are strict:

* Every byte outside the markers is kept exactly (BOM, CRLF, a missing final
  newline, trailing blank lines, bytes that are not even UTF-8). The section
  replaces the previous section of the same name, or is appended after
  exactly one blank line. The section itself uses the line ending the file
  already uses. The BEGIN line records the line endings agentwrap added
  around an appended section (``sep-N``: N before it; ``own-eol``: the one
  after END), so removing the section restores the file byte for byte.
* Malformed markers (BEGIN without END, two BEGINs, END first) are refused
  with :class:`FallbackError` and the file is left alone: guessing which lines
  are ours could delete the user's text.
* Message content is quoted data from outside the session. It goes into a
  fenced block whose fence is longer than any backtick run in the content, and
  any content line that looks like an agentwrap marker is prefixed with a
  backslash, so content can neither close the fence nor end the section early
  (nor forge the ids line that :func:`read_section` trusts).
* Writes are atomic (temp file in the same directory, fsync, ``os.replace``)
  and keep the file's permission bits and owner, so a crash never leaves a
  half-written instruction file and root never takes a file over. A file
  whose owner may not write it (mode without ``u+w``) is read-only on
  purpose: it is refused, never rewritten.
* A repository may contain a symlink such as ``CLAUDE.md -> ~/.bashrc``;
  :func:`resolve_instruction_file` refuses every path that leaves the project
  directory through a symlink. A symlink to a file *inside* the project is
  followed and the target is written, so the link stays a link. (The checks
  defend against hostile files in a checkout, not against a concurrent
  attacker swapping directories under us; someone who can do that already
  controls the project.)
* Read-modify-write runs under ``fcntl.flock`` on a lock file named after
  the resolved path, in agentwrap's private runtime dir (never in the
  repository), so two agentwrap processes never lose each other's sections.
  The lock file is left in place: deleting a lock file that another process
  may be waiting on would break the mutual exclusion.

Created-file marker: when agentwrap creates the instruction file, the BEGIN
line carries the attribute ``created-file``
(``<!-- agentwrap:begin agentwrap created-file -->``). It survives later
rewrites of the section, and :func:`remove_section` deletes the file only when
that attribute is present and nothing but whitespace remains - a file the user
had before agentwrap is never deleted, only edited back.
"""

from __future__ import annotations

import fcntl
import hashlib
import html
import os
import re
import secrets
import shutil
import stat
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import final

from ..errors import FallbackError
from ..paths import Paths, private_dirs
from ..queue.sanitize import sanitize

BEGIN = "<!-- agentwrap:begin {section} -->"
END = "<!-- agentwrap:end {section} -->"
IDS = "<!-- agentwrap:ids {ids} -->"
CREATED_FILE_ATTR = "created-file"
OWN_EOL_ATTR = "own-eol"  # agentwrap added the line ending after END
SEP_ATTR = "sep-"  # sep-N: agentwrap added N line endings before BEGIN
DEFAULT_SECTION = "agentwrap"

_BOM = b"\xef\xbb\xbf"
# Files agentwrap must not touch: appending UTF-8 bytes would corrupt them.
_FOREIGN_BOMS = (b"\xff\xfe", b"\xfe\xff")  # UTF-16 (and UTF-32 LE, which starts the same)
_SECTION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_MESSAGE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
_BEGIN_LINE = re.compile(rb"<!-- agentwrap:begin (\S+)((?: [a-z][a-z0-9-]*)*) -->")
_END_LINE = re.compile(rb"<!-- agentwrap:end (\S+) -->")
_IDS_LINE = re.compile(r"<!-- agentwrap:ids ([^ ]*) -->")
# Anything a person, a looser parser or a later version might read as one of our
# markers; matched leniently (leading blanks, missing spaces, any case).
_MARKER_LIKE = re.compile(r"\s*<!--\s*agentwrap\s*:", re.IGNORECASE)
_SURROGATE = re.compile("[\ud800-\udfff]")
_BACKTICK_RUN = re.compile("`+")
_LABEL_UNSAFE = re.compile(r"\s+")


@dataclass(frozen=True)
class FallbackEntry:
    """One undelivered message as it is written into the section."""

    message_id: str
    label: str  # e.g. "[webhook:github]"
    created: float  # Unix time the message was queued
    content: str


@dataclass(frozen=True)
class WriteResult:
    """What :func:`write_section` did, for logs and the delivery record."""

    path: Path  # the file actually written (symlinks resolved)
    created_file: bool  # the file did not exist before
    replaced_section: bool  # an earlier section of the same name was replaced
    bytes_written: int  # size of the whole file as written
    message_ids: tuple[str, ...]


@dataclass(frozen=True)
class _Span:
    """Where a section sits in the file bytes.

    ``start`` is the first byte of the BEGIN line; ``end`` is the byte after the
    END marker text, *before* its line ending, so the ending (or its absence at
    EOF) stays outside and is kept as it was.
    """

    start: int
    end: int
    attrs: tuple[str, ...]  # from the BEGIN line: created-file, sep-N, own-eol

    @property
    def created_file(self) -> bool:
        return CREATED_FILE_ATTR in self.attrs


# --- paths --------------------------------------------------------------------


def resolve_instruction_file(project_dir: Path, filename: str) -> Path:
    """Return the real path to write for ``project_dir/filename``, or refuse.

    The result has every symlink resolved, so writing it replaces the link's
    target and leaves the link itself intact. Refused (:class:`FallbackError`):
    an absolute ``filename`` or one containing ``..``; a path where the file or
    any directory on the way is a symlink resolving outside ``project_dir``; a
    target that exists and is not a regular file. A repository checked out
    from elsewhere is untrusted input, and its ``CLAUDE.md`` may be a link to
    a file the user never meant agentwrap to write.
    """
    if not filename or "\x00" in filename:
        raise FallbackError(f"invalid instruction file name {filename!r}")
    if filename.startswith(("/", "\\")) or Path(filename).is_absolute():
        raise FallbackError(f"instruction file name must be relative to the project: {filename!r}")
    if ".." in filename:
        raise FallbackError(f"instruction file name must not contain '..': {filename!r}")
    try:
        root = project_dir.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise FallbackError(f"project directory {project_dir} is not usable: {exc}") from None
    if not root.is_dir():
        raise FallbackError(f"project directory {project_dir} is not a directory")
    parts = Path(filename).parts
    if not parts or all(p in (".", "") for p in parts):
        raise FallbackError(f"invalid instruction file name {filename!r}")

    current = root
    for part in parts:
        current = current / part
        if current.is_symlink():
            target = _resolve(current)
            if not target.is_relative_to(root):
                raise FallbackError(
                    f"refusing to write {project_dir / filename}: {current} is a symlink"
                    f" to {target}, outside the project",
                    hint="replace the symlink with a regular file, or choose another file",
                )
    real = _resolve(root / filename)
    if not real.is_relative_to(root) or real == root:
        raise FallbackError(
            f"refusing to write {project_dir / filename}: it resolves to {real},"
            " outside the project",
            hint="replace the symlink with a regular file, or choose another file",
        )
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return real
    except OSError as exc:
        raise FallbackError(f"cannot inspect {real}: {exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise FallbackError(
            f"refusing to write {project_dir / filename}: it exists and is not a regular file",
            hint="remove or rename it, or choose another instruction file",
        )
    return real


def _resolve(path: Path) -> Path:
    """``Path.resolve`` with symlink loops reported as :class:`FallbackError`."""
    try:
        return path.resolve(strict=False)
    except (OSError, RuntimeError) as exc:  # RuntimeError: symlink loop before 3.13
        raise FallbackError(f"cannot resolve {path}: {exc}") from None


# --- public operations ----------------------------------------------------------


def write_section(
    project_dir: Path,
    filename: str,
    entries: Sequence[FallbackEntry],
    *,
    section: str = DEFAULT_SECTION,
    now: float | None = None,
    lock_dir: Path | None = None,
) -> WriteResult:
    """Write ``entries`` into the section ``section`` of the instruction file.

    Replaces an existing section of that name in place, appends one otherwise,
    and creates the file (holding only the section) if it does not exist. An
    empty ``entries`` still writes the section (heading and an empty ids line),
    so "nothing pending" is visible; use :func:`remove_section` to drop it.
    """
    _check_section(section)
    ids = tuple(_check_id(e.message_id) for e in entries)
    written_at = time.time() if now is None else now
    path = resolve_instruction_file(project_dir, filename)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _Locked(path, lock_dir) as locked:
        old = locked.read()
        created = old is None
        data = b"" if old is None else old
        span = _find_section(data, section, path)
        nl = _newline_of(data)
        if span is not None and any(a.startswith(SEP_ATTR) for a in span.attrs):
            nl = _line_ending_at(data, span.start)  # its recorded separator is made of it
        if span is not None:
            body = _render(section, entries, written_at, nl, attrs=span.attrs)
            new = data[: span.start] + body + data[span.end :]
        else:
            sep = _separator(data, nl)
            attrs: tuple[str, ...] = (CREATED_FILE_ATTR,)
            if not created:  # recorded so that removal restores the file exactly
                n_sep = sep.count(b"\n")
                attrs = (f"{SEP_ATTR}{n_sep}", OWN_EOL_ATTR)
            body = _render(section, entries, written_at, nl, attrs=attrs)
            new = data + sep + body + nl
        locked.replace(new)
    return WriteResult(
        path=path,
        created_file=created,
        replaced_section=span is not None,
        bytes_written=len(new),
        message_ids=ids,
    )


def remove_section(
    project_dir: Path, filename: str, *, section: str = DEFAULT_SECTION,
    lock_dir: Path | None = None,
) -> bool:
    """Remove the section; return whether there was one.

    The blank line :func:`write_section` put in front of an appended section
    is removed with it (so append-then-remove restores a file that ended in a
    newline byte for byte). The file is deleted only if its BEGIN line says
    agentwrap created it and nothing but whitespace is left.
    """
    _check_section(section)
    path = resolve_instruction_file(project_dir, filename)
    if not path.parent.is_dir():
        return False
    with _Locked(path, lock_dir) as locked:
        data = locked.read()
        if data is None:
            return False
        span = _find_section(data, section, path)
        if span is None:
            return False
        rest = _recorded_removal(data, span)
        if rest is None:
            rest = _guessed_removal(data, span)
        if span.created_file and not rest.removeprefix(_BOM).strip():
            locked.unlink()
        else:
            locked.replace(rest)
    return True


def _recorded_removal(data: bytes, span: _Span) -> bytes | None:
    """The file without the section, undoing exactly the line endings the
    BEGIN line says agentwrap added; None if it records none (older sections)
    or the bytes around the section no longer match what it records."""
    seps = [a for a in span.attrs if a.startswith(SEP_ATTR)]
    if not seps or not seps[0][len(SEP_ATTR) :].isdigit():
        return None
    before, after = data[: span.start], data[span.end :]
    # The separator is N of the section's own line ending, byte for byte: a
    # file that ended in a lone CR reads "\r\n" where the CR meets the first
    # "\n", and taking a whole CRLF away would take the user's CR with it.
    nl = _line_ending_at(data, span.start)
    for _ in range(int(seps[0][len(SEP_ATTR) :])):
        if not before.endswith(nl):
            return None
        before = before[: -len(nl)]
    if OWN_EOL_ATTR in span.attrs:
        after = after.removeprefix(nl)
    if after and before.removeprefix(_BOM) and not _last_line_ending(before):
        # Text was added after the section and the file had no final line
        # ending: keep the two apart rather than joining two lines into one.
        after = _newline_of(data) + after
    return before + after


def _guessed_removal(data: bytes, span: _Span) -> bytes:
    """For sections written before the BEGIN line recorded its separators."""
    before = data[: span.start]
    after = _strip_line_ending(data[span.end :])
    if not after:
        if _ends_with_blank_line(before):
            before = before[: -len(_last_line_ending(before))]
    elif _ends_with_blank_line(before) or before in (b"", _BOM):
        after = after[len(_first_line_ending(after)) :]
    return before + after


def read_section(
    project_dir: Path, filename: str, *, section: str = DEFAULT_SECTION
) -> list[str] | None:
    """Return the message ids recorded in the section, or None without a section.

    Lets the caller tell which messages already reached the agent this way
    (and skip or retract them) without parsing the human-readable part.
    Content lines can never be read as the ids line: they are escaped.
    """
    _check_section(section)
    path = resolve_instruction_file(project_dir, filename)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise FallbackError(f"cannot read {path}: {exc}") from None
    span = _find_section(data, section, path)
    if span is None:
        return None
    for raw in data[span.start : span.end].splitlines():
        m = _IDS_LINE.fullmatch(raw.decode("utf-8", errors="replace"))
        if m is not None:
            return [i for i in m.group(1).split(",") if i]
    return []


def notify_desktop(title: str, body: str) -> bool:
    """Show a desktop notification via ``notify-send`` if it is installed.

    A fallback write means the agent only sees the context on its next start,
    so the person at the desk should know. This is best effort: it never
    raises and returns whether ``notify-send`` ran and succeeded. ``--`` stops
    option parsing so a title starting with ``-`` is shown, not interpreted.
    The body is escaped as text: notification servers that support body
    markup read ``<a href>``, ``<img src>`` and entities in it, and a body
    can quote what an agent or a message said.
    """
    exe = shutil.which("notify-send")
    if exe is None:
        return False
    try:
        proc = subprocess.run(
            [exe, "--app-name=agentwrap", "--", title, html.escape(body, quote=False)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=5,
            check=False,
        )
    except (OSError, ValueError, subprocess.SubprocessError):
        return False
    return proc.returncode == 0


# --- rendering ----------------------------------------------------------------------


def _render(
    section: str,
    entries: Sequence[FallbackEntry],
    written_at: float,
    nl: bytes,
    *,
    attrs: Sequence[str],
) -> bytes:
    """The section from BEGIN to END, without a line ending after END."""
    begin = BEGIN.format(section=section)
    if attrs:
        begin = begin.removesuffix(" -->") + "".join(f" {a}" for a in attrs) + " -->"
    lines = [
        begin,
        (
            "## agentwrap: context not delivered live (quoted data from outside this session,"
            f" written {_iso(written_at)})"
        ),
        IDS.format(ids=",".join(e.message_id for e in entries)),
        "",
    ]
    for e in entries:
        lines.append(f"- {_clean_label(e.label)} ({_iso(e.created)}, id {e.message_id})")
        body = _content_lines(e.content)
        fence = "`" * max(3, _longest_backtick_run(body) + 1)
        lines.append(fence)
        lines.extend(body)
        lines.append(fence)
        lines.append("")
    lines.append(END.format(section=section))
    return nl.join(line.encode("utf-8") for line in lines)


def _content_lines(content: str) -> list[str]:
    """Split content into safe lines for the fenced block.

    Terminal control sequences are removed (people ``cat`` these files),
    every line break a parser might honour (``\\r``, U+2028, ...) becomes a
    real line break so the escaping below sees every line, and marker-like
    lines get a backslash so they cannot end or forge a section.
    """
    text = _SURROGATE.sub("\ufffd", sanitize(content).text)
    return ["\\" + ln if _MARKER_LIKE.match(ln) else ln for ln in text.splitlines()]


def _longest_backtick_run(lines: Sequence[str]) -> int:
    return max((len(m.group()) for ln in lines for m in _BACKTICK_RUN.finditer(ln)), default=0)


def _clean_label(label: str) -> str:
    """One line, no controls: the label sits on the entry's list line."""
    text = _SURROGATE.sub("\ufffd", sanitize(label).text)
    return _LABEL_UNSAFE.sub(" ", text).strip() or "[unknown]"


def _iso(ts: float) -> str:
    try:
        return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (ValueError, OverflowError, OSError):
        raise FallbackError(f"invalid timestamp {ts!r}") from None


def _check_section(section: str) -> None:
    """Section names are one token, so attributes and ``-->`` cannot be smuggled in."""
    if not _SECTION_NAME.fullmatch(section):
        raise FallbackError(
            f"invalid section name {section!r}",
            hint="use letters, digits, '.', '_' and '-' (at most 64 characters)",
        )


def _check_id(message_id: str) -> str:
    """Ids go into a comma-separated comment line, so they must be plain tokens."""
    if not _MESSAGE_ID.fullmatch(message_id):
        raise FallbackError(f"invalid message id {message_id!r} for the fallback section")
    return message_id


# --- parsing the file bytes ---------------------------------------------------------


def _find_section(data: bytes, section: str, path: Path) -> _Span | None:
    """Locate the one section named ``section``; refuse anything ambiguous."""
    if data.startswith(_FOREIGN_BOMS):
        raise FallbackError(
            f"{path} is UTF-16/UTF-32 encoded; agentwrap only edits UTF-8 files",
            hint="convert the file to UTF-8, or choose another instruction file",
        )
    name = section.encode("ascii")
    begins: list[tuple[int, int, tuple[str, ...]]] = []
    ends: list[tuple[int, int]] = []
    pos = len(_BOM) if data.startswith(_BOM) else 0
    # Lines end at "\n" only (an optional "\r" before it belongs to the ending):
    # that is how the section is written, and a lone "\r" never occurs in it.
    for raw in data[pos:].split(b"\n"):
        line = raw.removesuffix(b"\r")
        m = _BEGIN_LINE.fullmatch(line)
        if m is not None and m.group(1) == name:
            attrs = tuple(a.decode("ascii") for a in m.group(2).split())
            begins.append((pos, pos + len(line), attrs))
        m = _END_LINE.fullmatch(line)
        if m is not None and m.group(1) == name:
            ends.append((pos, pos + len(line)))
        pos += len(raw) + 1
    if not begins and not ends:
        return None
    if len(begins) != 1 or len(ends) != 1 or ends[0][0] < begins[0][0]:
        raise FallbackError(
            f"{path} has malformed agentwrap markers for section {section!r}"
            f" ({len(begins)} begin, {len(ends)} end); the file was not changed",
            hint=f"edit {path} so the section has exactly one begin and one end line,"
            " or delete both",
        )
    return _Span(start=begins[0][0], end=ends[0][1], attrs=begins[0][2])


def _newline_of(data: bytes) -> bytes:
    """The file's line ending (from its first line), so the section matches it."""
    i = data.find(b"\n")
    return b"\r\n" if i > 0 and data[i - 1 : i] == b"\r" else b"\n"


def _last_line_ending(data: bytes) -> bytes:
    if data.endswith(b"\r\n"):
        return b"\r\n"
    return b"\n" if data.endswith(b"\n") else b""


def _line_ending_at(data: bytes, start: int) -> bytes:
    """The line ending of the line that begins at ``start`` (a section's BEGIN
    line: the whole section uses it)."""
    i = data.find(b"\n", start)
    return b"\r\n" if i > start and data[i - 1 : i] == b"\r" else b"\n"


def _first_line_ending(data: bytes) -> bytes:
    if data.startswith(b"\r\n"):
        return b"\r\n"
    return b"\n" if data.startswith(b"\n") else b""


def _strip_line_ending(data: bytes) -> bytes:
    """Drop the END line's own line ending (the byte(s) right after the marker)."""
    return data[len(_first_line_ending(data)) :]


def _ends_with_blank_line(data: bytes) -> bool:
    ending = _last_line_ending(data)
    return bool(ending) and bool(_last_line_ending(data[: -len(ending)]))


def _separator(data: bytes, nl: bytes) -> bytes:
    """Bytes to put between existing text and an appended section: one blank line."""
    if data in (b"", _BOM):
        return b""
    if _ends_with_blank_line(data):
        return b""
    return nl if _last_line_ending(data) else nl + nl


# --- locked, atomic file access -------------------------------------------------------


@final
class _Locked:
    """Hold the lock file and a descriptor of the directory for one read-modify-write.

    Everything is opened relative to the directory descriptor with
    ``O_NOFOLLOW``, so a symlink planted at the file name after the checks is
    replaced (``rename`` does not follow links) rather than written through.
    """

    def __init__(self, path: Path, lock_dir: Path | None = None) -> None:
        self.path = path
        self.name = path.name
        self.lock_dir = lock_dir if lock_dir is not None else default_lock_dir()
        self._dir_fd = -1
        self._lock_fd = -1

    def __enter__(self) -> _Locked:
        try:
            private_dirs(self.lock_dir)
            self._dir_fd = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
            self._lock_fd = os.open(
                self.lock_dir / lock_name(self.path),
                os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
            )
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        except OSError as exc:
            self._close()
            raise FallbackError(f"cannot lock {self.path} for writing: {exc}") from None
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._close()

    def _close(self) -> None:
        # Closing the lock descriptor releases the flock.
        for fd in (self._lock_fd, self._dir_fd):
            if fd >= 0:
                os.close(fd)
        self._lock_fd = self._dir_fd = -1

    def read(self) -> bytes | None:
        """The file's bytes, or None if it does not exist."""
        try:
            fd = os.open(self.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self._dir_fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise FallbackError(f"cannot read {self.path}: {exc}") from None
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise FallbackError(f"refusing to edit {self.path}: not a regular file")
            return f.read()

    def replace(self, data: bytes) -> None:
        """Atomically make the file hold ``data``, keeping its mode and owner."""
        try:
            st: os.stat_result | None = os.stat(
                self.name, dir_fd=self._dir_fd, follow_symlinks=False
            )
        except FileNotFoundError:
            st = None  # new file: 0o666 minus the umask, like any editor
        except OSError as exc:
            raise FallbackError(f"cannot inspect {self.path}: {exc}") from None
        mode = None if st is None else stat.S_IMODE(st.st_mode)
        if mode is not None and not mode & stat.S_IWUSR:
            raise FallbackError(
                f"refusing to change {self.path}: it is read-only (mode {mode:o})",
                hint=f"make it writable (chmod u+w {self.path}) if agentwrap may add"
                " its section, or choose another instruction file",
            )
        tmp = f".{self.name}.agentwrap.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        try:
            fd = os.open(
                tmp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600 if mode is not None else 0o666,
                dir_fd=self._dir_fd,
            )
        except OSError as exc:
            raise FallbackError(f"cannot write next to {self.path}: {exc}") from None
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                if st is not None:
                    _keep_owner(f.fileno(), st, self.path)
                    os.fchmod(f.fileno(), stat.S_IMODE(st.st_mode))
                os.fsync(f.fileno())
            os.replace(tmp, self.name, src_dir_fd=self._dir_fd, dst_dir_fd=self._dir_fd)
        except (OSError, FallbackError) as exc:
            try:
                os.unlink(tmp, dir_fd=self._dir_fd)
            except OSError:
                pass
            if isinstance(exc, FallbackError):
                raise
            raise FallbackError(f"cannot write {self.path}: {exc}") from None
        self._sync_dir()

    def unlink(self) -> None:
        try:
            os.unlink(self.name, dir_fd=self._dir_fd)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise FallbackError(f"cannot delete {self.path}: {exc}") from None
        self._sync_dir()

    def _sync_dir(self) -> None:
        """Persist the rename itself; some file systems refuse, which is harmless."""
        try:
            os.fsync(self._dir_fd)
        except OSError:
            pass


def context_file(state_dir: Path, session: str, filename: str) -> Path:
    """The agentwrap-owned file a profile with ``context_file_arg`` reads:
    private to the user, one per session name."""
    return state_dir / "context" / session / Path(filename).name


def prepare_context_file(path: Path) -> Path:
    """Create the file (empty, 0600, its dir 0700) if missing, never through
    a symlink, so the agent can be pointed at it before anything is written."""
    private_dirs(path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise FallbackError(f"cannot create {path}: {exc}") from None
    os.close(fd)
    return path


def default_lock_dir() -> Path:
    """Where fallback locks live unless the caller says: the runtime dir."""
    return Paths.from_env().runtime_dir / "locks"


def lock_name(path: Path) -> str:
    """One lock per resolved instruction file, whoever names it how."""
    digest = hashlib.sha256(os.fsencode(path)).hexdigest()[:32]
    return f"fallback-{digest}.lock"


def _keep_owner(fd: int, st: os.stat_result, path: Path) -> None:
    """Give the replacement the owner of the file it replaces, or refuse:
    a rename by another user (root) would silently take the file over."""
    if (st.st_uid, st.st_gid) == (os.geteuid(), os.getegid()):
        return
    try:
        os.fchown(fd, st.st_uid, st.st_gid)
    except OSError as exc:
        raise FallbackError(
            f"refusing to change {path}: it belongs to uid {st.st_uid} and"
            f" the rewritten file could not keep that owner ({exc.strerror})",
            hint="run agentwrap as the file's owner, or choose another instruction file",
        ) from None
