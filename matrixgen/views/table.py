"""Plain-text tables, as every command prints them."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TypeVar

from matrixgen.util.escape import terminal_text

_Value = TypeVar("_Value", bound=Hashable)


def table(rows: list[list[str]], headers: list[str], *, empty: str | None = None) -> str:
    """Columns padded to their widest cell. Every cell is escaped for a terminal
    line (`terminal_text`): a value with a line break in it stays in its row.
    `empty`: the line shown instead of a bare header when there is no row."""
    if not rows and empty is not None:
        return empty + "\n"
    for row in rows:
        if len(row) != len(headers):
            raise ValueError(f"a row of {len(row)} cell(s) in a table of {len(headers)} column(s)")
    if not headers:
        return "\n" * (len(rows) + 2)
    columns: list[Sequence[object]] = list(zip(*rows, strict=True)) or [() for _ in headers]
    return table_of_columns(columns, headers)


def table_of_columns(columns: Sequence[Sequence[object]], headers: Sequence[str]) -> str:
    """`table` of the rows these columns make (one column per header, all of one
    length): a table of many rows has few distinct cells in each column, so each
    distinct cell is escaped and padded once, and the rows are joined in C."""
    if len(columns) != len(headers) or len({len(c) for c in columns}) > 1:
        raise ValueError("a table needs one column per header, all of one length")
    if not headers:
        return "\n\n"
    shown_headers = [terminal_text(h) for h in headers]
    widths: list[int] = []
    padded_columns = []
    for header, column in zip(shown_headers, columns, strict=True):
        cells = column
        if not all(issubclass(kind, str) for kind in set(map(type, column))):
            # Escaped as terminal_text escapes them (their str()); 1 and True would
            # otherwise be one key of the cache below.
            cells = [c if isinstance(c, str) else str(c) for c in column]
        shown = {cell: terminal_text(cell) for cell in set(cells)}
        width = max(len(header), *map(len, shown.values())) if shown else len(header)
        widths.append(width)
        padded = {cell: text.ljust(width) for cell, text in shown.items()}
        padded_columns.append(map(padded.__getitem__, cells))
    lines = ["  ".join(h.ljust(w) for h, w in zip(shown_headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += map(str.rstrip, map("  ".join, zip(*padded_columns, strict=True)))
    return "\n".join(lines) + "\n"


def markdown_table(
    headers: Sequence[str], rows: Iterable[Sequence[str]], align: str = ""
) -> list[str]:
    """The lines of a Markdown table of cells already escaped for Markdown;
    `align` has a "<" or ">" per column (left where it runs short)."""
    marks = ["--:" if a == ">" else ":--" for a in align.ljust(len(headers), "<")]
    return [f"| {' | '.join(cells)} |" for cells in (headers, marks, *rows)]


def few(names: Iterable[str], limit: int) -> str:
    """The distinct names, sorted, the first `limit` of them written out: `a, b and 3 more`."""
    unique = sorted(set(names))
    shown = ", ".join(unique[:limit])
    return shown + (f" and {len(unique) - limit} more" if len(unique) > limit else "")


def each_shown(values: Sequence[_Value], show: Callable[[_Value], str]) -> list[str]:
    """`[show(v) for v in values]`, with `show` called once per distinct value:
    for values of one type whose equal ones show alike (strings, integers,
    tuples of strings), or strings and None. Values of other mixed types (1 and
    True are equal, and show differently) are shown one by one."""
    kinds = set(map(type, values))
    if len(kinds) > 1 and not kinds <= {str, type(None)}:
        return [show(v) for v in values]
    shown = {v: show(v) for v in set(values)}
    return list(map(shown.__getitem__, values))
