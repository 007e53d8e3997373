"""Patterns that a whole name must match.

Python's `$` also matches before a final line break, so `^[a-z]+$` takes
"abc\\n"; `Pattern.match` takes any string that starts right; and `\\d`, `\\w`
and `\\s` take every Unicode digit, letter and blank. A name that passes such a
check can still break where it goes (a line of `$GITHUB_OUTPUT`, a URL). So
every check of a name against a pattern is `whole(pattern, text)` on a pattern
made by `name_pattern`: the whole text, with ASCII classes, as JavaScript (the
JSON Schemas' language) and GitHub's and GitLab's own name rules read them.
"""

from __future__ import annotations

import re

# A character that is not blank to Python (str.isspace) nor to JavaScript (\s
# of either: they differ on \x1c-\x1f, \x85 and \ufeff): the same class in
# both, with or without ASCII or Unicode flags. The JSON Schemas write it
# `[^\s\x1c-\x1f\x85\ufeff]`, the same set where `\s` is Unicode's (there, in both).
NON_BLANK = r"[^\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]"


def name_pattern(regex: str, flags: int = 0) -> re.Pattern[str]:
    """A compiled pattern for `whole`: `\\d`, `\\w` and `\\s` are ASCII, and no
    anchors are needed (`tests/test_patterns.py` refuses a `$` in any pattern of
    the package: it is not the end of the text)."""
    return re.compile(regex, flags | re.ASCII)


def whole(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """The match of `pattern` over all of `text` (never a prefix, never the text
    less a final line break), or None."""
    return pattern.fullmatch(text)
