"""What a conversation is made of, and the one protocol every agent's reader keeps.

The page and ``agentwrap history --conversation`` show the whole conversation
of a session (issue 42): the person's prompts, the messages agentwrap
delivered (where they landed, with their ACK), the agent's replies, its tool
calls, its questions and their answers. Each agent offers its own best source
(Claude Code's transcript file, what its hooks said at a turn's end, the
screen as the last resort); an agent's module names its reader in its
:class:`~agentwrap.agents.base.Agent` record (``conversation``), and
:mod:`agentwrap.service.conversation` asks the table, never an agent by name.

Transcripts are hostile input (a model writes most of them, and a hook
payload names the file): a reader gets only a :class:`Query` and reads only
through :func:`tail_lines` (a regular file, no symlink followed at the last
step, at most :data:`MAX_TRANSCRIPT_BYTES` from its end, lines bounded) or,
for a record that is one JSON document, :func:`read_whole` (the same bound,
checked before a byte is parsed: a bigger file is refused, not cut), and
each reader checks that the file is inside its agent's own transcript folder
for the session's project before it opens it (:func:`hinted_in`,
:func:`newest`). Text is kept as text: nothing
here is markup, and every entry's text is cut to :data:`MAX_ENTRY_CHARS`.

Pure data and stdlib only, like the rest of this package.
"""

from __future__ import annotations

import enum
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

#: Most of a transcript read, from its end (a long session keeps its last turns).
MAX_TRANSCRIPT_BYTES = 4 * 1024 * 1024
#: A longer line (one huge tool result) is skipped, not parsed.
MAX_LINE_BYTES = 512 * 1024
#: Most characters of one entry's text kept.
MAX_ENTRY_CHARS = 20_000


class EntryKind(enum.StrEnum):
    """What one entry of a conversation is."""

    PROMPT = "prompt"  # the person's own words, typed into the agent
    MESSAGE = "message"  # a message agentwrap delivered (its id, status, ACK)
    REPLY = "reply"  # the agent's words
    TOOL = "tool"  # a tool call the agent made (its command or path)
    QUESTION = "question"  # the agent asked (a dialog, a permission)
    ANSWER = "answer"  # the answer given to a question


@dataclass(frozen=True)
class Entry:
    """One entry of a conversation, in order by ``at`` (seconds since the epoch).

    ``source``: where it was read (``transcript``, ``hook``, ``screen``,
    ``queue``). ``tool``/``target``: a tool call's name and its command or
    path. ``message_id``/``status``/``acked``: a delivered message's id, its
    status and whether its ACK came (None: no ACK asked)."""

    kind: EntryKind
    at: float
    text: str
    source: str
    tool: str = ""
    target: str = ""
    message_id: str = ""
    status: str = ""
    acked: bool | None = None
    channel: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "at": self.at, "text": self.text, "source": self.source,
                "tool": self.tool, "target": self.target, "messageId": self.message_id,
                "status": self.status, "acked": self.acked, "channel": self.channel}


@dataclass(frozen=True)
class Query:
    """What a reader is given about the session whose conversation is read:
    its project folder, when it started, and the transcript a hook named
    (``hinted``: from a payload, so checked by the reader before use);
    ``launch_dir``: the folder of its launch's files (a private agent home a
    launch made is there; "": none known)."""

    cwd: str
    started: float
    hinted: str = ""
    environ: Mapping[str, str] = field(default_factory=dict)
    launch_dir: str = ""


class ConversationReader(Protocol):
    """An agent's reader: the entries its own source holds for the session,
    oldest first ([] when it has none: the next source is asked)."""

    def __call__(self, query: Query) -> list[Entry]: ...


def cut(text: str) -> str:
    """``text`` at most :data:`MAX_ENTRY_CHARS` long (its start kept, marked cut)."""
    return text if len(text) <= MAX_ENTRY_CHARS else text[:MAX_ENTRY_CHARS] + " [...]"


def stamp(value: object) -> float | None:
    """An ISO 8601 time (``2026-12-01T19:08:16.123Z``) as seconds, or None."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def slug(cwd: str) -> str:
    """A project's folder name as Claude Code and Qwen Code give it (under
    ``projects/``): the path with every character but an ASCII letter or digit
    made ``-``."""
    return "".join(c if c.isascii() and c.isalnum() else "-" for c in cwd)


def cwds(query: Query) -> tuple[str, ...]:
    """The session's project folder as given and as resolved (an agent names
    its records by the one it was started in)."""
    real = os.path.realpath(query.cwd) if query.cwd else ""
    return tuple(dict.fromkeys(c for c in (query.cwd, real) if c))


def home_of(environ: Mapping[str, str], var: str, default: str) -> Path | None:
    """An agent's own dir: ``var`` of ``environ`` (``~`` resolved against its
    ``HOME``) or ``$HOME/default``; None when ``environ`` says neither (a reader
    never guesses a home)."""
    home = environ.get("HOME", "")
    raw = environ.get(var, "").strip()
    if raw and (raw == "~" or raw.startswith("~/")):
        return Path(home) / raw[2:] if home else None
    if raw:
        return Path(os.path.abspath(raw))
    return Path(home) / default if home else None


def json_lines(lines: Iterable[bytes] | None) -> list[dict[str, Any]]:
    """The JSON objects among ``lines`` (others skipped: a torn or hostile line
    is no record)."""
    import json

    out: list[dict[str, Any]] = []
    for line in lines or []:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            out.append(record)
    return out


def inside(path: Path, folder: Path) -> bool:
    """``path`` (resolved) is a file below ``folder`` (resolved): a transcript a
    payload names outside the agent's own folder is never read."""
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError, ValueError):
        return False


