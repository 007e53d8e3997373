"""`{field}` templates: plain placeholders only, every missing field named."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from matrixgen.model.templates import TemplateError, placeholders, render


def test_render_and_escapes() -> None:
    fields = {"test_case": "tc", "environment": "dev", "n": 3}
    assert render("{test_case}_{environment}", fields) == "tc_dev"
    assert render("${{HOME}}/{test_case}", fields) == "${HOME}/tc"
    assert render("{n:03d}", fields) == "003"
    assert placeholders("{a}{b}{a}") == ("a", "b")


@pytest.mark.parametrize(
    "template,message",
    [
        ("{missing}_{other}", "{missing}, {other} does not resolve"),
        ("{test_case.__class__}", "not a plain field name"),
        ("{test_case[0]}", "not a plain field name"),
        ("{0}", "not a plain field name"),
        ("{test_case", "malformed template"),
        ("{test_case!x}", "unsupported conversion"),
    ],
)
def test_bad_templates(template: str, message: str) -> None:
    with pytest.raises(TemplateError, match=message.replace("{", r"\{").replace("[", r"\[")):
        render(template, {"test_case": "tc"})


@given(st.text(alphabet=st.characters(blacklist_characters="{}"), max_size=40))
def test_text_without_braces_renders_to_itself(text: str) -> None:
    assert render(text, {}) == text


@pytest.mark.parametrize("spec", [">100000000", ".999999999f", "01000d", "_>2000"])
def test_huge_widths_are_refused_before_any_work(spec: str) -> None:
    # Rendered for every job, one such placeholder would hang the run and
    # exhaust memory; the message says so instead.
    with pytest.raises(TemplateError, match="at most 999"):
        render("{x:" + spec + "}", {"x": 1.5})


def test_ordinary_widths_still_render() -> None:
    assert render("{x:>999}", {"x": "a"}) == " " * 998 + "a"
    assert render("{x:.2f}|{y:08.3f}", {"x": 1.0, "y": 2.0}) == "1.00|0002.000"


_NAMES = st.sampled_from(["model", "test_case", "platform", "n", "x1"])
_LITERAL = st.text(alphabet=st.characters(blacklist_characters="{}"), max_size=6)


@example([("", "n", ":x"), ("-", "model", "")], {"n": "text"})  # a format error, then a gap
@given(
    st.lists(st.tuples(_LITERAL, _NAMES, st.sampled_from(["", ":>4", "!r", ":x"])), max_size=5),
    st.dictionaries(_NAMES, st.one_of(st.text(max_size=5), st.integers(0, 99)), max_size=5),
)
def test_render_is_str_format_and_names_every_missing_field(
    parts: list[tuple[str, str, str]], fields: dict
) -> None:
    """Whatever fails first, a missing field is the error; otherwise the text is
    what str.format gives (or its format error, on the same placeholder)."""
    template = "".join(f"{lit}{{{name}{spec}}}" for lit, name, spec in parts)
    used = list(dict.fromkeys(name for _, name, _ in parts))
    missing = [n for n in used if n not in fields]
    if missing:
        names = ", ".join(f"{{{m}}}" for m in missing)
        with pytest.raises(TemplateError, match=re.escape(f"placeholder {names} does not")):
            render(template, fields)
        return
    try:
        expected = template.format(**fields)
    except (ValueError, TypeError):
        with pytest.raises(TemplateError, match="placeholder"):
            render(template, fields)
        return
    assert render(template, fields) == expected
