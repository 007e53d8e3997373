"""The project config's `triage` section: known failures.

    triage:
      known_failures:
        - pattern: 'The server socket has failed to listen on any local network address'
          tracker: "#8201"
          kind: infra

A failure whose message, or a line of its report's output (system-out,
system-err, the failure's text), a pattern matches is `known` to `triage`,
with that tracker and kind. The schema checks the section's shape; here each
pattern is checked where it is written (file, line, column): it must be one
that RE2 runs (`util.linear_regex`: time linear in the text, so no
backreference and no lookaround, which only a backtracking engine runs; a
nested quantifier such as `(a+)+` is harmless there), and must not match the
empty text (it would call every failure known).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from msgspec import Struct

from matrixgen.engine.errors import Findings, Location


class KnownFailure(Struct, frozen=True, kw_only=True):
    pattern: str
    tracker: str  # as written: "#N" or a URL
    kind: str  # a quarantine kind: infra, flaky, broken, ...
    location: Location = Location("")


class TriageSettings(Struct, frozen=True, kw_only=True):
    """The `triage` section, with defaults."""

    known_failures: tuple[KnownFailure, ...] = ()


NO_TRIAGE_SETTINGS = TriageSettings()


def parse_triage(
    raw: Any, locate: Callable[[Sequence[str | int]], Location], findings: Findings
) -> TriageSettings:
    """The section as the schema let it through (`raw`: the section's value,
    None when absent); a finding at each pattern RE2 refuses."""
    if not isinstance(raw, dict):
        return NO_TRIAGE_SETTINGS
    known: list[KnownFailure] = []
    for i, item in enumerate(raw.get("known_failures") or ()):
        if not isinstance(item, dict) or not isinstance(item.get("pattern"), str):
            continue  # the schema's finding
        from matrixgen.util.linear_regex import MAX_PATTERN, problem

        if len(item["pattern"]) > MAX_PATTERN:
            continue  # the schema's finding (maxLength)
        where = locate(["triage", "known_failures", i, "pattern"])
        pattern = item["pattern"]
        found = problem(pattern)
        if found is not None:
            findings.add(
                where,
                "config-known-failure",
                f"known failure pattern {_shown(pattern)}: {found}",
            )
            continue
        known.append(
            KnownFailure(
                pattern=pattern,
                tracker=str(item.get("tracker", "")),
                kind=str(item.get("kind", "")),
                location=where,
            )
        )
    return TriageSettings(known_failures=tuple(known))


def _shown(pattern: str) -> str:
    return f'"{pattern}"' if len(pattern) <= 80 else f'"{pattern[:80]}..."'
