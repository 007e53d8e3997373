"""The PR comment says what its input says and nothing more: hostile test cases,
trackers, entry ids, target names and notes (they come from pull requests)
never add a tag, a link, an image or a line to it."""

from __future__ import annotations

import re
from typing import Any

import markdown_it
from hypothesis import given, settings
from hypothesis import strategies as st

from matrixgen.diff.comment import render_markdown
from matrixgen.diff.model import (
    QUARANTINED,
    ChangedJob,
    DuplicateNote,
    QuarantineChange,
    SelectionDiff,
    TargetDiff,
)
from matrixgen.model.errors import Location
from matrixgen.model.jobs import Job, QuarantineMark, Selector, Target
from matrixgen.model.vocab import System
from matrixgen.util import markdown as md
from matrixgen.views.cost import Cost

ATTACKS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "![x](https://evil.example/p.png)",
    "[click](javascript:alert(1))",
    "[ok](https://example.com/)",
    "<https://evil.example>",
    "\n\n# All clear\n",
    "\r\n| fake | row |\n",
    "</details><details open>",
    "<!-- -->",
    "`",
    "``` \n",
    "&lt;b&gt;",
    "*bold* _em_ ~~s~~",
    "a@b.example",
    "javascript:alert(1)",
    "https://github.com/x/y/issues/1)[evil](javascript:alert(1)",
    "\u2028# line separator",
    "\\",
    "|",
]
hostile = st.one_of(
    st.sampled_from(ATTACKS),
    st.lists(st.sampled_from(ATTACKS), min_size=1, max_size=3).map("".join),
    st.text(alphabet=st.sampled_from(list("<>[]()!`*_|#&\\\n\r: x/")), max_size=20),
)
single_line = hostile.map(lambda s: s.replace("\n", " ").replace("\r", " "))


def job(case: str, model: str, tag: str | None, mark: QuarantineMark | None = None) -> Job:
    return Job(
        model=model,
        test_case=case,
        environment="dev",
        platform="dgx_h100",
        tag=tag,
        scope="mr",
        cadence=("pr",),
        name=case,
        build=None,
        n_repeat=5,
        time_limit=2700,
        quarantine=mark,
    )


def sample(s: dict[str, str]) -> SelectionDiff:
    """One diff of fixed shape; every string in it is one of `s`."""
    mark = QuarantineMark(id=s["entry"], tracker=s["tracker"], action="skip", kind=s["kind"])
    targets = []
    for i in range(2):
        target = Target(
            name=f"{s['target']}{i}",
            system=System.GITLAB,
            selector=Selector(scope=s["scope"], platform="dgx_h100", environment=f"e{i}"),
        )
        a, b = job(s["case"], s["model"], s["tag"]), job(s["case"], s["model"], s["tag"], mark)
        targets.append(
            TargetDiff(
                target=target,
                added=(job(s["case"] + "+", s["model"], s["tag"]),),
                removed=(job(s["case"] + "-", s["model"], None),),
                changed=(ChangedJob(a, a, {s["field"]: (s["old"], s["new"])}),),
                quarantine=(QuarantineChange(QUARANTINED, a, b),),
                duplicates=(DuplicateNote("added", a, (Location(s["file"], 3, 5),)),),
                settings={s["field"]: (s["old"], s["new"])},
                base_jobs=1,
                head_jobs=2,
                # A cost change: its pipeline (the hostile scope) is listed.
                base_cost=Cost(jobs=1, gpu_hours_max=30, weighted_max=30),
                head_cost=Cost(jobs=2, gpu_hours_max=60, weighted_max=90),
            )
        )
    return SelectionDiff(
        base=s["base"],
        head="worktree",
        targets=tuple(targets),
        notes=(s["note"],),
        # A results store's evidence: its strings come from ingested reports.
        evidence={s["entry"]: s["evidence"]},
    )


KEYS = (
    "entry",
    "tracker",
    "kind",
    "target",
    "case",
    "model",
    "tag",
    "file",
    "note",
    "base",
    "scope",
    "evidence",
)
SINGLE = ("field", "old", "new")

ALLOWED_HTML = [
    re.compile(r"<!-- matrixgen-diff -->\n"),
    re.compile(r"<details><summary>[^<>]*</summary>\n"),
    re.compile(r"<details><summary><b>[^<>]*</b>[^<>]*</summary>\n"),
    re.compile(r"</details>\n?"),
]


def parse(text: str) -> list[Any]:
    return markdown_it.MarkdownIt("commonmark").enable("table").parse(text)


def walk(tokens: list[Any]) -> list[Any]:
    out = []
    for token in tokens:
        out.append(token)
        out.extend(walk(token.children or []))
    return out


def shape(tokens: list[Any]) -> list[tuple[str, int]]:
    """The block structure: every block token's type and depth, no text."""
    return [(t.type, t.level) for t in tokens if t.type != "inline"]


@settings(max_examples=150, deadline=None)
@given(
    strings=st.fixed_dictionaries(
        {**{k: hostile for k in KEYS}, **{k: single_line for k in SINGLE}}
    )
)
def test_no_input_adds_a_tag_a_link_an_image_or_a_line(strings: dict[str, str]) -> None:
    text = render_markdown(sample(strings))
    tokens = parse(text)
    every = walk(tokens)
    assert not [t for t in every if t.type == "image"]
    for token in every:
        if token.type in ("html_block", "html_inline"):
            assert any(p.fullmatch(token.content) for p in ALLOWED_HTML), token.content
        if token.type == "link_open":
            href = token.attrGet("href")
            assert re.match(r"https?://", href), href
            assert md.safe_url(strings["tracker"].split(", ")[0]) or any(
                md.safe_url(part) for part in strings["tracker"].split(", ")
            )
    # The same blocks, in the same nesting, as with harmless strings: nothing
    # in the input started a heading, a list item, a table row or a paragraph.
    plain = {k: "x" for k in (*KEYS, *SINGLE)}
    assert shape(tokens) == shape(parse(render_markdown(sample(plain))))
    headings = [t for t in tokens if t.type == "heading_open"]
    assert len(headings) == 1
    rows = [t for t in tokens if t.type == "tr_open"]
    assert len(rows) == 1 + 2  # the header and one row per changed target


def test_links_only_to_plain_http_addresses() -> None:
    assert md.link("#1", "https://github.com/o/r/issues/1") == (
        "[#1](https://github.com/o/r/issues/1)"
    )
    assert md.link("#1 <b>", "https://x.example/") == "[\\#1 \\<b\\>](https://x.example/)"
    for url in ("javascript:alert(1)", "https://x/)(y", "http://a b", "data:text/html,x"):
        assert md.safe_url(url) is None
        assert "](" not in md.link("x", url)


def test_text_renders_as_exactly_its_characters() -> None:
    for value in ATTACKS:
        (paragraph,) = [t for t in parse(md.text(value)) if t.type == "inline"] or [None]
        if paragraph is None:
            continue
        children = paragraph.children or []
        assert {c.type for c in children} <= {"text", "softbreak"}, value
        shown = "".join(c.content for c in children if c.type == "text")
        assert shown == md.flat(value).strip(), value


def test_the_text_report_keeps_one_line_per_entry() -> None:
    from matrixgen.diff.render import render_text

    strings = {k: "x" for k in (*KEYS, *SINGLE)}
    plain = render_text(sample(strings)).count("\n")
    strings.update(case="a\n::error::forged", note="n\r\nnote: all clear", target="t\x1b[2J")
    text = render_text(sample(strings))
    assert text.count("\n") == plain
    assert "\x1b" not in text and not any(line.startswith("::") for line in text.splitlines())
