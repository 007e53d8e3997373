"""What a selection costs in GPU-hours (docs/cost.md): a job holds
`nodes x gpus` GPUs for up to `n_repeat` repeats of `time_limit` (or, where a
results store measured them, the measured seconds), weighted by its platform's
`gpu_hour_weight`. A job a quarantine entry skips costs nothing; an
allow-failure one still runs."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from msgspec import Struct, defstruct

from matrixgen.documents.config import ProjectConfig
from matrixgen.model.errors import RecipeError
from matrixgen.model.jobs import Job, Target, TargetPlace
from matrixgen.util.values import JsonLayout
from matrixgen.views.stats import fleet
from matrixgen.views.table import Column, Report

if TYPE_CHECKING:
    from matrixgen.pipeline import Generation

FORMULA = "nodes x gpus x time_limit x n_repeat / 3600, x platforms.<p>.gpu_hour_weight"

# Measured seconds of one repeat of a job on a target, where known.
Measured = Callable[[Job, Target], float | None]


def weight(config: ProjectConfig, platform: str) -> float:
    """The platform's gpu_hour_weight, else that of the platform it is an alias of."""
    for name in (platform, fleet(config, platform)):
        value = config.platform(name).gpu_hour_weight
        if value is not None:
            return value
    return 1.0


def gpu_hours(job: Job, n_repeat: int | None = None, seconds: float | None = None) -> float:
    """The job's GPU-hours: time limit (or `seconds` measured) per repeat."""
    repeats = n_repeat if n_repeat is not None else job.n_repeat
    per_repeat = seconds if seconds is not None else job.time_limit
    try:
        gpus = (job.nodes if job.nodes is not None else 1) * (job.gpus or 0)
        return gpus * per_repeat * repeats / 3600
    except OverflowError:  # counts too large for a float: refused by compute_cost
        return math.inf


# The keys of a cost in the JSON, and where each is read (of a Cost).
COST_KEYS = (
    ("jobs", "jobs"),
    ("gpu_hours_max", "shown.gpu_hours_max"),
    ("weighted_gpu_hours_max", "shown.weighted_max"),
    ("gpu_hours_expected", "shown.expected"),
    ("measured_jobs", "shown.measured_jobs"),
    ("jobs_without_gpus", "shown.without_gpus"),
)
# Those left out when not set.
COST_OPTIONAL = frozenset({"gpu_hours_expected", "measured_jobs", "jobs_without_gpus"})


class Cost(Struct, frozen=True, kw_only=True):
    jobs: int = 0
    gpu_hours_max: float = 0.0
    weighted_max: float = 0.0
    expected: float | None = None  # over the jobs with measured durations only
    measured_jobs: int = 0
    without_gpus: int = 0

    def __add__(self, other: Cost) -> Cost:
        sums = {k: getattr(self, k) + getattr(other, k) for k in _SUMMED}
        if self.expected is None and other.expected is None:
            return Cost(**sums)
        return Cost(**sums, expected=(self.expected or 0.0) + (other.expected or 0.0))

    def expected_text(self) -> str:
        """The expected GPU-hours as tables show them: with how many jobs are measured."""
        if self.expected is None:
            return "-"
        return f"{hours(self.expected)} ({self.measured_jobs} of {self.jobs} measured)"

    # Its JSON: GPU-hours to the thousandth; the expected ones (and how many jobs
    # are measured) when some are, the jobs without GPUs when there are some.
    JSON: ClassVar[JsonLayout] = JsonLayout(keys=COST_KEYS, when_set=COST_OPTIONAL)

    @property
    def shown(self) -> CostShown:
        return CostShown(
            gpu_hours_max=round(self.gpu_hours_max, 3),
            weighted_max=round(self.weighted_max, 3),
            expected=round(self.expected, 3) if self.expected is not None else None,
            measured_jobs=self.measured_jobs if self.expected is not None else None,
            without_gpus=self.without_gpus or None,
        )


# The figures of a Cost that add up as they are (`expected` may be unknown).
_SUMMED = ("jobs", "gpu_hours_max", "weighted_max", "measured_jobs", "without_gpus")


class CostShown(Struct, frozen=True, kw_only=True):
    """A cost's figures as reports show them (None: not shown)."""

    gpu_hours_max: float
    weighted_max: float
    expected: float | None
    measured_jobs: int | None
    without_gpus: int | None


