"""GitHub's hard limits (docs/ci-limits.md), and the one check of each.

Each check returns what is wrong, in words that name the value and the limit,
or None; `emit.limits.refuse` turns it into a LimitError (exit 4).
"""

from __future__ import annotations

# Sizes are bytes of the UTF-8 text; 1 MB is read as 10**6 to keep a margin.
GITHUB_MAX_MATRIX_ROWS = 256
GITHUB_MAX_OUTPUT_BYTES = 1_000_000


def matrix_rows(rows: int, what: str) -> str | None:
    """A matrix that GitHub would not expand whole (one that cannot be sharded)."""
    if rows <= GITHUB_MAX_MATRIX_ROWS:
        return None
    return (
        f"{what} has {rows} rows; a GitHub matrix runs at most {GITHUB_MAX_MATRIX_ROWS} "
        "jobs per workflow run"
    )


def output_size(size: int, what: str) -> str | None:
    """A job's outputs, in bytes, past what GitHub holds."""
    if size <= GITHUB_MAX_OUTPUT_BYTES:
        return None
    return (
        f"{what} total {size:,} bytes; a GitHub job's outputs hold at most "
        f"{GITHUB_MAX_OUTPUT_BYTES:,}"
    )
