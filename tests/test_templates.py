"""`{field}` templates: plain placeholders only, every missing field named."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from matrixgen.engine.templates import TemplateError, placeholders, render


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
