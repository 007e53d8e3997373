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
