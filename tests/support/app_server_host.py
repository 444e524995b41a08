"""The supervisor as Codex's app-server delivery reads it
(:class:`agentwrap.app_server.delivery.Supervising`), for tests that drive
that delivery's turn without a supervisor: no draft, no question on screen,
and no page holding the keyboard (issue 42's take-over)."""

from __future__ import annotations


class Eyes:
    draft = False
    question = None


class Keyboard:
    @staticmethod
    def held() -> bool:  # no page holds the keyboard
        return False


class Host:
    detector = Eyes()
    term = Keyboard()
