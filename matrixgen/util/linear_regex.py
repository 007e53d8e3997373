"""Patterns a project writes (known failures), run in time linear in the text
(docs/security.md).

Both the pattern and the text it searches come from pull requests, and Python's
`re` backtracks, so patterns run on RE2 (the `google-re2` package), imported
only when a pattern is checked or run: most commands read no pattern.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

# A pattern's length (characters): a regular expression for one failure line.
MAX_PATTERN = 1000
# RE2's memory for one compiled set (its DFA falls back to a slower, still
# linear, automaton past it).
_MAX_MEM = 32 << 20


@lru_cache(maxsize=1)
def _options() -> Any:
    import re2

    options = re2.Options()
    options.log_errors = False  # RE2 would print its own message to stderr
    options.never_nl = True  # a match lies within one line
    options.max_mem = _MAX_MEM
    return options


def problem(pattern: str) -> str | None:
    """Why `pattern` cannot be a known-failure pattern (None: it can): too
    long, not RE2 syntax (a backreference, a lookaround: what only a
    backtracking engine runs), or matching the empty text (it would match
    every failure)."""
    if not pattern.strip():
        return "the pattern is empty"
    if len(pattern) > MAX_PATTERN:
        return f"the pattern has {len(pattern):,} characters (at most {MAX_PATTERN:,})"
    import re2

    try:
        compiled = re2.compile(pattern, _options())
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        return (
            f"{detail} (patterns run on RE2, in time linear in the text: no backreferences, "
            "no lookahead or lookbehind, which only a backtracking engine runs)"
        )
    if compiled.search("") is not None:
        return "the pattern matches the empty text, so it would match every failure"
    return None


class PatternSet:
    """Patterns checked by `problem` (one it refuses raises ValueError),
    searched together in one pass over a text: `matching(text)` says which
    match a line of it, `first_line(text, limit)` which line matched first."""

    def __init__(self, patterns: Sequence[str]) -> None:
        import re2

        self.patterns = tuple(patterns)
        self._one: list[Any] = []
        self._set: Any = None
        for pattern in self.patterns:
            found = problem(pattern)
            if found is not None:
                raise ValueError(f"{pattern!r}: {found}")
            self._one.append(re2.compile(pattern, _options()))
        if self.patterns:
            self._set = re2.Set.SearchSet(_options())
            for pattern in self.patterns:
                self._set.Add(pattern)
            self._set.Compile()

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def matching(self, text: str) -> list[int]:
        """The indexes of the patterns that match within a line of `text`, in order."""
        if self._set is None or not text:
            return []
        return sorted(self._set.Match(_utf8(text)) or ())

    def first_line(self, text: str, limit: int) -> tuple[int, str] | None:
        """(pattern index, line) of the earliest match in `text` (the lowest
        index of the patterns that match there), the line cut to `limit`
        characters that end where the match ends when it is longer."""
        if self._set is None or not text:
            return None
        data = _utf8(text)
        spans = [
            (match.start(), index, match.end())
            for index in self._set.Match(data) or ()
            if (match := self._one[index].search(data)) is not None
        ]
        if not spans:
            return None
        start, index, end = min(spans)
        line_start = data.rfind(b"\n", 0, start) + 1
        line_end = data.find(b"\n", end)
        before = data[line_start:end].decode("utf-8", "replace")
        after = data[end : line_end if line_end >= 0 else len(data)].decode("utf-8", "replace")
        line = before + after
        if len(line) > limit:
            cut = len(before)
            line = line[max(0, cut - limit) : max(0, cut - limit) + limit]
        return index, line


def _utf8(text: str) -> bytes:
    """The text as RE2 reads it: UTF-8 (a lone surrogate, which no XML report
    holds, as "?")."""
    return text.encode("utf-8", "replace")
