"""Every escaper meets every character it treats specially.

A property over random text proves nothing about a character the strategy never
draws: under the derandomised `ci` profile the Markdown property once never saw
a backtick, so dropping the backtick from the escaped set left the suite green.
Here each escaper has the set of characters it treats specially, its strategy
has them forced into its alphabet, a test checks that the strategy reaches each
one, each property runs on that strategy, and each special piece is also an
explicit example of the property, alone and in the forms that make markup of
it (`~~x~~`, at a line's start): the derandomised profile runs those every
time. Markdown is checked by rendering it (markdown-it-py, with GitHub's
tables): what renders is the value itself.
"""

from __future__ import annotations

import json
import re
import unicodedata

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from matrixgen.util import markdown as md
from matrixgen.util.escape import (
    annotation,
    html_attribute,
    html_text,
    json_for_log,
    markdown_code,
    markdown_link,
    markdown_text,
    safe_link,
    terminal_line,
    terminal_text,
    unescape_terminal,
    workflow_data,
    workflow_property,
    yaml_double_quoted,
)

# One of each kind of invisible character: C0, DEL, C1 (NEL), zero-width and
# bidirectional format characters, line and paragraph separators, a lone surrogate.
HIDDEN = "\x00\x07\x1b\x7f\x85\u200b\u202e\u2028\u2029\ud800"

# What each escaper treats specially (read from util/escape.py and
# util/markdown.py): characters, and the sequences that mean something only
# together (`##[`, `::`, a `%XX` the runner decodes, a code span's two backticks).
SPECIALS: dict[str, list[str]] = {
    "terminal_text": [*"\\\n\r\t", "##[", *HIDDEN],
    "terminal_line": [":", "::", " ::", "\t::", "##[", "\n", *HIDDEN],
    "workflow_data": ["%", "%25", "%0A", "%0D", "\r", "\n"],
    "workflow_property": ["%", "%25", "%0A", "%3A", "%2C", "\r", "\n", ":", ","],
    "json_for_log": ["##[", '"', "\\", *HIDDEN],
    "yaml_double_quoted": [":", " :", "##[", " ", "\n", *HIDDEN],
    "markdown_text": [*'\\`*_{}[]()#+-.!|~>=^$:@&<"\n\r\t\xa0\u3000', "``", "**", "](", *HIDDEN],
    "markdown_code": ["`", "``", "```", "|", " ", "\\", *HIDDEN],
    "safe_link": [" ", "\\", "@", "u@", "(", ")", "<", ">", '"', "`", "\n", *HIDDEN],
    "diff_text": [*"!#$&*+-.<>@[\\]^_`{|}~\n\r", "``", "**", "](", *HIDDEN],
    "diff_html": [*"&<>\"'\n", "</b>", "<i>"],
    "html_text": [*"&<>", "&amp;", "&lt;", "</p>", "<b>", *HIDDEN],
    "html_attribute": [*"&<>\"'", "&quot;", '" onclick="', *HIDDEN],
    "markdown_link": [*"[]()<>`\\", "](", ")[", *HIDDEN],
}


def any_hidden(text: str) -> bool:
    return any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs") for c in text)


def text_with(
    specials: list[str], other: st.SearchStrategy[str] | None = None, *, head: str = ""
) -> st.SearchStrategy[str]:
    """Text that holds every special piece (in a drawn order, between drawn
    characters of any kind) half the time, some of them the other half; a piece
    that matters at the start (`::`, `:`) also comes first, after `head`."""
    other = st.characters(codec=None, exclude_categories=()) if other is None else other
    pieces = sorted(set(specials))
    every = st.builds(
        lambda order, fill: "".join(c + f for c, f in zip(order, fill, strict=True)),
        st.permutations(pieces),
        st.lists(st.text(other, max_size=2), min_size=len(pieces), max_size=len(pieces)),
    )
    some = st.lists(st.one_of(st.sampled_from(pieces), other), max_size=30).map("".join)
    return st.one_of(every, some).map(lambda text: head + text)


