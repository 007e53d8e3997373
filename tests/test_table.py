"""views.table: padded columns of escaped cells, byte for byte what padding and
escaping each cell of each row gives, however many rows repeat a cell."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from msgspec.structs import replace

from matrixgen.util.escape import (
    html_text,
    markdown_code,
    markdown_text,
    terminal_line,
    terminal_text,
)
from matrixgen.views import page
from matrixgen.views.table import (
    WIDEST_PADDED,
    Column,
    Markdown,
    Report,
    each_shown,
    few,
    table,
    table_of_columns,
)


def _table_cell_by_cell(rows: list[list[object]], headers: list[str]) -> str:
    """The definition: every cell escaped, padded to its column's widest, each
    line's trailing blanks stripped."""
    cells = [[terminal_text(c) for c in row] for row in rows]
    shown = [terminal_text(h) for h in headers]
    widths = [max(len(c) for c in col) for col in zip(shown, *cells, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(shown, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines) + "\n"


# Few distinct values, so that rows repeat cells; hostile ones among them
# (line breaks, controls, workflow commands, blanks that rstrip removes).
_CELLS = st.one_of(
    st.sampled_from(["", "a", "dgx_h100", "a b", "x ", " ", "\xa0", "\u3000", "é", "\n", "\t"]),
    st.sampled_from(["\\", "::error::x"]),
    st.sampled_from(["##[group]", "\x1b[31m", "\u202e", "\x85", "\ud800", "1", "True"]),
    st.text(max_size=6),
    st.integers(-3, 3),
    st.booleans(),
    st.none(),
)


@st.composite
def _tables(draw: st.DrawFn) -> tuple[list[list[object]], list[str]]:
    headers = draw(st.lists(st.sampled_from(["model", "a", "", " x", "é\n", "scope"]), max_size=5))
    rows = draw(
        st.lists(st.lists(_CELLS, min_size=len(headers), max_size=len(headers)), max_size=12)
    )
    return rows, headers


@given(_tables())
def test_table_is_each_cell_escaped_and_padded(given_table: tuple) -> None:
    rows, headers = given_table
    assert table(rows, headers) == _table_cell_by_cell(rows, headers)


@given(_tables())
def test_table_of_columns_is_table_of_the_rows(given_table: tuple) -> None:
    rows, headers = given_table
    if not headers:
        return  # columns cannot say how many rows there are
    columns = [[row[i] for row in rows] for i in range(len(headers))]
    assert table_of_columns(columns, headers) == table(rows, headers)


@given(_tables())
def test_every_line_of_a_table_is_safe_to_print(given_table: tuple) -> None:
    rows, headers = given_table
    lines = table(rows, headers).split("\n")
    assert lines.pop() == ""
    assert len(lines) == len(rows) + 2  # no cell breaks its row
    for line in lines:
        assert "##[" not in line
        assert terminal_line(line) == line or line.lstrip().startswith("::")


def test_one_and_true_are_different_cells() -> None:
    text = table([[1], [True], ["1"], [1.0]], ["n"])
    assert text.split("\n")[2:6] == ["1", "True", "1", "1.0"]


def test_rows_of_another_length_are_refused() -> None:
    with pytest.raises(ValueError):
        table([["a", "b"], ["c"]], ["x", "y"])
    with pytest.raises(ValueError):
        table_of_columns([["a", "b"], ["c"]], ["x", "y"])
    with pytest.raises(ValueError):
        table_of_columns([["a"]], ["x", "y"])


@given(
    st.lists(
        st.one_of(
            st.sampled_from(["", "a", "1", "True"]),
            st.none(),
            st.integers(0, 2),
            st.booleans(),
            st.tuples(st.sampled_from(["pr", "nightly"])),
        ),
        max_size=12,
    )
)
def test_each_shown_is_show_on_each_value(values: list) -> None:
    assert each_shown(values, repr) == [repr(v) for v in values]
    strings = [v for v in values if v is None or isinstance(v, str)]
    assert each_shown(strings, repr) == [repr(v) for v in strings]


def test_a_markdown_table_aligns_each_column_as_its_column_says() -> None:
    columns = [Column("a"), Column("n", right=True), Column("b")]
    lines = Report(columns, [["x", "1", "y"]]).markdown()
    assert lines == ["| a | n | b |", "| :-- | --: | :-- |", "| x | 1 | y |"]
    assert Report(columns[:2], []).markdown() == ["| a | n |", "| :-- | --: |"]


# A column of each kind: in both formats, text only, Markdown only (under
# another header), Markdown as code, a column of our own words, one whose
# None shows as "-".
_COLUMNS = (
    Column("name"),
    Column("node", markdown=None),
    Column("where", markdown="platform/env", text=False),
    Column("case", escape=markdown_code),
    Column("runs", escape=str, right=True),
    Column("hint", missing="-"),
)


@given(st.lists(st.lists(_CELLS, min_size=6, max_size=6), max_size=8))
@example([["a\\b", "\n", "|", "`x`", 3, None]])  # a backslash, a line break, a pipe, backticks
@example([["::error::x", "##[group]", "<b>", "a|b", "1.5", "-"]])
def test_a_report_writes_each_format_from_its_columns_escaping_each_cell_once(
    rows: list[list[object]],
) -> None:
    report = Report(_COLUMNS, rows)
    text_columns = [0, 1, 3, 4, 5]
    expected = [
        [str(r[i]) if r[i] is not None else ("-" if i == 5 else "") for i in text_columns]
        for r in rows
    ]
    assert report.text() == table(expected, ["name", "node", "case", "runs", "hint"])

    def md(i: int, cell: object) -> str:
        if cell is None:
            return "-" if i == 5 else ""
        return {3: markdown_code, 4: str}.get(i, markdown_text)(cell)

    cells = [[md(i, r[i]) for i in (0, 2, 3, 4, 5)] for r in rows]
    headers = ["name", "platform/env", "case", "runs", "hint"]
    marks = [":--", ":--", ":--", "--:", ":--"]
    assert report.markdown() == [f"| {' | '.join(c)} |" for c in (headers, marks, *cells)]
    assert report.markdown(limit=1) == report.markdown()[: 2 + min(1, len(rows))]


def test_a_markdown_cell_is_written_as_it_is_and_a_plain_one_escaped() -> None:
    report = Report(
        [Column("a", text=False), Column("b", text=False)], [[Markdown("[x](y)"), "[x](y)"]]
    )
    assert report.markdown()[2] == "| [x](y) | \\[x\\]\\(y\\) |"


def _html_by_hand(
    headers: list[str], cells: list[list[str]], right: set[int], cls: str, classes: list[str] | None
) -> str:
    """The definition: a row of headers, a row per row of cells, a right column's
    cells classed `n`, row r classed `classes[r]`."""

    def n(i: int) -> str:
        return " class=n" if i in right else ""

    head = "".join(f'<th{n(i)} scope="col">{html_text(h)}</th>' for i, h in enumerate(headers))
    rows = [
        f"<tr{f' class={classes[r]}' if classes else ''}>"
        + "".join(f"<td{n(i)}>{cell}</td>" for i, cell in enumerate(row))
        + "</tr>"
        for r, row in enumerate(cells)
    ]
    opening = f'<table class="{cls}">' if cls else "<table>"
    return (
        f"{opening}<thead><tr>{head}</tr></thead><tbody>\n"
        + "\n".join(rows)
        + "\n</tbody></table>\n"
    )


# Hostile to HTML: markup, references, quotes, line breaks.
_HTML_CELLS = st.one_of(
    _CELLS,
    st.sampled_from(["<script>alert(1)</script>", "&amp;", "a & b", '"q"', "'q'", "a\nb", "\r\n"]),
)


@given(
    st.lists(st.lists(_HTML_CELLS, min_size=6, max_size=6), max_size=8),
    st.sampled_from(["", "pipelines"]),
    st.booleans(),
)
@example([["<script>alert(1)</script>", "<b>", "&", '"q"', "'q'", None]], "", False)
@example([["a\nb", "x", "\r\n", "&amp;", 3, "<i>"]], "pipelines", True)
def test_a_report_writes_html_as_the_pages_table_of_its_cells_escaped_once(
    rows: list[list[object]], cls: str, classed: bool
) -> None:
    # The node column left out of HTML: a right column after it keeps its class.
    columns = [replace(c, html=None) if c.header == "node" else c for c in _COLUMNS]
    classes = [f"r{n}" for n in range(len(rows))] if classed else None
    shown = (0, 2, 3, 4, 5)
    cells = [
        [html_text(r[i]) if r[i] is not None else ("-" if i == 5 else "") for i in shown]
        for r in rows
    ]
    headers = ["name", "where", "case", "runs", "hint"]
    written = Report(columns, rows).html(cls=cls, row_classes=classes)
    assert written == _html_by_hand(headers, cells, {3}, cls, classes)
    assert written == page.table(headers, cells, numeric=[3], cls=cls, row_classes=classes)
    assert "<script" not in written and "<b>" not in written


def test_a_markdown_cell_has_no_html() -> None:
    with pytest.raises(TypeError, match="a Markdown cell"):
        Report([Column("a")], [[Markdown("[x](y)")]]).html()


@given(st.lists(st.sampled_from(["b", "a", "c", "d"])), st.integers(1, 4))
@example(["b", "a", "b"], 2)  # as many distinct names as the limit: no "more"
@example(["c", "b", "a"], 2)  # one past it
def test_few_names_the_first_distinct_names_sorted_and_counts_the_rest(
    names: list[str], limit: int
) -> None:
    unique = sorted(set(names))
    said = few(names, limit)
    assert said.startswith(", ".join(unique[:limit]))
    more = len(unique) - limit
    assert said.endswith(f" and {more} more") is (more > 0)
    assert said.count(",") + said.count(" and ") == max(0, min(limit, len(unique)) - 1) + (more > 0)


@given(st.integers(0, 5_000), st.integers(1, 40))
@example(WIDEST_PADDED + 1, 3)  # one past the widest padded
@example(640_000, 2)  # a recipe's test case of 640 kB
def test_one_huge_cell_is_not_padded_into_every_row(size: int, rows: int) -> None:
    """A cell past WIDEST_PADDED overflows its column: the table stays the size
    of its cells (plus a bounded padding per cell), never rows x the longest cell."""
    huge = "x" * size
    text = table([[huge, "a"], *[["b", "c"]] * rows], ["test case", "x"])
    lines = text.split("\n")
    width = min(max(size, len("test case")), WIDEST_PADDED)
    assert lines[2] == f"{huge}{' ' * (width - size)}  a"
    assert all(line == "b".ljust(width) + "  c" for line in lines[3:-1])
    assert len(text) <= size + (rows + 3) * (WIDEST_PADDED + 10)
