"""The evidence beside each quarantine entry a selection diff lists
(docs/evidence.md): every entry the diff names gets the notes the contributions
it is handed give it (`views.contributions.DiffContribution`), judged on the
side that has the entry: the head's, else (an entry the branch removes) the
base's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from matrixgen.diff.model import SelectionDiff
from matrixgen.model.jobs import QuarantineMark
from matrixgen.views.contributions import DiffContribution

if TYPE_CHECKING:
    from matrixgen.pipeline import Generation


def mark_ids(mark: QuarantineMark) -> list[str]:
    """The entries behind a mark (several entries on one job combine their ids)."""
    return [part for part in mark.id.split(", ") if part]


def evidence_of(mark: QuarantineMark, evidence: Mapping[str, str]) -> str | None:
    """The evidence line of a mark's entry (each entry's, named, for a combined
    mark); None when there is none for any of them."""
    ids = [i for i in mark_ids(mark) if i in evidence]
    if not ids:
        return None
    if len(ids) == 1 and len(mark_ids(mark)) == 1:
        return evidence[ids[0]]
    return "; ".join(f"{i}: {evidence[i]}" for i in ids)


def listed_entries(diff: SelectionDiff) -> list[str]:
    """Every entry id the diff names, sorted."""
    marks = [m for t in diff.targets for q in t.quarantine for m in (q.old, q.new)]
    marks += [j.quarantine for t in diff.targets for j in (*t.added, *t.removed)]
    return sorted({i for mark in marks if mark is not None for i in mark_ids(mark)})


def diff_evidence(
    diff: SelectionDiff,
    generations: Sequence[Generation],
    contributions: Sequence[DiffContribution],
    options: Mapping[str, object],
) -> dict[str, str] | None:
    """{entry id: its note} for the entries the diff names, from each
    contribution handed over (`cli/features`), sorted; None when none of them
    has anything to say of this diff."""
    wanted = frozenset(listed_entries(diff))
    said = [n for c in contributions if (n := c.computed(generations, wanted, options)) is not None]
    found = {entry: note for notes in said for entry, note in notes.items()}  # the later wins
    return dict(sorted(found.items())) if said else None
