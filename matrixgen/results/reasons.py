"""A failure's reason: what two failures must share to be "the same failure"
(docs/evidence.md, "A failure's reason").

Masking is one pass of one pattern over at most MESSAGE_LIMIT characters, so
its cost is bounded; it is idempotent (a placeholder has no digit, and a quote
or path is recognised only at the start, after a blank or an opening bracket),
which tests/test_results_reasons.py checks over any text. The reasons are
stored (results.reason): a change to this masking needs a migration.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from msgspec import Struct

from matrixgen.results.junit import MESSAGE_LIMIT, Outcome
from matrixgen.util.escape import markdown_code, markdown_text, terminal_text
from matrixgen.util.words import listed

# A reason's length: the kind, and the masked line, cut (a placeholder is
# longer than one digit: "1 2 3" masks to "<n> <n> <n>").
REASON_LIMIT = 300

# Where a quoted value or a path may start: the text's start, after a blank
# or one of these (the dot of pytest's "...'layer.2'" among them). Not after a
# letter or digit (the apostrophe of "can't" opens nothing), nor after a
# placeholder's ">" or a quote (masking again changes nothing).
_OPEN = r"(?:(?<=[\s(\[{=:,;.])|\A)"
_TEMP_ROOTS = r"(?:/tmp|/var/tmp|/dev/shm|(?:/private)?/var/folders)"
_WINDOWS_TEMP = r"[A-Za-z]:\\(?:[^\s'\"\\]+\\)*?(?:[Tt][Ee][Mm][Pp]|tmp)"
_MASK = re.compile(
    "|".join(
        (
            # Paths under temporary folders (POSIX, macOS, Windows): to the next
            # blank or quote, punctuation that ends a clause left out.
            rf"(?P<tmp>{_OPEN}(?:{_TEMP_ROOTS}|{_WINDOWS_TEMP})(?:[/\\][^\s'\"]*?)?"
            r"(?=[:,;.)\]]*(?:[\s'\"]|\Z)))",
            # Quoted values: to the next same quote.
            rf"(?P<q1>{_OPEN}'[^']*')",
            rf"(?P<q2>{_OPEN}\"[^\"]*\")",
            # IPv4 (with a port), IPv6 (three groups or more, a digit among them),
            # memory addresses.
            r"(?P<addr>\b(?:[0-9]{1,3}\.){3}[0-9]{1,3}(?::[0-9]+)?\b"
            r"|\b(?=[0-9A-Fa-f:]*[0-9])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{1,4}\b"
            r"|\b0[xX][0-9A-Fa-f]+\b)",
            # Hex ids (commits, hashes, UUIDs): a word of six hex digits or more,
            # one of them a digit; the same placeholder as a number, which a
            # hex id of digits alone is.
            r"(?P<n>\b(?=[0-9A-Fa-f-]*[0-9])[0-9A-Fa-f]{6,}(?:-[0-9A-Fa-f]+)*\b(?!\.[0-9])"
            # Numbers, with a fraction and an exponent.
            r"|[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)",
            # Runs of blanks.
            r"(?P<blank>[ \t\f\v]+)",
        )
    ),
    re.ASCII,
)
_SHOWN = {
    "tmp": "<tmp>",
    "q1": "'<q>'",
    "q2": '"<q>"',
    "addr": "<addr>",
    "n": "<n>",
    "blank": " ",
}
_FIRST_LINE = re.compile(r"[^\r\n]*")


def _shown(match: re.Match[str]) -> str:
    return _SHOWN[match.lastgroup or "blank"]


def mask(text: str) -> str:
    """The first line of `text` (to the first CR or LF) with what changes from
    run to run masked (see the module). Callers cut the text first (`reason`:
    to MESSAGE_LIMIT characters): the cost grows with the line's length."""
    line = _FIRST_LINE.match(text)  # prefix: the text up to its first line break
    assert line is not None  # the pattern matches the empty text
    return _MASK.sub(_shown, line.group()).strip(" ")


def kind_of(outcome: Outcome, muted_from: Outcome | None = None) -> str:
    """`failure` or `error`, as the report's element was named (a muted
    record: its outcome before the mute; unknown, as in results stored
    before schema 6: `failure`)."""
    return "error" if (muted_from or outcome) is Outcome.ERROR else "failure"


def reason(kind: str, message: str) -> str:
    """A failed result's reason: `failure: <masked first line>`, or the kind
    alone with "(no message)" when the message has no first line to mask."""
    masked = mask(message[:MESSAGE_LIMIT])
    text = f"{kind}: {masked}" if masked else f"{kind} (no message)"
    return text[:REASON_LIMIT]


class ReasonGroup(Struct, frozen=True, kw_only=True):
    """Failures with one reason: how many, and which tests (a test failing in
    several jobs, on several platforms say, is one test)."""

    reason: str
    tests: tuple[str, ...]  # sorted
    count: int  # failures

    def sentence(self) -> str:
        """The group in words: "17 failures in 9 tests share one reason", "3
        failures of one test share one reason", "1 failure with this reason"."""
        tests = len(self.tests)
        failures = f"{self.count} failure{'' if self.count == 1 else 's'}"
        if tests > 1:
            return f"{failures} in {tests} tests share one reason"
        if self.count > 1:
            return f"{failures} of one test share one reason"
        return f"{failures} with this reason"

    def text(self) -> str:
        """For a terminal: its sentence and its reason, then its tests, one a line."""
        tests = "".join(f"  {terminal_text(test)}\n" for test in self.tests)
        return f"{self.sentence()}: {terminal_text(self.reason)}\n{tests}"

    def markdown(self, limit: int | None = None) -> str:
        """A Markdown list item: its sentence, its reason, its tests (the first `limit`)."""
        tests = [markdown_code(test) for test in self.tests]
        said = f"**{markdown_text(self.sentence())}:** {markdown_code(self.reason)}"
        return f"- {said}: {listed(tests, len(tests) if limit is None else limit)}"


def group_reasons(failures: Iterable[tuple[str, str, int]]) -> tuple[ReasonGroup, ...]:
    """(reason, test, failures) triples grouped by reason: the most failures
    first, then the most tests, then by reason."""
    tests: dict[str, set[str]] = {}
    counts: dict[str, int] = {}
    for why, test, count in failures:
        tests.setdefault(why, set()).add(test)
        counts[why] = counts.get(why, 0) + count
    groups = [ReasonGroup(reason=r, tests=tuple(sorted(tests[r])), count=counts[r]) for r in counts]
    groups.sort(key=lambda g: (-g.count, -len(g.tests), g.reason))
    return tuple(groups)