STRATEGIES = {name: text_with(pieces) for name, pieces in SPECIALS.items()}
STRATEGIES["safe_link"] = st.one_of(
    text_with(SPECIALS["safe_link"], head="https://"),
    text_with(SPECIALS["safe_link"], head="http://h/"),
)


def each_special(name: str, *, pair: bool = False):  # type: ignore[no-untyped-def]
    """An explicit example per special piece of the escaper `name`: alone, around
    a word, doubled around a word (`~~x~~`, `**x**`) and at a line's start after
    a word; the derandomised profile need not draw any of them in those forms."""
    pieces = sorted(set(SPECIALS[name]))
    head = "https://h/" if name == "safe_link" else ""
    values = [
        head + form
        for piece in pieces
        for form in (piece, f"{piece}x{piece}", f"{piece * 2}x{piece * 2}", f"x\n{piece}x")
    ]

    def apply(test):  # type: ignore[no-untyped-def]
        for value in reversed(values):
            test = example(value, value)(test) if pair else example(value)(test)
        return test

    return apply


PROBE = settings(
    max_examples=100,
    derandomize=True,
    database=None,
    phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
)


@pytest.mark.parametrize("name", sorted(SPECIALS))
def test_each_strategy_reaches_every_special_character(name: str) -> None:
    seen: list[str] = []

    @PROBE
    @given(STRATEGIES[name])
    def draw(value: str) -> None:
        seen.append(value)

    draw()
    assert [piece for piece in SPECIALS[name] if not any(piece in v for v in seen)] == []


# --- the properties, on those strategies ------------------------------------------


@each_special("terminal_text")
@given(STRATEGIES["terminal_text"])
def test_terminal_text(value: str) -> None:
    shown = terminal_text(value)
    assert unescape_terminal(shown) == value
    assert not any_hidden(shown) and "\n" not in shown and "##[" not in shown


@example("::add-mask::x")
@example(" \t::stop-commands::x")
@each_special("terminal_line")
@given(STRATEGIES["terminal_line"])
def test_terminal_line(value: str) -> None:
    shown = terminal_line(value)
    assert "\n" not in shown and "##[" not in shown
    assert not re.match(r"\s*::", shown)
    assert not any_hidden(shown.replace("\t", ""))


def _runner_unescape(text: str, *, prop: bool) -> str:
    pairs = [("%0D", "\r"), ("%0A", "\n")] + ([("%3A", ":"), ("%2C", ",")] if prop else [])
    for code, char in pairs:
        text = text.replace(code, char)
    return text.replace("%25", "%")


@each_special("workflow_data")
@given(STRATEGIES["workflow_data"])
def test_workflow_data(value: str) -> None:
    shown = workflow_data(value)
    assert "\n" not in shown and "\r" not in shown
    assert _runner_unescape(shown, prop=False) == value


@each_special("workflow_property", pair=True)
@given(STRATEGIES["workflow_property"], STRATEGIES["workflow_data"])
def test_workflow_property_and_annotation(value: str, message: str) -> None:
    shown = workflow_property(value)
    assert not set(shown) & set(":,\r\n")
    assert _runner_unescape(shown, prop=True) == value
    command = annotation("error", message, file=value, line=1, title=value)
    assert command.startswith("::error ") and "\n" not in command and "\r" not in command
    head, _, body = command[2:].partition("::")
    assert _runner_unescape(body, prop=False) == message
    props = dict(p.split("=", 1) for p in head.split(" ", 1)[1].split(","))
    assert _runner_unescape(props["file"], prop=True) == value


@each_special("json_for_log")
@given(STRATEGIES["json_for_log"])
def test_json_for_log(value: str) -> None:
    text = json.dumps({"k": value}, ensure_ascii=False)
    shown = json_for_log(text)
    assert json.loads(shown) == {"k": value}
    assert "##[" not in shown
    assert not any_hidden(shown)


