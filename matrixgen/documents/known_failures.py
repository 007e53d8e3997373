"""The project config's `triage` section: known failures, each pattern checked
where it is written: one RE2 runs (time linear in the text) and that does not
match the empty text (it would call every failure known).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from msgspec import Struct

from matrixgen.documents.config_sections import Triage
from matrixgen.model.errors import Findings, Location


class KnownFailure(Struct, frozen=True, kw_only=True):
    pattern: str
    tracker: str  # as written: "#N" or a URL
    kind: str  # a quarantine kind: infra, flaky, broken, ...
    location: Location = Location("")


class TriageSettings(Struct, frozen=True, kw_only=True):
    known_failures: tuple[KnownFailure, ...] = ()


NO_TRIAGE_SETTINGS = TriageSettings()


def parse_triage(
    section: Triage, locate: Callable[[Sequence[str | int]], Location], findings: Findings
) -> TriageSettings:
    """The section as the config declares it; a finding at each pattern RE2 refuses."""
    if not section.known_failures:
        return NO_TRIAGE_SETTINGS
    from matrixgen.util.linear_regex import problem

    known: list[KnownFailure] = []
    for i, item in enumerate(section.known_failures):
        where = locate(["triage", "known_failures", i, "pattern"])
        found = problem(item.pattern)
        if found is not None:
            findings.add(
                where,
                "config-known-failure",
                f"known failure pattern {_shown(item.pattern)}: {found}",
            )
            continue
        known.append(
            KnownFailure(pattern=item.pattern, tracker=item.tracker, kind=item.kind, location=where)
        )
    return TriageSettings(known_failures=tuple(known))


def _shown(pattern: str) -> str:
    return f'"{pattern}"' if len(pattern) <= 80 else f'"{pattern[:80]}..."'