def decided_repeats(job: Job, target: Target) -> int | None:
    """The n_repeat a target's decision gives the job (None: the job's own): a
    decision applies where the recipe leaves n_repeat to the default."""
    return target.n_repeat if "n_repeat" not in job.spec else None


def repeats_in(job: Job, target: Target) -> int:
    """How many repeats one run of the job in the target holds."""
    decided = decided_repeats(job, target)
    return decided if decided is not None else job.n_repeat


def jobs_cost(
    jobs: Iterable[Job],
    target: Target,
    config: ProjectConfig,
    *,
    measured: Measured | None = None,
) -> Cost:
    """The cost of the jobs one target runs (a decision's n_repeat applied): the
    sum of each job's cost, added up without a value per job (the diff prices
    every target of both sides)."""
    weights: dict[str, float] = {}
    count = without = measured_jobs = 0
    total_max = total_weighted = 0.0
    expected: float | None = None
    for job in jobs:
        repeats = decided_repeats(job, target)
        hours_max = gpu_hours(job, repeats)
        factor = weights.get(job.platform)
        if factor is None:
            factor = weights[job.platform] = weight(config, job.platform)
        count += 1
        total_max += hours_max
        total_weighted += hours_max * factor
        if not job.gpus:
            without += 1
        seconds = measured(job, target) if measured is not None else None
        if seconds is not None:
            expected = (expected or 0.0) + gpu_hours(job, repeats, seconds)
            measured_jobs += 1
    return Cost(
        jobs=count,
        gpu_hours_max=total_max,
        weighted_max=total_weighted,
        expected=expected,
        measured_jobs=measured_jobs,
        without_gpus=without,
    )


def pipeline_name(target: Target) -> str:
    """One run of a pipeline: system/scope, and the cadence where the target has one."""
    parts = [target.system.value, target.selector.scope or ""]
    if target.selector.cadence and target.selector.cadence != target.selector.scope:
        parts.append(target.selector.cadence)
    return "/".join(parts)


def _named_cost(key: str, name_keys: tuple[tuple[str, str], ...] = ()) -> Any:
    """A report row: what a cost is of (`key`: its name; `name_keys`: more of
    it), then the cost."""
    return defstruct(
        f"{key.capitalize()}Cost",
        [("of", Any), ("cost", Cost)],
        frozen=True,
        kw_only=True,
        namespace={
            "JSON": JsonLayout(
                keys=(
                    (key, "of" if not name_keys else "of.name"),
                    *name_keys,
                    *((k, f"cost.{path}") for k, path in COST_KEYS),
                ),
                when_set=COST_OPTIONAL,
            )
        },
    )


TargetCost = _named_cost(
    "target", tuple((k, f"of.place.{k}") for k in TargetPlace.__struct_fields__)
)
PipelineCost, PlatformCost, FileCost = (_named_cost(k) for k in ("pipeline", "platform", "file"))


class CostReport(Struct, frozen=True, kw_only=True):
    targets: tuple[tuple[Target, Cost], ...]
    pipelines: tuple[tuple[str, Cost], ...]
    platforms: tuple[tuple[str, Cost], ...]
    files: tuple[tuple[str, Cost], ...]

    # Its JSON (`stats --cost --format json`): the formula, then a row per target,
    # pipeline, platform and recipe file.
    JSON: ClassVar[JsonLayout] = JsonLayout(
        keys=(
            ("formula", "formula"),
            *((k, f"rows.{k}") for k in ("targets", "pipelines", "platforms", "files")),
        )
    )

    @property
    def formula(self) -> str:
        return FORMULA

    @property
    def rows(self) -> CostRows:
        return CostRows(
            targets=tuple(TargetCost(of=t, cost=c) for t, c in self.targets),
            pipelines=tuple(PipelineCost(of=n, cost=c) for n, c in self.pipelines),
            platforms=tuple(PlatformCost(of=n, cost=c) for n, c in self.platforms),
            files=tuple(FileCost(of=n, cost=c) for n, c in self.files),
        )


class CostRows(Struct, frozen=True, kw_only=True):
    targets: tuple[Any, ...]
    pipelines: tuple[Any, ...]
    platforms: tuple[Any, ...]
    files: tuple[Any, ...]


