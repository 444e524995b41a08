"""Helpers shared by the benchmark scripts (scripts/bench_*.py)."""

from __future__ import annotations

from typing import Any


def json_safe(x: Any) -> Any:
    """NaN (no data) -> null: strict JSON has no NaN."""
    if isinstance(x, float) and x != x:
        return None
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    return x


def fmt(x: object, spec: str = ".2f") -> str:
    """A table cell: '-' for missing or NaN."""
    if x is None or (isinstance(x, float) and x != x):
        return "-"
    return format(x, spec)
