"""Markdown that says what its input says and nothing more.

Every string a comment shows comes from a recipe tree or a quarantine file, that is
from a pull request: a test case, a tracker or a note may hold Markdown, HTML
or line breaks meant to forge a comment (a fake "all clear" line, a link to
`javascript:`, an image that calls home). Each helper makes one kind of text
safe for one place.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from matrixgen.util.escape import markdown_code
from matrixgen.util.patterns import name_pattern, whole

_CONTROL = re.compile(r"[\x00-\x1f\x7f\u0085\u2028\u2029]")
# ASCII punctuation that can mean something to Markdown or HTML (`, ; ' " = / % ?`
# cannot, and stay as they are for readability).
_PUNCTUATION = re.compile(r"([!#$&*+\-.<>@\[\\\]^_`{|}~])")
_ISSUE_NUMBER = name_pattern(r"#\d+")
_SAFE_URL = name_pattern(r"https?://[A-Za-z0-9\-._~:/?#@!$&*+,;=%]+")
CODE_LIMIT = 200


def flat(value: str) -> str:
    """One line: every line break and control character becomes a space."""
    return _CONTROL.sub(" ", value)


def text(value: object) -> str:
    """Running text that renders as exactly these characters: on one line, every
    ASCII punctuation character that could mean something backslash-escaped
    (CommonMark allows that for all of them), so nothing in it starts a tag, a
    link, an emphasis, an entity or a new block."""
    return _PUNCTUATION.sub(r"\\\1", flat(str(value)))


def code(value: object, *, limit: int = CODE_LIMIT) -> str:
    """Inline code of the value on one line, cut to `limit` characters."""
    shown = flat(str(value))
    if len(shown) > limit:
        shown = shown[: limit - 3] + "..."
    return markdown_code(shown)


def safe_url(url: str) -> str | None:
    """The address itself when it is a plain http(s) URL, else None."""
    return url if whole(_SAFE_URL, url) else None


def link(label: str, url: str) -> str:
    """`[label](url)` for a plain http(s) URL; the label as code otherwise."""
    target = safe_url(url)
    if target is None:
        return code(label)
    shown = label if whole(_ISSUE_NUMBER, label) else text(label)
    return f"[{shown}]({target})"


def html(value: str) -> str:
    """Text inside an HTML element the diff writes itself (`<details>`,
    `<summary>`, `<b>`), with `& < > " '` as entities."""
    return (
        flat(value)
        .replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&#39;")
    )


def details(summary: str, body: Sequence[str], indent: str = "") -> list[str]:
    """A folded block after a blank line: the summary (safe HTML) shown, the
    body (safe Markdown) behind it, set apart by blank lines."""
    opened = f"{indent}<details><summary>{summary}</summary>"
    return ["", opened, "", *body, "", f"{indent}</details>"]


def capped(items: list[str], limit: int) -> list[str]:
    """The first `limit` items of a list, then a last one saying how many more."""
    if len(items) <= limit:
        return items
    return [*items[:limit], f"- … and {len(items) - limit} more (`--format json` lists all)"]


def fence_lines(lines: Sequence[str], info: str = "", indent: str = "") -> list[str]:
    """A fenced code block holding the lines as they are (control characters, which
    CommonMark may read as line ends, shown as spaces)."""
    body = [flat(line) for line in lines]
    longest = max((len(run) for line in body for run in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{indent}{fence}{info}", *(f"{indent}{line}" for line in body), f"{indent}{fence}"]
