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
import sys
import time
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ...message import QueueLimits
from ...paths import Paths
from ...service import Service

out = Console(highlight=False, soft_wrap=True, emoji=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)  # one line per error/hint


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
    *, max_width: int | None = None,
) -> None:
    """A table of untrusted strings: rich on a terminal, plain lines otherwise.

    Cells are :class:`Text`, so ``[/]`` or ``[link=...]`` in a message is shown
    as typed. Off a terminal each row is one line, columns aligned with two
    spaces and nothing cut: what ``grep``, ``awk`` and ``less`` need.
    """
    if not console.is_terminal:
        widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
        for line in [list(headers), *map(list, rows)]:
            cells = [c.ljust(w) for c, w in zip(line[:-1], widths[:-1], strict=True)] + [line[-1]]
            console.file.write("  ".join(cells).rstrip() + "\n")
        console.file.flush()
        return
    table = Table(box=None, header_style="bold")
    for i, h in enumerate(headers):
        last = i == len(headers) - 1
        table.add_column(h, overflow="ellipsis", no_wrap=True, max_width=max_width if last else None)
    for row in rows:
        table.add_row(*(Text(c) for c in row))
    console.print(table)


def user_paths() -> Paths:
    return Paths.from_env()


def open_service(paths: Paths | None = None, *, limits: QueueLimits | None = None) -> Service:
    """The service over this user's store (``limits``: see :meth:`Service.open`)."""
    return Service.open(paths or user_paths(), limits=limits)
