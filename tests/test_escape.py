"""Escaping for terminal lines, workflow commands, JSON in logs and Markdown."""

from __future__ import annotations

import json
import re
import unicodedata

from hypothesis import example, given
from hypothesis import strategies as st

from matrixgen.util.escape import (
    annotation,
    json_for_log,
    markdown_code,
    markdown_link,
    markdown_text,
    safe_link,
    terminal_line,
    terminal_lines,
    terminal_text,
    unescape_terminal,
    workflow_data,
    workflow_property,
)
from tests.escape_fixtures import HOSTILE, runner_commands

# Text of every kind, lone surrogates included (they exist in-process: a file
# name or argument that is not valid UTF-8 decodes to them).
ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()))
TEXT = st.one_of(ANY_TEXT, HOSTILE)
HIDDEN = {"Cc", "Cf", "Zl", "Zp", "Cs"}


def physical_lines(text: str) -> list[str]:
    """Every line break a terminal, a log viewer or Python would see."""
    return text.splitlines() or [""]


@given(TEXT)
@example("::add-mask::secret")
@example("a\n::stop-commands::x\r##[error]boom")
@example("\\n")
def test_terminal_text_round_trips_and_is_one_inert_line(value: str) -> None:
    shown = terminal_text(value)
    assert unescape_terminal(shown) == value
    assert len(physical_lines(shown)) == 1
    assert "##[" not in shown
    assert not any(unicodedata.category(c) in HIDDEN for c in shown)
    # Printed alone on a line (after the escaping of a whole line), it is no command.
    line = terminal_line(shown)
    assert runner_commands(line) == []
    assert unescape_terminal(line) == value


@given(st.lists(TEXT, max_size=6))
def test_lines_composed_of_fields_hold_no_command(fields: list[str]) -> None:
    # Table rows: fields padded and joined with blanks, empty ones included.
    row = "  ".join(terminal_text(f).ljust(4) for f in fields)
    line = terminal_line(row)
    assert runner_commands(line) == []
    assert len(physical_lines(line)) == 1
    assert line == row or re.match(r"\s*\\x3a:", line)


@given(TEXT)
def test_terminal_line_makes_any_text_one_inert_line(value: str) -> None:
    line = terminal_line(value)
    assert runner_commands(line) == [] and len(physical_lines(line)) == 1
    assert terminal_line(line) == line  # idempotent


@given(st.lists(TEXT, max_size=5))
def test_terminal_lines_keeps_the_line_structure(lines: list[str]) -> None:
    text = "\n".join(terminal_text(line) for line in lines)
    out = terminal_lines(text)
    assert runner_commands(out) == []
    assert out.count("\n") == text.count("\n")


def test_plain_text_is_left_alone() -> None:
    for value in ["gpt3_tp1_pp2", "tests/unit_tests/test_x.py::test_y[a-b]", "Ünïcødé ✓", ""]:
        assert terminal_text(value) == value
        assert terminal_line(value) == value
    assert terminal_text("a\nb\\c\x1b") == "a\\nb\\\\c\\x1b"
    assert terminal_line("  ::error::x") == "  \\x3a:error::x"
    assert terminal_text("see ##[error]") == "see ##\\x5berror]"


