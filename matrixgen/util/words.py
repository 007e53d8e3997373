"""Counts in words: a number with its unit, singular or plural."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`1 case`, `3 jobs`, `2 entries` (given `plural`): never `job(s)`."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