def hinted_in(hinted: str, folders: Iterable[Path], suffixes: tuple[str, ...]) -> Path | None:
    """The file a hook's payload named, resolved, if it ends with one of
    ``suffixes`` and lies directly in one of ``folders`` (the agent's own
    folders for the session's project); else None (a payload is hostile)."""
    if not hinted:
        return None
    try:
        real = Path(os.path.realpath(hinted))
    except (OSError, ValueError):
        return None
    if not real.name.endswith(suffixes):
        return None
    for folder in folders:
        try:
            if real.parent == Path(os.path.realpath(folder)):
                return real
        except (OSError, ValueError):
            continue
    return None


def newest(folders: Iterable[Path], suffixes: tuple[str, ...], since: float) -> Path | None:
    """The newest regular file (a symlink is not one) directly in one of
    ``folders`` whose name ends with one of ``suffixes``, written at or after
    ``since`` (a file older than the session is another session's)."""
    best: tuple[float, Path] | None = None
    for folder in folders:
        try:
            found = [(p.lstat(), p) for p in folder.iterdir() if p.name.endswith(suffixes)]
        except OSError:
            continue
        for info, p in found:
            if stat.S_ISREG(info.st_mode) and info.st_mtime >= since and (
                    best is None or info.st_mtime > best[0]):
                best = (info.st_mtime, p)
    return None if best is None else best[1]


#: The tool-call arguments that name what a call acts on, in order of preference.
TARGET_KEYS = ("command", "file_path", "filePath", "absolute_path", "path", "pattern", "url",
               "query")


def target_of(args: Mapping[str, Any], keys: tuple[str, ...] = TARGET_KEYS) -> str:
    """What a tool call's arguments say it acts on (its command or path), or ""."""
    return next((str(args[k]) for k in keys if isinstance(args.get(k), (str, int))), "")


def tool_entry(at: float, name: object, args: object, target: str | None = None) -> Entry:
    """A tool call read from a record: its name, and what it acts on
    (``target``, else :func:`target_of` its arguments when they are an object)."""
    tool = str(name or "")[:200]
    if target is None:
        target = target_of(args) if isinstance(args, Mapping) else ""
    return Entry(EntryKind.TOOL, at, cut(target or tool), "transcript", tool=tool,
                 target=cut(target))


def _open_regular(path: Path | str) -> tuple[int, int] | None:
    """(fd, size) of the regular file ``path`` opened without following a
    symlink at the last step, or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError, TypeError):
        return None
    try:
        info = os.fstat(fd)
    except OSError:
        os.close(fd)
        return None
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        return None
    return fd, info.st_size


def _read_from(fd: int, start: int, size: int) -> bytes | None:
    try:
        os.lseek(fd, start, os.SEEK_SET)
        chunks = []
        left = size - start
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError:
        return None
    return b"".join(chunks)


def read_whole(path: Path | str, max_bytes: int | None = None) -> bytes | None:
    """All of the regular file ``path`` (no symlink at the last step), or None
    when it is none or bigger than ``max_bytes`` (default
    :data:`MAX_TRANSCRIPT_BYTES`): a record that is one JSON document cannot be
    read from its end, so an oversize one is refused before it is parsed."""
    max_bytes = MAX_TRANSCRIPT_BYTES if max_bytes is None else max_bytes
    opened = _open_regular(path)
    if opened is None:
        return None
    fd, size = opened
    try:
        return None if size > max_bytes else _read_from(fd, 0, size)
    finally:
        os.close(fd)


def tail_lines(path: Path | str, max_bytes: int | None = None,
               max_line: int | None = None) -> list[bytes] | None:
    """The last lines of the regular file ``path`` (at most ``max_bytes``,
    default :data:`MAX_TRANSCRIPT_BYTES`, read; a first partial line, blank
    lines and lines over ``max_line``, default :data:`MAX_LINE_BYTES`, dropped),
    or None when it is no readable regular file (a symlink at the last step is
    refused: ``O_NOFOLLOW``). The one bounded read of every transcript (the
    hooks' turn-end reply too: :mod:`agentwrap.surfaces.hooks.transcript`)."""
    max_line = MAX_LINE_BYTES if max_line is None else max_line
    data = tail_bytes(path, max_bytes)
    if data is None:
        return None
    return [x for x in data.split(b"\n") if x.strip() and len(x) <= max_line]


def tail_bytes(path: Path | str, max_bytes: int | None = None) -> bytes | None:
    """The end of the regular file ``path`` (at most ``max_bytes``, default
    :data:`MAX_TRANSCRIPT_BYTES`), from its first whole line, or None when it
    is no readable regular file (no symlink at the last step): the bounded
    read of a record that is text, not JSON lines (Aider's chat history)."""
    max_bytes = MAX_TRANSCRIPT_BYTES if max_bytes is None else max_bytes
    opened = _open_regular(path)
    if opened is None:
        return None
    fd, size = opened
    start = max(0, size - max_bytes)
    try:
        data = _read_from(fd, start, size)
    finally:
        os.close(fd)
    if data is None or not start:
        return data
    return data.split(b"\n", 1)[1] if b"\n" in data else b""  # read from a line's middle


__all__ = ["MAX_ENTRY_CHARS", "MAX_LINE_BYTES", "MAX_TRANSCRIPT_BYTES", "TARGET_KEYS",
           "ConversationReader", "Entry", "EntryKind", "Query", "cut", "cwds", "hinted_in",
           "home_of", "inside", "json_lines", "newest", "read_whole", "slug", "stamp",
           "tail_bytes", "tail_lines", "target_of", "tool_entry"]
