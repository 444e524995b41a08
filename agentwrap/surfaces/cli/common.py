"""What every command group of the ``agentwrap`` command shares.

The two consoles (``out`` for results, ``err`` for one line per error, hint or
note), tables, JSON output, and where the state lives (paths, and the application
service every command goes through for the store and the registry).

Everything shown comes from outside (message content, source ids, session
names, screen text, paths): it is never read as rich markup. Table cells are
:class:`rich.text.Text`, printed lines pass through :func:`escape`, and the
consoles do not replace ``:emoji:`` codes. When stdout is not a terminal
(a pipe, ``| less``, a script), tables become plain aligned lines, one per
row, never wrapped or cut.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ...paths import Paths

if TYPE_CHECKING:  # the service (store, registry) loads only when a command opens it
    from ...message import QueueLimits
    from ...service import Service

out = Console(highlight=False, soft_wrap=True, emoji=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)  # one line per error/hint

#: Where each error class is explained: its anchor on this page of the documentation
#: (docs/troubleshooting.md in the source tree, /troubleshooting/ on the site), which
#: scripts/gen_docs.py writes for every class of agentwrap/errors.py.
TROUBLESHOOTING = "docs/troubleshooting.md"
_PLACEHOLDER = re.compile(r"\bNAME\b")


def hint_line(error: type[Exception], hint: str, session: object = None) -> str:
    """The ``hint:`` line of an error, as printed: the hint with the placeholder
    ``NAME`` replaced by the session the command named (``session``: what to type
    next, not a template), then where the error is explained. Plain text: the
    caller escapes it."""
    if isinstance(session, str) and session:
        hint = _PLACEHOLDER.sub(lambda _: session, hint)
    return f"{hint} (more: {TROUBLESHOOTING}#{error.__name__.lower()})"


def fmt_age(ts: float | None) -> str:
    if not ts:
        return "-"
    secs = max(0.0, time.time() - ts)
    if secs < 60:
        return f"{secs:.0f}s ago"
    if secs < 3600:
        return f"{secs / 60:.0f}m ago"
    return f"{secs / 3600:.1f}h ago"


def emit_json(data: Any) -> None:
    try:
        text = json.dumps(data, indent=2, default=str)
    except RecursionError:  # deep metadata stored before the depth limit existed
        text = json.dumps(data, default=str)  # the C encoder: no Python frames per level
    sys.stdout.write(text + "\n")


def render_rows(
    console: Console, headers: Sequence[str], rows: Sequence[Sequence[str]],
    *, max_width: int | None = None, drop: Sequence[str] = (),
) -> None:
    """A table of untrusted strings: rich on a terminal, plain lines otherwise.

    Cells are :class:`Text`, so ``[/]`` or ``[link=...]`` in a message is shown
    as typed. Off a terminal each row is one line, columns aligned with two
    spaces and nothing cut: what ``grep``, ``awk`` and ``less`` need. On a
    terminal too narrow for every column, the columns named in ``drop`` go, in
    that order, until the rest fit whole (as ``ls -l`` keeps its columns whole
    rather than cutting each one), and the last column wraps in what is left.
    """
    if not console.is_terminal:
        widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
        for line in [list(headers), *map(list, rows)]:
            cells = [c.ljust(w) for c, w in zip(line[:-1], widths[:-1], strict=True)] + [line[-1]]
            console.file.write("  ".join(cells).rstrip() + "\n")
        console.file.flush()
        return
    keep = _columns_that_fit(console.width, headers, rows, drop)
    table = Table(box=None, header_style="bold")
    for i in keep:
        last = i == len(headers) - 1
        table.add_column(headers[i], no_wrap=not last, overflow="fold" if last else "ellipsis",
                         max_width=max_width if last else None, min_width=LAST_MIN if last else None)
    for row in rows:
        table.add_row(*(Text(row[i]) for i in keep))
    console.print(table)


LAST_MIN = 16  # the last column (a detail, free text) gets at least this much; it wraps


def _columns_that_fit(width: int, headers: Sequence[str], rows: Sequence[Sequence[str]],
                      drop: Sequence[str]) -> list[int]:
    """The columns shown at ``width``: all of them, less those of ``drop`` (in its
    order) while the others, whole, and the last one's least width do not fit."""
    keep = list(range(len(headers)))
    need = {i: max([Text(headers[i]).cell_len, *(Text(r[i]).cell_len for r in rows)])
            for i in keep}
    last = len(headers) - 1

    def total() -> int:  # each column is padded by one cell on either side
        return sum(need[i] + 2 for i in keep if i != last) + LAST_MIN + 2

    for name in drop:
        if total() <= width:
            break
        keep.remove(headers.index(name))
    return keep


def user_paths() -> Paths:
    return Paths.from_env()


def open_service(paths: Paths | None = None, *, limits: QueueLimits | None = None) -> Service:
    """The service over this user's store (``limits``: see :meth:`Service.open`)."""
    from ...service import Service

    return Service.open(paths or user_paths(), limits=limits)
