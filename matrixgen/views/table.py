"""Plain-text tables, as every command prints them."""

from __future__ import annotations

from matrixgen.util.escape import terminal_text


def table(rows: list[list[str]], headers: list[str]) -> str:
    """Columns padded to their widest cell. Every cell is escaped for a terminal
    line (`terminal_text`): a value with a line break in it stays in its row."""
    cells = [[terminal_text(c) for c in row] for row in rows]
    headers = [terminal_text(h) for h in headers]
    widths = [max(len(c) for c in col) for col in zip(headers, *cells, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines) + "\n"