def _grouped(items: Iterable[tuple[str, Cost]]) -> tuple[tuple[str, Cost], ...]:
    out: dict[str, Cost] = {}
    for key, cost in items:
        out[key] = out.get(key, Cost()) + cost
    return tuple(sorted(out.items()))


def compute_cost(
    generation: Generation,
    targets: Sequence[Target],
    *,
    measured: Measured | None = None,
    jobs_of: Callable[[Target], Sequence[Job]] | None = None,
) -> CostReport:
    """GPU-hours per target (one run of it), per pipeline (system/scope[/cadence]:
    one run of each of its targets), per platform and per recipe file (every
    target once)."""
    config = generation.tree.config
    select = jobs_of or generation.jobs_for
    per_target: list[tuple[Target, Cost]] = []
    per_platform: list[tuple[str, Cost]] = []
    per_file: list[tuple[str, Cost]] = []
    for target in targets:
        jobs = list(select(target))
        per_target.append((target, jobs_cost(jobs, target, config, measured=measured)))
        for job in jobs:
            cost = jobs_cost([job], target, config, measured=measured)
            per_platform.append((job.platform, cost))
            per_file.append((job.recipe, cost))
    for target, cost in per_target:
        _require_finite(target, cost)
    return CostReport(
        targets=tuple(per_target),
        pipelines=_grouped((pipeline_name(t), c) for t, c in per_target),
        platforms=_grouped(per_platform),
        files=_grouped(per_file),
    )


def _require_finite(target: Target, cost: Cost) -> None:
    """GPU-hours are a number every reader can take: a count or weight so large
    that they overflow is the tree's mistake, said as such (never `Infinity`)."""
    totals = (cost.gpu_hours_max, cost.weighted_max, cost.expected or 0.0)
    if not all(math.isfinite(value) for value in totals):
        raise RecipeError(
            f"the GPU-hours of target {target.name} do not fit a number: a job's nodes, "
            "gpus, time_limit or n_repeat, or a platform's gpu_hour_weight, is too large"
        )


def hours(value: float) -> str:
    """GPU-hours as a reader takes them in: 12.5, 0.75, 1,234.0."""
    return f"{value:,.2f}".rstrip("0").rstrip(".") if value else "0"


def signed_hours(value: float) -> str:
    """A change in GPU-hours as a reader takes it in: +12.5, -0.75, 0."""
    shown = hours(abs(value))
    return shown if shown == "0" else ("+" if value > 0 else "-") + shown


# A cost table's columns after what each cost is of; the report's Overview shows
# a pipeline's targets and quarantined jobs too, and writes jobs in thousands.
_COST_COLUMNS = (
    Column("targets", text=False, right=True),
    Column("jobs", right=True, html="{:,}".format),
    Column("GPU-h max", right=True),
    Column("weighted", right=True),
    Column("GPU-h expected"),
    Column("quarantined jobs", text=False, right=True),
)


def cost_report(
    of: str,
    costs: Iterable[tuple[str, Cost]],
    targets: Mapping[str, int] | None = None,
    quarantined: Mapping[str, int] | None = None,
) -> Report:
    """A row per (name, cost), the names headed `of`; `targets` and
    `quarantined`: how many of each a name has (0 where not given)."""
    count, marked = targets or {}, quarantined or {}
    rows = [
        [
            name,
            count.get(name, 0),
            c.jobs,
            hours(c.gpu_hours_max),
            hours(c.weighted_max),
            c.expected_text(),
            marked.get(name, 0),
        ]
        for name, c in costs
    ]
    return Report((Column(of), *_COST_COLUMNS), rows)


def render_cost_table(report: CostReport, note: str | None = None) -> str:
    """Its four tables, the formula, and the `note` (what is not counted) if any."""
    parts = [
        cost_report("target", ((t.name, c) for t, c in report.targets)).text(),
        cost_report("pipeline (one run)", report.pipelines).text(),
        cost_report("platform (every target once)", report.platforms).text(),
        cost_report("recipe file (every target once)", report.files).text(),
    ]
    formula = f"\nGPU-hours = {FORMULA}; an upper bound (time limits).\n"
    return "\n".join(parts) + formula + (f"\n{note}\n" if note is not None else "")