@example(":x")
@example("  :x")
@each_special("yaml_double_quoted")
@given(STRATEGIES["yaml_double_quoted"])
def test_yaml_double_quoted(value: str) -> None:
    # Double-quoted (escaped by the emitter) exactly when a log could misread it.
    must = any_hidden(value) or "##[" in value or value.lstrip().startswith(":")
    assert yaml_double_quoted(value) is must


@each_special("safe_link")
@given(STRATEGIES["safe_link"])
def test_safe_link(url: str) -> None:
    from urllib.parse import urlsplit

    target = safe_link(url)
    if target is not None:
        # No host that parsers read differently, no blank or invisible character.
        assert "\\" not in url and "@" not in urlsplit(url).netloc
        assert not any_hidden(url) and not any(c.isspace() for c in url)
        assert re.match(r"https?://", target, re.I)
        assert not re.search(r"[\s()<>\\\"`]", target)


# --- Markdown: what renders is the value -------------------------------------------

RENDERER = MarkdownIt("commonmark").enable(["table", "strikethrough"])
_HIDDEN_CATEGORIES = ("Cc", "Cf", "Zl", "Zp", "Cs")


def visible_text(specials: list[str]) -> st.SearchStrategy[str]:
    """Text without invisible characters (those are shown as escapes, not as themselves)."""
    shown = [c for c in specials if not any_hidden(c) and c not in "\n\r\t"]
    return text_with(shown, st.characters(exclude_categories=_HIDDEN_CATEGORIES))


def each_visible_special(name: str):  # type: ignore[no-untyped-def]
    """`each_special` for the rendering properties: the visible pieces, each
    alone, around a word and doubled around a word (on one line)."""
    pieces = sorted({c for c in SPECIALS[name] if not any_hidden(c) and c not in "\n\r\t"})
    values = [f for p in pieces for f in (p, f"{p}x{p}", f"{p * 2}x{p * 2}", f"a {p}x{p} b")]

    def apply(test):  # type: ignore[no-untyped-def]
        for value in reversed(values):
            test = example(value)(test)
        return test

    return apply


def inline(markdown: str, *, cell: bool) -> list:
    """The inline tokens of `markdown` in running text (between two words) or alone
    in a table cell."""
    source = f"| h |\n| -- |\n| {markdown} |\n" if cell else f"x {markdown} x\n"
    tokens = RENDERER.parse(source)
    return [t for t in tokens if t.type == "inline"][-1].children or []


def rendered(children: list, *, cell: bool) -> str:
    kinds = {c.type for c in children}
    assert kinds <= {"text", "code_inline"}, kinds  # no link, emphasis, tag, break...
    out = "".join(c.content for c in children)
    return out if cell else out.removeprefix("x ").removesuffix(" x")


# Blanks at a cell's edge: GitHub trims a cell of ASCII blanks only, markdown-it
# of every Unicode one; the escaper's references make both keep the others.
@example("\xa0x")
@example("x\xa0")
@example(" \u3000x\u2003 ")
@example("\u202f")
@each_visible_special("markdown_text")
@given(visible_text(SPECIALS["markdown_text"]))
def test_markdown_text_renders_as_the_value(value: str) -> None:
    assert rendered(inline(markdown_text(value), cell=False), cell=False) == value
    cell = inline(markdown_text(value), cell=True)
    assert rendered(cell, cell=True) == value.strip(" \t")  # a cell is trimmed


@each_visible_special("markdown_code")
@given(visible_text(SPECIALS["markdown_code"] + SPECIALS["markdown_text"]))
def test_markdown_code_renders_as_the_value(value: str) -> None:
    for cell in (False, True):
        children = inline(markdown_code(value), cell=cell)
        assert rendered(children, cell=cell) == value
        # Code spans hold all of it but the pipes (escaped between them).
        plain = "".join(c.content for c in children if c.type == "text")
        assert set(plain.removeprefix("x ").removesuffix(" x") if not cell else plain) <= {"|"}


