"""The agent's reply as the screen shows it: wrapped rows joined, for an ACK.

A TUI draws a reply paragraph in rows of its own width: ``● ...step 39 ACK``
on one row and ``  9d98ee19`` (the reply's indent, its gutter) on the next.
That is the TUI's own word wrap, not the terminal's (``capture-pane -J``
would not join it); a line the program wrote past the last column is the
terminal's soft wrap, cut mid-word. An ACK searched one row at a time is not
found in either, and the message is typed again. So the rows are searched
joined: each row with its gutter (blanks, box verticals) taken off, one space
between rows (the TUI's wrap dropped it), and a second time with nothing
between a full-width row and the next (the terminal's cut). A blank row ends
a paragraph: no ACK is made across one.

Only what the agent wrote counts, never our own block as the screen echoes
it (its header and end line name the token, its last line asks
``Reply "ACK <token>"``): the search starts below the last row that shows
any part of the echo. The echo is found with every blank squeezed out of the
rows, so a request wrapped anywhere (even mid-word) still marks the echo and
can never be joined into an ACK.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from wcwidth import wcwidth

#: What a TUI draws around a reply's text on each row (its indent, a box's sides).
GUTTER = " \t\u00a0│┃║╎┆┊▏▎▍▌▐"


def echo_marks(token: str) -> tuple[str, ...]:
    """The parts of our own block that name ``token``, blank-free: its header
    and end line, and its ACK request (see :func:`~.framing.render`)."""
    return (f"agentwrapcontext{token}", f'"ACK{token}"')


def echo_end(rows: Sequence[str], token: str) -> int:
    """The last row that shows any part of our block's echo (-1: none), with
    blanks squeezed out of the rows so that a wrap anywhere cannot hide it."""
    squeezed: list[str] = []
    owner: list[int] = []
    for i, row in enumerate(rows):
        text = "".join(row.strip(GUTTER).split())
        squeezed.append(text)
        owner.extend([i] * len(text))
    flat = "".join(squeezed)
    end = -1
    for mark in echo_marks(token):
        at = flat.rfind(mark)
        if at >= 0:
            end = max(end, owner[at + len(mark) - 1])
    return end


def find_in_rows(rows: Sequence[str], patterns: Sequence[re.Pattern[str]], cols: int) -> str:
    """The text of the first match of ``patterns`` in ``rows`` joined where
    they wrap ("" if none): the row itself when one row holds it, else the
    rows it spans, each without its gutter, joined by a space."""
    for tight in (False, True):
        flat, owner = _joined(rows, cols, tight=tight)
        for pat in patterns:
            m = pat.search(flat)
            if m is None:
                continue
            first, last = owner[m.start()], owner[max(m.end() - 1, m.start())]
            if first == last:
                return rows[first].strip()
            return " ".join(rows[i].strip(GUTTER) for i in range(first, last + 1))
    return ""


def find_ack(rows: Sequence[str], token: str, patterns: Sequence[re.Pattern[str]],
             cols: int) -> str:
    """The reply text that acknowledges ``token`` ("" if none): below the
    last row of our block's echo, rows joined where they wrap."""
    below = list(rows[echo_end(rows, token) + 1 :])
    return find_in_rows(below, patterns, cols)


def _joined(rows: Sequence[str], cols: int, *, tight: bool) -> tuple[str, list[int]]:
    """``rows`` as one text, each without its gutter: a space between rows (or
    nothing after a full-width row, ``tight``), a line break at a blank row;
    and, per character, the row it came from."""
    parts: list[str] = []
    owner: list[int] = []
    for i, row in enumerate(rows):
        text = row.strip(GUTTER)
        if i:
            full = tight and _width(rows[i - 1]) >= cols - 1
            sep = "\n" if not text or not rows[i - 1].strip(GUTTER) else "" if full else " "
            parts.append(sep)
            owner.extend([i] * len(sep))
        parts.append(text)
        owner.extend([i] * len(text))
    return "".join(parts), owner


def _width(line: str) -> int:
    """Terminal cells ``line`` takes (wide characters: 2)."""
    return sum(max(wcwidth(ch), 0) for ch in line)


__all__ = ["GUTTER", "echo_end", "echo_marks", "find_ack", "find_in_rows"]
