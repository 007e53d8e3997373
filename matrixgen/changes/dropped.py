"""What change-based selection left out of each target, and what that saves."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from msgspec import Struct

from matrixgen.engine.changes import FALLBACK_TEXT, ChangeSelection
from matrixgen.model.jobs import Job, Target
from matrixgen.util.escape import markdown_code, terminal_text
from matrixgen.util.values import JsonLayout
from matrixgen.views.cost import Cost, hours, jobs_cost
from matrixgen.views.table import Column, Report

if TYPE_CHECKING:
    from matrixgen.pipeline import Generation


# The head of a change-based selection's JSON, and where each key is read.
DROPPED_HEAD = (
    ("ref", "selection.changes.ref"),
    ("changed_files", "selection.changes.files"),
    ("fallback", "selection.fallback"),
    ("fallback_reason", "fallback_reason"),
    ("gpu_hours_saved", "gpu_hours_saved"),
)


class Dropped(Struct, frozen=True, kw_only=True):
    """Per target: the jobs the change does not need, why, and their GPU-hours."""

    selection: ChangeSelection
    targets: tuple[tuple[Target, tuple[tuple[Job, str], ...], Cost], ...]

    @property
    def saved(self) -> Cost:
        return sum((cost for _, _, cost in self.targets), Cost())

    @property
    def fallback_reason(self) -> str | None:
        selection = self.selection
        if not selection.fallback:
            return None
        return f"{FALLBACK_TEXT[selection.fallback]} ({selection.fallback_detail})"

    @property
    def rows(self) -> tuple[TargetDropped, ...]:
        """A row per target: the jobs it drops, why, and the GPU-hours saved."""
        return tuple(
            TargetDropped(
                target=target.name,
                dropped=tuple(
                    DroppedJob(
                        job=f"{j.model}/{j.test_case}",
                        platform=j.platform,
                        environment=j.environment,
                        tag=j.tag or "",
                        reason=why,
                    )
                    for j, why in jobs
                ),
                gpu_hours_saved=round(cost.gpu_hours_max, 3),
            )
            for target, jobs, cost in self.targets
        )

    @property
    def gpu_hours_saved(self) -> float:
        return round(self.saved.gpu_hours_max, 3)

    # Its JSON (`--changed-since`'s `changes`): what changed, why everything runs
    # when it does, and the rows.
    JSON: ClassVar[JsonLayout] = JsonLayout(keys=(*DROPPED_HEAD, ("targets", "rows")))


class DroppedJob(Struct, frozen=True, kw_only=True):
    job: str  # model/test_case
    platform: str
    environment: str
    tag: str
    reason: str


class TargetDropped(Struct, frozen=True, kw_only=True):
    target: str
    dropped: tuple[DroppedJob, ...]
    gpu_hours_saved: float


def dropped_by_target(
    full: Generation, changed: Generation, targets: Sequence[Target], selection: ChangeSelection
) -> Dropped:
    # Keyed by identity, scope and cadence: a target's jobs carry quarantine marks.
    reasons = {job.sort_key(): why for job, why in selection.dropped}
    out = []
    for target in targets:
        if selection.fallback is not None:
            out.append((target, (), Cost()))
            continue
        kept = set(changed.jobs_for(target))
        gone = [j for j in full.jobs_for(target) if j not in kept]
        pairs = tuple((j, reasons.get(j.sort_key(), "not needed by the change")) for j in gone)
        out.append((target, pairs, jobs_cost(gone, target, full.tree.config)))
    return Dropped(selection=selection, targets=tuple(out))


def dropped_report(
    dropped: Dropped, runs: Mapping[str, str], code: Callable[[object], str] = markdown_code
) -> Report:
    """The targets with jobs left out: how many and the GPU-hours saved; in
    Markdown also what each still runs (`runs`, by name), its name as `code`."""
    columns = [Column("target", escape=code), Column("runs", text=False, escape=str, right=True)]
    columns += [Column(h, escape=str, right=True) for h in ("left out", "GPU-h saved")]
    left = [(t.name, len(jobs), hours(cost.gpu_hours_max)) for t, jobs, cost in dropped.targets]
    return Report(columns, [(name, runs.get(name), n, saved) for name, n, saved in left if n])


def render_dropped(dropped: Dropped, *, details: bool = True) -> str:
    """The summary line, a table of the targets with jobs left out, and (with
    details) one line per job left out with its reason."""
    selection = dropped.selection
    if selection.fallback is not None:
        return (
            f"change-based selection since {terminal_text(selection.changes.ref)}: the full "
            f"selection ({FALLBACK_TEXT[selection.fallback]}: "
            f"{terminal_text(selection.fallback_detail)})\n"
        )
    report = dropped_report(dropped, {})
    text = (
        f"change-based selection since {terminal_text(selection.changes.ref)}: "
        f"{len(selection.changes.files)} changed file(s); "
        f"{sum(len(j) for _, j, _ in dropped.targets)} job(s) left out over "
        f"{len(report.rows)} target(s), {hours(dropped.saved.gpu_hours_max)} GPU-h saved per run\n"
    )
    if report.rows:
        text += report.text()
        for target, jobs, _ in dropped.targets if details else ():
            for job, why in jobs:
                said = f"{job.model}/{job.test_case} on {job.platform}/{job.environment}: {why}"
                text += f"  {target.name}: {terminal_text(said)}\n"
    return text
