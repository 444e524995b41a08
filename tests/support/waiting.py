"""Polling with a deadline: the one way tests wait for something.

The timeout is only a deadline for a hung test, never a performance
threshold: these machines are shared and noisy.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    cond: Callable[[], T | None],
    timeout: float = 30.0,
    what: str = "condition",
    interval: float = 0.05,
    on_timeout: Callable[[], str] | None = None,
) -> T:
    """Call ``cond`` until it returns something truthy, and return that."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            extra = f"\n{on_timeout()}" if on_timeout is not None else ""
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}{extra}")
        time.sleep(interval)
