#!/usr/bin/env python3
"""A program whose screen is hostile, for the live screen view's tests (issue 26).

It draws colours (palette, 256-colour, true colour, bold, reverse) and text
a browser must never take for markup or controls: HTML and script tags,
rich markup, a bidi override, an OSC title and an OSC 8 link with a
``javascript:`` target, a stray escape sequence. Then it echoes each line
typed into it as ``got: LINE``, so a test can change the screen at will.
"""

from __future__ import annotations

import sys

ESC = "\x1b"
SCREEN = [
    f"{ESC}]0;<script>window.__pwned='title'</script>{ESC}\\",
    f"{ESC}[1;31mRED-BOLD{ESC}[0m {ESC}[38;5;208mORANGE-256{ESC}[0m"
    f" {ESC}[48;2;0;0;255;97mWHITE-ON-BLUE{ESC}[0m {ESC}[7mREVERSED{ESC}[0m",
    "<script>window.__pwned='script'</script><img src=x onerror=\"window.__pwned='img'\">",
    "[bold]rich markup[/] <b>not bold</b> &lt;b&gt; javascript:alert(1)",
    "bidi: \u202eevil\u202c done",
    f"{ESC}]8;;javascript:window.__pwned='link'{ESC}\\a link{ESC}]8;;{ESC}\\ and a bell\x07",
    "type a line:",
]


def main() -> int:
    sys.stdout.write("\n".join(SCREEN) + "\n")
    sys.stdout.flush()
    for line in sys.stdin:
        sys.stdout.write(f"got: {line.rstrip()}\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
