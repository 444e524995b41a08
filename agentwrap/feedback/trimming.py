"""The useful part of a check's output.

A failing test suite prints pages; the model needs the first failing tests
and their assertion, or the first diagnostics of a linter. Recognised shapes:

* pytest: the ``short test summary`` lines (``FAILED test_x.py::test_y``) and
  the first failure's section (its traceback and ``E`` lines);
* diagnostics, one per line (ruff, mypy, eslint ``unix``, tsc, gcc):
  ``path:line[:col]: message`` or ``path(line,col): error``, the first
  :data:`MAX_DIAGNOSTICS` of them and the tool's count line;
* anything else: the first and the last lines.

Terminal escapes are removed first: a check's colours must not reach the
agent's screen or a person's terminal.
"""

from __future__ import annotations

import re

MAX_DIAGNOSTICS = 20
HEAD_LINES = 15
TAIL_LINES = 25
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-_]")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_DIAG = re.compile(r"^\S[^:\s]*(?::\d+){1,2}:? |^\S+\(\d+,\d+\): ")
_COUNT = re.compile(r"^(Found \d+ error|Found \d+ errors?|\d+ problems?|✖ \d+ problem|"
                    r"Success: no issues|All checks passed)", re.IGNORECASE)
_SECTION = re.compile(r"^_{3,} .+ _{3,}$")


def clean(text: str) -> str:
    """Without terminal escapes and control characters (tabs and newlines stay)."""
    text = _ESCAPES.sub("", text.replace("\r\n", "\n"))
    return _CONTROLS.sub("", text.replace("\r", "\n"))


def trim(output: str, limit: int) -> str:
    """At most ``limit`` characters of ``output`` that say what failed."""
    text = clean(output).strip("\n")
    if len(text) <= limit:
        return text
    lines = text.splitlines()
    picked = _pytest(lines) or _diagnostics(lines) or _ends(lines)
    out = "\n".join(picked)
    if len(out) > limit:
        out = out[: max(0, limit - 40)].rstrip() + "\n[... cut]"
    return out


def _pytest(lines: list[str]) -> list[str]:
    summary = [ln for ln in lines if ln.startswith(("FAILED ", "ERROR "))]
    if not summary:
        return []
    first: list[str] = []
    start = next((i for i, ln in enumerate(lines) if _SECTION.match(ln)), None)
    if start is not None:
        end = next((j for j in range(start + 1, len(lines))
                    if _SECTION.match(lines[j]) or lines[j].startswith("=")), len(lines))
        body = lines[start:end]
        if len(body) > 40:  # the assertion is at the end of a long traceback
            body = [*body[:8], "...", *body[-30:]]
        first = body
    final = [ln for ln in lines[-3:] if ln.startswith("=") or " failed" in ln]
    return first + ["", *summary[:10]] + (["..."] if len(summary) > 10 else []) + final


def _diagnostics(lines: list[str]) -> list[str]:
    diags = [ln for ln in lines if _DIAG.match(ln)]
    if not diags:
        return []
    counts = [ln for ln in lines if _COUNT.match(ln.strip())]
    more = len(diags) - MAX_DIAGNOSTICS
    return diags[:MAX_DIAGNOSTICS] + ([f"... {more} more"] if more > 0 else []) + counts[-1:]


def _ends(lines: list[str]) -> list[str]:
    if len(lines) <= HEAD_LINES + TAIL_LINES:
        return lines
    cut = len(lines) - HEAD_LINES - TAIL_LINES
    return [*lines[:HEAD_LINES], f"... {cut} lines ...", *lines[-TAIL_LINES:]]


def file_name(path: str) -> str:
    """A file name as one line of text: a name with a newline must not pass
    for a line of the message (``x\\nFrom pytest: now passing``)."""
    return clean(path.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
                 .replace("\t", "\\t"))