@each_visible_special("diff_text")
@given(visible_text(SPECIALS["diff_text"]))
def test_diff_markdown_text_renders_as_the_value(value: str) -> None:
    assert rendered(inline(md.text(value), cell=False), cell=False) == value


@each_special("markdown_text")
@given(STRATEGIES["markdown_text"])
def test_markdown_text_is_one_line_of_text_whatever_the_value(value: str) -> None:
    shown = markdown_text(value)
    assert "\n" not in shown and "\r" not in shown
    children = inline(shown, cell=False)
    assert {c.type for c in children} <= {"text"}


@each_special("diff_html")
@given(STRATEGIES["diff_html"])
def test_diff_html_is_text_inside_a_tag(value: str) -> None:
    from html.parser import HTMLParser

    parts: list[str] = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag: str, attrs: object) -> None:
            parts.append(f"<{tag}>")

        def handle_data(self, data: str) -> None:
            parts.append(data)

    parser = Collect(convert_charrefs=True)
    parser.feed(f"<b>{md.html(value)}</b>")
    parser.close()
    assert parts[0] == "<b>" and "".join(parts[1:]) == md.flat(value)


def test_decide_writes_target_names_as_code_that_shows_them() -> None:
    from tests.conftest import run_cli
    from tests.tree_fixtures import SHIPPED

    argv = ["decide", "--recipes", str(SHIPPED), "--event", "pull_request"]
    run = run_cli([*argv, "--format", "markdown"])
    assert run.code == 0, run.err
    codes = [
        c.content
        for t in RENDERER.parse(run.out)
        if t.type == "inline"
        for c in t.children or []
        if c.type == "code_inline"
    ]
    assert codes and all(name.startswith("github-") for name in codes)
    assert not any("\\" in name for name in codes)  # once github\-l0\-h100\-pr


# --- HTML: what a parser reads is the value ------------------------------------------


def _html_parts(markup: str) -> list[str]:
    from html.parser import HTMLParser

    parts: list[str] = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            parts.append(f"<{tag} {attrs}>")

        def handle_endtag(self, tag: str) -> None:
            parts.append(f"</{tag}>")

        def handle_data(self, data: str) -> None:
            parts.append(data)

    parser = Collect(convert_charrefs=True)
    parser.feed(markup)
    parser.close()
    return parts


def _shown(value: str) -> str:
    """The value as the HTML escapers show it: invisible characters as escapes."""
    return "".join(_code_of(c) if any_hidden(c) else c for c in value)


def _code_of(char: str) -> str:
    point = ord(char)
    return f"\\x{point:02x}" if point <= 0xFF else f"\\u{point:04x}"


@each_special("html_text")
@given(STRATEGIES["html_text"])
def test_html_text_is_the_text_of_its_element(value: str) -> None:
    shown = _shown(value)
    assert _html_parts(f"<p>{html_text(value)}</p>") == [
        "<p []>",
        *([shown] if shown else []),
        "</p>",
    ]


@each_special("html_attribute")
@given(STRATEGIES["html_attribute"])
def test_html_attribute_is_the_value_of_its_attribute(value: str) -> None:
    """Between double quotes or single ones alike."""
    for quote in "\"'":
        markup = f"<p title={quote}{html_attribute(value)}{quote}>x</p>"
        assert _html_parts(markup) == [f"<p {[('title', _shown(value))]}>", "x", "</p>"]


@each_special("markdown_link", pair=True)
@given(STRATEGIES["markdown_link"], STRATEGIES["safe_link"])
def test_markdown_link_is_one_link_or_text(text: str, url: str) -> None:
    tokens = RENDERER.parseInline(f"x {markdown_link(text, url)} x")[0].children or []
    links = [t for t in tokens if t.type == "link_open"]
    assert len(links) == (1 if safe_link(url) is not None else 0)
    assert {t.type for t in tokens} <= {"text", "link_open", "link_close", "softbreak"}
