"""Every relative link and #anchor of README.md and docs/*.md resolves, and every
page of docs/ is linked from the README: a broken link or a page no one can
reach fails here. (A checker, not a site generator: the pages are read on the
forge, where these links are the ones that must work.)"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

pytestmark = pytest.mark.docs

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


def _tokens(path: Path) -> list:
    return MarkdownIt("commonmark").enable("table").parse(path.read_text(encoding="utf-8"))


def _plain(inline) -> str:
    return "".join(
        child.content for child in inline.children or [] if child.type in ("text", "code_inline")
    )


def slug(text: str) -> str:
    """A heading's anchor as GitHub makes it."""
    text = text.strip().lower()
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LNM")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    tokens = _tokens(path)
    for i, token in enumerate(tokens):
        if token.type != "heading_open":
            continue
        base = slug(_plain(tokens[i + 1]))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def links(path: Path) -> list[tuple[int, str]]:
    out = []
    for token in _tokens(path):
        if token.type != "inline":
            continue
        for child in token.children or []:
            href = child.attrs.get("href") or child.attrs.get("src")
            if child.type in ("link_open", "image") and href:
                out.append(((token.map or [0])[0] + 1, str(href)))
    return out


def broken(path: Path) -> list[str]:
    problems = []
    for line, href in links(path):
        if EXTERNAL.match(href):
            continue
        target, _, anchor = href.partition("#")
        file = (path.parent / target).resolve() if target else path
        where = f"{path.relative_to(REPO)}:{line}: {href}"
        if not file.exists():
            problems.append(f"{where}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            problems.append(f"{where}: no heading with that anchor in {file.name}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    assert broken(page) == []


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {(REPO / href.partition("#")[0]).resolve() for _, href in links(REPO / "README.md")}
    assert [p.name for p in PAGES[1:] if p.resolve() not in linked] == []


def test_the_checker_sees_a_broken_link_and_a_wrong_anchor(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# The `diff` page: what it says\n\n## Again\n## Again\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#the-diff-page-what-it-says) [ok](other.md#again-1) [web](https://x.org/y)\n"
        "[gone](missing.md) [anchor](other.md#nowhere) [self](#nowhere-here)\n"
    )
    global REPO
    saved, REPO = REPO, tmp_path
    try:
        problems = broken(page)
    finally:
        REPO = saved
    assert [p.split(": ", 1)[1] for p in problems] == [
        "missing.md: no such file",
        "other.md#nowhere: no heading with that anchor in other.md",
        "#nowhere-here: no heading with that anchor in page.md",
    ]
