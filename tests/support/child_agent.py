#!/usr/bin/env python3
"""Run an agent command as a *child* process instead of exec'ing it.

tmux continues a pane's own process at once when it is stopped (it sends
SIGCONT on SIGCHLD), so a test cannot freeze the agent with SIGSTOP. A child of
the pane's process is not watched that way: the crash tests freeze it to hold
a delivery in a phase (e.g. a paste the agent has not shown yet).

Usage: child_agent.py COMMAND [ARGS...]; exits with the child's status.
"""

from __future__ import annotations

import subprocess
import sys


def main() -> int:
    proc = subprocess.Popen(sys.argv[1:])
    code = proc.wait()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main())
