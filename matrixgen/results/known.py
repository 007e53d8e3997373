"""Known failures: the project config's patterns (`triage.known_failures`)
matched against a failure (docs/evidence.md, "Known failures").

Patterns run on RE2 (util.linear_regex): time linear in the text, whatever the
pattern.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from msgspec import Struct

from matrixgen.results.junit import MESSAGE_LIMIT

if TYPE_CHECKING:
    from matrixgen.documents.config import ProjectConfig
    from matrixgen.documents.known_failures import KnownFailure
    from matrixgen.util.linear_regex import PatternSet


class KnownRef(Struct, frozen=True, kw_only=True):
    """The known failure a failure matched."""

    pattern: str
    tracker: str  # the resolved tracker URL, else the reference as written
    kind: str

    def introduction(self) -> str:
        """How a failure's evidence names it, before saying where it matched."""
        return f"a known {self.kind} failure (tracker {self.tracker}): "


class KnownFailures:
    """A config's known failures, compiled once (re2 is imported only when the
    config declares some)."""

    def __init__(self, declared: tuple[KnownFailure, ...], tracker_base: str | None) -> None:
        from matrixgen.quarantine.trackers import resolve_tracker

        self.refs = tuple(
            KnownRef(
                pattern=k.pattern,
                tracker=resolve_tracker(k.tracker, tracker_base) or k.tracker,
                kind=k.kind,
            )
            for k in declared
        )
        self._set: PatternSet | None = None
        if declared:
            from matrixgen.util.linear_regex import PatternSet

            self._set = PatternSet([k.pattern for k in declared])

    def __bool__(self) -> bool:
        return bool(self.refs)

    def watch(self, text: str) -> str | None:
        """The first line of `text` a pattern matches, cut to MESSAGE_LIMIT
        characters around the match."""
        if self._set is None:
            return None
        found = self._set.first_line(text, MESSAGE_LIMIT)
        return found[1] if found is not None else None

    def match(self, message: str | None, output_line: str | None) -> KnownRef | None:
        """The first declared known failure that matches either text."""
        if self._set is None:
            return None
        hits: set[int] = set()
        for text in (message, output_line):
            if text:
                hits.update(self._set.matching(text))
        return self.refs[min(hits)] if hits else None

    def explain(self, message: str | None, output_line: str | None) -> tuple[KnownRef, str] | None:
        """The known failure a failure matches and where: its message first."""
        where = ((message, "its message"), (output_line, f'a line of its output: "{output_line}"'))
        for text, place in where:
            if text and (ref := self.match(text, None)) is not None:
                return ref, place
        return None


NO_KNOWN_FAILURES = KnownFailures((), None)


def known_failures(config: ProjectConfig) -> KnownFailures:
    """The config's known failures, trackers resolved as the quarantine's are."""
    declared = config.triage.known_failures
    if not declared:
        return NO_KNOWN_FAILURES
    from matrixgen.quarantine.policy import policy

    return KnownFailures(declared, policy(config).tracker_base)
