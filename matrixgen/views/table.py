"""Tables, as every command prints them: plain text for a terminal, Markdown for a
comment or a job summary, HTML for the report's pages, and `Report`, one
declaration of a feature's table that each is written from."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TypeVar

from msgspec import Struct

from matrixgen.util.escape import html_text, markdown_text, terminal_text
from matrixgen.util.words import listed

_Value = TypeVar("_Value", bound=Hashable)

# The widest a text table pads a column to.
WIDEST_PADDED = 1_000


def table(rows: Sequence[Sequence[object]], headers: list[str], *, empty: str | None = None) -> str:
    """Columns padded to their widest cell. Every cell (its str()) is escaped for
    a terminal line (`terminal_text`): a value with a line break stays in its row.
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
        # A longer cell overflows its column: padding every row to one huge cell
        # would make the table's size the rows times that cell.
        width = min(width, max(len(header), WIDEST_PADDED))
        widths.append(width)
        padded = {cell: text.ljust(width) for cell, text in shown.items()}
        padded_columns.append(map(padded.__getitem__, cells))
    lines = ["  ".join(h.ljust(w) for h, w in zip(shown_headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += map(str.rstrip, map("  ".join, zip(*padded_columns, strict=True)))
    return "\n".join(lines) + "\n"


class Markdown(str):
    """A cell already written as Markdown (a link, code beside text): a Report
    writes it as it is in Markdown, and refuses it in HTML."""


class Column(Struct, frozen=True):
    """A column of a `Report`: its header in each format (`markdown` None: a
    text-only column; `text` False: a Markdown-only one, "" the same header),
    how Markdown escapes its cells (`str` for the ones we write: numbers, words
    of our vocabulary), how HTML writes them (None: not in HTML; `str` for cells
    already HTML), their alignment there, and the cell a None shows as."""

    header: str
    markdown: str | None = ""
    text: bool = True
    escape: Callable[[object], str] = markdown_text
    right: bool = False
    missing: str = ""
    html: Callable[[object], str] | None = html_text


class Report(Struct, frozen=True):
    """A feature's table, declared once: its columns and its rows of raw values
    (one per column), each escaped by the format it is written in."""

    columns: Sequence[Column]
    rows: Sequence[Sequence[object]]

    def text(self, *, empty: str | None = None) -> str:
        shown = [i for i, c in enumerate(self.columns) if c.text]
        cells = [[_plain(row[i], self.columns[i]) for i in shown] for row in self.rows]
        return table(cells, [self.columns[i].header for i in shown], empty=empty)

    def markdown(self, limit: int | None = None) -> list[str]:
        """The lines of its Markdown table (its first `limit` rows)."""
        shown = [(i, c) for i, c in enumerate(self.columns) if c.markdown is not None]
        head = [c.markdown or c.header for _, c in shown]
        marks = ["--:" if c.right else ":--" for _, c in shown]
        rows = ([_markdown(row[i], c) for i, c in shown] for row in self.rows[:limit])
        return [f"| {' | '.join(cells)} |" for cells in (head, marks, *rows)]

    def html(self, *, cls: str = "", row_classes: Sequence[str] | None = None) -> str:
        """Its HTML table: a right column's cells classed `n`, the table `cls`,
        row r `row_classes[r]`."""
        columns = enumerate(self.columns)
        shown = [(i, c, " class=n" if c.right else "") for i, c in columns if c.html is not None]
        head = "".join(f'<th{n} scope="col">{html_text(c.header)}</th>' for _, c, n in shown)
        body = []
        for r, row in enumerate(self.rows):
            klass = row_classes[r] if row_classes is not None else ""
            cells = "".join(f"<td{n}>{_html(row[i], c)}</td>" for i, c, n in shown)
            body.append(f"<tr{f' class={klass}' if klass else ''}>{cells}</tr>")
        klass = f' class="{cls}"' if cls else ""
        return (
            f"<table{klass}><thead><tr>{head}</tr></thead><tbody>\n"
            + "\n".join(body)
            + "\n</tbody></table>\n"
        )


def _plain(cell: object, column: Column) -> str:
    return column.missing if cell is None else str(cell)


def _markdown(cell: object, column: Column) -> str:
    if cell is None or isinstance(cell, Markdown):
        return column.missing if cell is None else cell
    return column.escape(cell)


def _html(cell: object, column: Column) -> str:
    if isinstance(cell, Markdown) or column.html is None:
        raise TypeError("no HTML for a Markdown cell (give the value it shows) or in its column")
    return column.html(column.missing if cell is None else cell)


def few(names: Iterable[str], limit: int) -> str:
    """The distinct names, sorted, the first `limit` of them written out: `a, b and 3 more`."""
    return listed(sorted(set(names)), limit)


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
