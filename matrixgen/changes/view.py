"""`matrixgen diff --changed-view`: what change-based selection would run for the
files the branch itself changes (docs/cost.md). They are decided over the
head's tree as `--changed-since` decides (`Generation.for_changes`), and
priced per target with `views.cost`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from msgspec import Struct
from msgspec.structs import asdict

from matrixgen.changes.dropped import (
    DROPPED_HEAD,
    Dropped,
    TargetDropped,
    dropped_by_target,
    dropped_report,
    render_dropped,
)
from matrixgen.engine.changes import FALLBACK_TEXT, changed_files
from matrixgen.model.jobs import Job, Target
from matrixgen.util import markdown as md
from matrixgen.util.escape import terminal_text
from matrixgen.util.values import JsonLayout
from matrixgen.util.words import listed
from matrixgen.views.cost import hours

if TYPE_CHECKING:
    from matrixgen.pipeline import Generation

ITEMS = 50  # cases and files listed per section of the Markdown
TEXT_ITEMS = 8  # cases listed per target in the terminal (JSON lists all)
CASES_SHOWN = 200  # cases listed in the Markdown over every target


class ChangedView(Struct, frozen=True):
    dropped: Dropped
    # Per target of the head: the jobs change-based selection would run, of how many.
    runs: tuple[tuple[Target, tuple[Job, ...], int], ...]

    # Its JSON (`diff --changed-view`): the change-based selection's, each target
    # with the jobs it would run, of how many.
    JSON: ClassVar[JsonLayout] = JsonLayout(
        keys=(*((k, f"dropped.{path}") for k, path in DROPPED_HEAD), ("targets", "rows"))
    )

    @property
    def rows(self) -> tuple[TargetRuns, ...]:
        running = {t.name: (jobs, total) for t, jobs, total in self.runs}
        return tuple(
            TargetRuns(
                **asdict(row),
                jobs=running[row.target][1],
                runs=tuple(j.label for j in running[row.target][0]),
            )
            for row in self.dropped.rows
        )


class TargetRuns(TargetDropped, frozen=True, kw_only=True):
    """A target's dropped jobs, and the jobs it would run, of how many."""

    jobs: int
    runs: tuple[str, ...]


def changed_view(
    top: Path,
    path: str,
    base: str,
    head: str | None,
    generation: Generation,
    targets: Sequence[Target],
) -> ChangedView:
    """Change-based selection over the head's jobs for the branch's changes in `top`."""
    changes = changed_files(top, base, head)
    # The recipe tree holds its config and quarantine file ("" is the whole
    # repository: every change is a change of the tree).
    kept, selection = generation.for_changes(changes, [path])
    dropped = dropped_by_target(generation, kept, targets, selection)
    runs = tuple(
        (target, tuple(kept.jobs_for(target)), len(generation.jobs_for(target)))
        for target in targets
    )
    return ChangedView(dropped=dropped, runs=runs)


def render_changed_view(view: ChangedView, fmt: str, *, room: int | None = None) -> str:
    """The view in text (as `generate --changed-since` prints its summary) or
    Markdown; Markdown longer than `room` characters leaves out its lists."""
    if fmt == "markdown":
        text = _markdown(view, lists=True)
        return text if room is None or len(text) <= room else _markdown(view, lists=False)
    text = "\nchange-based selection for the files this branch changes:\n"
    text += render_dropped(view.dropped, details=False)
    if view.dropped.selection.fallback is None:
        for target, jobs, total in view.runs:
            if len(jobs) < total:
                shown = listed([j.label for j in jobs], TEXT_ITEMS) or "nothing"
                text += terminal_text(f"  {target.name} runs {len(jobs)} of {total}: {shown}")
                text += "\n"
    return text


def _markdown(view: ChangedView, *, lists: bool) -> str:
    selection = view.dropped.selection
    files = selection.changes.files
    out = [
        "",
        "#### Change-based selection for this branch",
        "",
        f"What {md.code('--changed-since ' + selection.changes.ref)} would run for the "
        f"{len(files)} file(s) this branch changes (since its merge base):",
        "",
    ]
    if selection.fallback is not None:
        out.append(
            f"> ⚠️ the full selection: {md.text(FALLBACK_TEXT[selection.fallback])} "
            f"({md.code(selection.fallback_detail)})"
        )
    else:
        left = [row for row in view.rows if row.dropped]
        total = sum(len(row.dropped) for row in left)
        out.append(
            f"**{total} job(s) left out** over {len(left)} target(s), "
            f"**{hours(view.dropped.saved.gpu_hours_max)} GPU-h saved** per run; "
            "every other target runs its full selection."
        )
        if left and not lists:
            out += ["", "_The lists are left out: they would pass the size of a comment._"]
        if left and lists:
            runs = {row.target: f"{len(row.runs)} of {row.jobs}" for row in left}
            out += ["", *dropped_report(view.dropped, runs, md.code).markdown()]
            items = []
            budget = CASES_SHOWN  # over every target: the JSON lists all
            for row in left:
                shown = row.runs[: max(0, min(ITEMS, budget))]
                budget -= len(shown)
                if not row.runs:
                    names = "nothing"
                elif not shown:
                    names = f"{len(row.runs)} case(s) (`--format json` lists them)"
                else:
                    names = listed([md.code(label) for label in row.runs], len(shown))
                items.append(f"- {md.code(row.target)}: {names}")
            more = [f"- … and {len(items) - ITEMS} more target(s)"] if len(items) > ITEMS else []
            out += md.details("The cases it would run there", [*items[:ITEMS], *more])
    if files and lists:
        named = listed([md.code(f) for f in files], ITEMS)
        out += md.details(f"{len(files)} changed file(s)", [named])
    return "\n".join(out) + "\n"
