"""The sessions' agent profiles, parsed once per version of their files.

Sending a message needs the session's profile (is it a shell, does it take
text as typed), and so do the answer intake and starting a listed session.
A long-lived service (the HTTP server) sends many messages, and parsing a
profile costs more than storing one: the cache keeps each parsed profile
until its file, or the directory listing the profiles, changes.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..paths import Paths

if TYPE_CHECKING:  # imported where used: a hook opens a service and must start fast
    from ..detect.profiles import Profile


class ProfileCache:
    """The profiles of one service, each parsed again only when its file changed."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths
        self._profiles: dict[str, tuple[tuple[str, int], Profile]] = {}
        self._files: tuple[tuple[int, ...], dict[str, Path]] | None = None

    def get(self, name: str) -> Profile:
        """The session's profile, parsed once per version of its file: a
        long-lived service (the HTTP server) sends many messages, and parsing
        a profile costs more than storing one."""
        from ..detect.profiles import load_profile

        path = self._profile_files().get(name)
        try:
            key = (str(path), path.stat().st_mtime_ns) if path is not None else ("", 0)
        except OSError:
            key = (str(path), 0)
        cached = self._profiles.get(name)
        if cached is not None and cached[0] == key:
            return cached[1]
        profile = load_profile(name, self.paths)
        self._profiles[name] = (key, profile)
        return profile

    def _profile_files(self) -> dict[str, Path]:
        """:func:`profile_files`, listed again only when a profile directory
        changed (a file added, removed or renamed changes its mtime; an edit
        in place is seen by :meth:`get` through the file's own)."""
        from ..detect.profiles import builtin_patterns_dir, profile_files

        key = []
        for d in (builtin_patterns_dir(), self.paths.user_patterns_dir):
            try:
                key.append(d.stat().st_mtime_ns)
            except OSError:
                key.append(0)
        if self._files is None or self._files[0] != tuple(key):
            self._files = (tuple(key), profile_files(self.paths))
        return self._files[1]
