"""The audit log: one JSON line per injection and per fallback event.

Append-only and separate from the store, so it can be shipped or tailed
(``tail -f``) without touching the database. Lines stay well under PIPE_BUF
(no message content is logged, only ids, sizes and outcomes), so appends from
several supervisors never interleave. The file is private (0600, created so,
never through a symlink: :func:`~agentwrap.paths.open_private_append`).
"""

from __future__ import annotations

import json
import os
import select
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .paths import open_private_append, private_dirs


class AuditLog:
    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, **event: Any) -> None:
        self.write_many([event])

    def write_many(self, events: Iterable[dict[str, Any]]) -> None:
        """Several lines with one open of the file (a server stores messages
        in batches); each append at most PIPE_BUF bytes, whole lines only."""
        now = time.time()
        lines = [(json.dumps({"ts": now, **e}, sort_keys=True, default=str) + "\n").encode("utf-8")
                 for e in events]
        if not lines:
            return
        private_dirs(self.path.parent)
        fd = open_private_append(self.path)
        try:
            chunk = b""
            for line in lines:
                if chunk and len(chunk) + len(line) > select.PIPE_BUF:
                    os.write(fd, chunk)
                    chunk = b""
                chunk += line
            os.write(fd, chunk)
        finally:
            os.close(fd)

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(x) for x in self.path.read_text().splitlines() if x.strip()]
