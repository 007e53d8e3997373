"""The fast paths of util.escape (one regex scan over a whole text) give what
escaping character by character and line by line gives."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from matrixgen.util import escape

_TEXT = st.text(
    alphabet=st.sampled_from(
        [
            *':# [\\]\t\n\rab{}"',
            "\x85",
            "\u200b",
            "\u202e",
            "é",
            "\xa0",
            "\u2028",
            "\x7f",
            "\x0b",
            "\x00",
            "\U0001f600",
            "\u3000",
        ]
    ),
    max_size=40,
)


def _hidden_anywhere(text: str, allowed: str = "") -> bool:
    return any(escape._hidden(c) for c in text if c not in allowed)


@given(_TEXT)
def test_terminal_lines_is_terminal_line_on_each_line(text: str) -> None:
    expected = "\n".join(escape.terminal_line(line) for line in text.split("\n"))
    assert escape.terminal_lines(text) == expected


@given(_TEXT)
def test_json_for_log_escapes_each_hidden_character(text: str) -> None:
    expected = text
    if _hidden_anywhere(text, "\n\t\r "):
        expected = "".join(
            escape._json_code(c) if c not in "\n\t\r " and escape._hidden(c) else c for c in text
        )
    assert escape.json_for_log(text) == expected.replace("##[", "##\\u005b")


@given(_TEXT)
def test_yaml_double_quoted_sees_every_hidden_character(text: str) -> None:
    expected = "##[" in text or text.lstrip().startswith(":") or _hidden_anywhere(text)
    assert escape.yaml_double_quoted(text) == expected


def test_a_big_plain_text_is_returned_as_it_is() -> None:
    text = "\n".join(f'  "key{i}": "value {i} é"' for i in range(100_000)) + "\n"
    assert escape.terminal_lines(text) is text
    assert escape.json_for_log(text) == text


_PATTERNS = {
    "every": (escape._MAYBE_HIDDEN, ""),
    "lines": (escape._MAYBE_HIDDEN_IN_LINES, "\t\n"),
    "json": (escape._MAYBE_HIDDEN_IN_JSON, "\t\n\r"),
}


@given(
    st.one_of(
        _TEXT,
        # Lone surrogates (an undecodable file name carries them), C1 controls,
        # soft hyphen, byte-order mark: each side of every category boundary.
        st.text(
            st.sampled_from([*"\ud800\udc80\x1b\x1f\x80\x9f\xad\ufeff\x7e\x20a\n\t\r"]),
            max_size=40,
        ),
        st.text(st.characters(exclude_categories=()), max_size=40),
        st.text(st.characters(max_codepoint=127), max_size=40),
    ),
    st.sampled_from(sorted(_PATTERNS)),
)
def test_any_hidden_is_hidden_on_each_character(text: str, which: str) -> None:
    maybe, allowed = _PATTERNS[which]
    assert escape._any_hidden(text, maybe) == _hidden_anywhere(text, allowed)


def test_any_hidden_finds_one_character_in_a_big_text() -> None:
    plain = "\n".join(f"\tline {i} é \U0001f600" for i in range(10_000))
    assert not escape._any_hidden(plain, escape._MAYBE_HIDDEN_IN_LINES)
    for hidden in ("\x00", "\x1b", "\x7f", "\x85", "\u202e", "\u2028", "\ud800"):
        text = plain[:5000] + hidden + plain[5000:]
        assert escape._any_hidden(text, escape._MAYBE_HIDDEN_IN_LINES), repr(hidden)
    assert escape._any_hidden(plain, escape._MAYBE_HIDDEN)  # tabs and line breaks