def _runner_parse(command: str) -> tuple[str, dict[str, str], str]:
    """(name, properties, message) as GitHub's runner reads `::name k=v,...::msg`."""
    assert command.startswith("::")
    info, _, data = command[2:].partition("::")
    name, _, props = info.partition(" ")

    def unescape_data(s: str) -> str:
        return s.replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")

    def unescape_property(s: str) -> str:
        for code, char in (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%")):
            s = s.replace(code, char)
        return s

    properties = {}
    for pair in filter(None, props.split(",")):
        key, _, value = pair.partition("=")
        properties[key] = unescape_property(value)
    return name, properties, unescape_data(data)


@given(TEXT, TEXT, TEXT, st.integers(0, 10**6), st.integers(0, 999))
def test_annotations_are_one_command_that_reads_back(
    message: str, file: str, title: str, line: int, column: int
) -> None:
    command = annotation("error", message, file=file, line=line, column=column, title=title)
    assert len(re.split(r"\r\n|\r|\n", command)) == 1
    name, props, data = _runner_parse(command)
    assert name == "error" and data == message
    assert props["file"] == file and props["title"] == title
    if line:
        assert props["line"] == str(line)
    assert "::" not in command[2:].partition("::")[0]  # the properties end where they should


def test_workflow_escapes_are_githubs() -> None:
    assert workflow_data("50%\r\nx") == "50%25%0D%0Ax"
    assert workflow_property("a:b,c%") == "a%3Ab%2Cc%25"
    assert annotation("warning", "m", file="f.yaml", line=3, column=4) == (
        "::warning file=f.yaml,line=3,col=4::m"
    )


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)


@given(JSON_VALUES, st.sampled_from([None, 2]))
def test_json_for_log_means_the_same_and_holds_no_command(
    value: object, indent: int | None
) -> None:
    text = json_for_log(json.dumps(value, ensure_ascii=False, indent=indent))
    assert json.loads(text) == value
    assert runner_commands(text) == []
    assert terminal_lines(text) == text  # nothing left for a line guard to change


# Markdown: inline markup that could come out of a value (the escaper's own
# character references aside: `&amp;` and the like, and `&#160;` for a blank at
# either end).
_MARKUP = re.compile(r"(?<!\\)[*_`\[\]<>|!#]|(?<!\\)\(|&(?!amp;|lt;|gt;|quot;)")
_BLANK_REFERENCE = re.compile(r"&#[0-9]+;")


@given(TEXT)
@example("[x](javascript:alert(1)) <img src=x onerror=alert(1)> **b** | c")
@example("\xa0")
@example("&#160;x\u3000")
def test_markdown_text_is_inert(value: str) -> None:
    shown = markdown_text(value)
    assert "\n" not in shown and "\r" not in shown
    assert "<" not in shown and ">" not in shown
    assert not _MARKUP.search(_BLANK_REFERENCE.sub("", re.sub(r"\\\\", "", shown)))


@given(TEXT)
def test_markdown_code_is_spans_between_escaped_pipes(value: str) -> None:
    shown = markdown_code(value)
    assert "\n" not in shown
    spans = shown.split("\\|")  # no span holds a pipe: each `\\|` is between two
    assert len(spans) == value.count("|") + 1
    for span in filter(None, spans):
        fence = re.match(r"`+", span)[0]
        inner = span[len(fence) : -len(fence)]
        assert span.endswith(fence) and fence not in inner and "|" not in inner
        assert not span[len(fence) :].startswith("`")


def test_safe_links() -> None:
    assert safe_link("https://github.com/o/r/issues/1") == "https://github.com/o/r/issues/1"
    assert safe_link("http://example.com/a b") is None
    for bad in [
        "javascript:alert(1)",
        "JAVASCRIPT://x",
        "data:text/html,x",
        "/relative",
        "//host/x",
        "ftp://h/x",
        "https://",
        "https://user@evil/x",
        "https://h\\x",
        "https://h/\nx",
        7,
    ]:
        assert safe_link(bad) is None, bad
    assert safe_link("https://h/x)(y<z>") == "https://h/x%29%28y%3Cz%3E"
    assert markdown_link("#1 *x*", "javascript:x") == "\\#1 \\*x\\*"
    assert markdown_link("a", "https://h/x") == "[a](https://h/x)"


@given(TEXT)
def test_safe_link_never_leaves_the_destination(url: str) -> None:
    target = safe_link(url)
    if target is not None:
        assert re.match(r"https?://", target, re.I)
        assert not re.search(r"[\s()<>\\\"`]", target)
