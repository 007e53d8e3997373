"""What `matrixgen stats` counts (its `--help` gives the rules): per target its
selection before quarantine, with what quarantine skips, lets fail or
deselects counted beside it, so a skipped case stays visible; per pipeline
(system and scope), per platform and per model, distinct jobs by identity, so a
job that runs on pull requests and in the merge group counts once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from msgspec import Struct

from matrixgen.documents.config import ProjectConfig
from matrixgen.model.errors import Finding, UsageError, did_you_mean, finding
from matrixgen.model.jobs import Job, JobId, Target
from matrixgen.model.vocab import QuarantineAction
from matrixgen.views.table import table

if TYPE_CHECKING:
    from matrixgen.engine.context import ValidationContext
    from matrixgen.pipeline import Generation

UNIT_TEST_MODEL = "unit-tests"
# Every action, mute too: a count per action, never a key missing for one.
QUARANTINE_STATES = tuple(action.value for action in QuarantineAction)


def fleet(config: ProjectConfig, platform: str) -> str:
    """The platform a platform is an alias of (followed to the end), else itself."""
    return _alias_chain(config, platform)[0]


def _alias_chain(config: ProjectConfig, platform: str) -> tuple[str, bool]:
    """Where a platform's `alias_of` chain ends, and whether it loops back."""
    seen = {platform}
    current = platform
    while True:
        alias = config.platform(current).alias_of
        if alias is None:
            return current, False
        if alias in seen:
            return current, True
        seen.add(alias)
        current = alias


class TargetRow(Struct, frozen=True, kw_only=True):
    """One target's counts: a row of the table, an item of the JSON."""

    name: str
    system: str
    scope: str | None
    platform: str | None
    environment: str | None
    cadence: str | None
    jobs: int
    running: int
    functional: int
    unit_tests: int
    models: dict[str, int]
    quarantine: dict[str, int]


class TargetStats(Struct, frozen=True):
    target: Target
    jobs: tuple[Job, ...]  # before quarantine; skipped ones carry their mark

    @property
    def row(self) -> TargetRow:
        quarantine, place = _states(self.jobs), self.target.place
        return TargetRow(
            name=self.target.name,
            system=place.system.value,
            scope=place.scope,
            platform=place.platform,
            environment=place.environment,
            cadence=place.cadence,
            jobs=len(self.jobs),
            running=len(self.jobs) - quarantine["skip"],
            functional=sum(1 for j in self.jobs if j.model != UNIT_TEST_MODEL),
            unit_tests=sum(1 for j in self.jobs if j.model == UNIT_TEST_MODEL),
            models=_counts(j.model for j in self.jobs),
            quarantine=quarantine,
        )


class PipelineRow(Struct, frozen=True, kw_only=True):
    """One pipeline's counts: a row of the table, an item of the JSON."""

    pipeline: str
    system: str
    scope: str | None
    targets: tuple[str, ...]
    cases: int
    cases_by_platform: dict[str, int]
    cases_by_fleet: dict[str, int]
    cases_by_environment: dict[str, int]
    unit_test_jobs: int
    unit_test_buckets: int
    models: dict[str, int]
    quarantine: dict[str, int]


class PipelineStats(Struct, frozen=True):
    """Distinct jobs over the targets of one system and scope (or a whole system)."""

    system: str
    scope: str | None  # None: every scope of the system
    jobs: Mapping[JobId, Job]
    targets: tuple[str, ...]
    config: ProjectConfig

    @property
    def row(self) -> PipelineRow:
        functional = [j for j in self.jobs.values() if j.model != UNIT_TEST_MODEL]
        unit = [j for j in self.jobs.values() if j.model == UNIT_TEST_MODEL]
        return PipelineRow(
            pipeline=self.system + (f"/{self.scope}" if self.scope else ""),
            system=self.system,
            scope=self.scope,
            targets=self.targets,
            cases=len(functional),
            cases_by_platform=_counts(j.platform for j in functional),
            cases_by_fleet=_counts(fleet(self.config, j.platform) for j in functional),
            cases_by_environment=_counts(j.environment for j in functional),
            unit_test_jobs=len(unit),
            unit_test_buckets=len({j.test_case for j in unit}),
            models=_counts(j.model for j in self.jobs.values()),
            quarantine=_states(self.jobs.values()),
        )


class Stats(Struct, frozen=True):
    targets: tuple[TargetStats, ...]
    pipelines: tuple[PipelineStats, ...]
    excluded_platforms: tuple[str, ...]
    excluded_targets: tuple[str, ...]
    config: ProjectConfig

    def platforms(self) -> dict[str, dict[str, int]]:
        """Distinct jobs per platform over every counted target."""
        jobs = _distinct(t.jobs for t in self.targets)
        out: dict[str, dict[str, int]] = {}
        for job in jobs.values():
            row = out.setdefault(
                job.platform, {"jobs": 0, "functional": 0, "unit_tests": 0, "quarantined": 0}
            )
            row["jobs"] += 1
            row["unit_tests" if job.model == UNIT_TEST_MODEL else "functional"] += 1
            row["quarantined"] += job.quarantine is not None
        return dict(sorted(out.items()))

    def models(self) -> dict[str, dict[str, int]]:
        """Distinct jobs per model, with their quarantine states."""
        jobs = _distinct(t.jobs for t in self.targets)
        out: dict[str, dict[str, int]] = {}
        for job in jobs.values():
            row = out.setdefault(job.model, {"jobs": 0, **dict.fromkeys(QUARANTINE_STATES, 0)})
            row["jobs"] += 1
            if job.quarantine is not None:
                row[job.quarantine.action] += 1
        return dict(sorted(out.items()))

    @property
    def report(self) -> StatsReport:
        """What `stats --format json` prints."""
        return StatsReport(
            excluded_platforms=self.excluded_platforms,
            excluded_targets=self.excluded_targets,
            targets=tuple(t.row for t in self.targets),
            pipelines=tuple(p.row for p in self.pipelines),
            platforms=self.platforms(),
            models=self.models(),
        )


class StatsReport(Struct, frozen=True, kw_only=True):
    excluded_platforms: tuple[str, ...]
    excluded_targets: tuple[str, ...]
    targets: tuple[TargetRow, ...]
    pipelines: tuple[PipelineRow, ...]
    platforms: dict[str, dict[str, int]]
    models: dict[str, dict[str, int]]


def _counts(values: Iterable[str]) -> dict[str, int]:
    return dict(sorted(Counter(values).items()))


def _states(jobs: Iterable[Job]) -> dict[str, int]:
    """How many of the jobs each quarantine state holds."""
    counts = Counter(j.quarantine.action for j in jobs if j.quarantine is not None)
    return {state: counts.get(state, 0) for state in QUARANTINE_STATES}


def _distinct(groups: Iterable[Iterable[Job]]) -> dict[JobId, Job]:
    """One job per identity; a quarantined copy wins (it says more)."""
    out: dict[JobId, Job] = {}
    for jobs in groups:
        for job in jobs:
            current = out.get(job.identity)
            if current is None or (current.quarantine is None and job.quarantine is not None):
                out[job.identity] = job
    return dict(sorted(out.items()))


def compute_stats(
    generation: Generation,
    targets: Sequence[Target],
    *,
    exclude: Sequence[str] = (),
    all_platforms: bool = False,
) -> Stats:
    config = generation.tree.config
    vocab = config.vocabulary
    known = {j.platform for j in generation.jobs} | set(vocab.platforms if vocab else ())
    for platform in exclude:
        if platform not in known:
            raise UsageError(
                f'--exclude-platform "{platform}": no such platform'
                f"{did_you_mean(platform, known)}; known: {', '.join(sorted(known))}"
            )
    excluded = set(exclude)
    if not all_platforms:  # and the platforms the config says not to count
        excluded |= {p for p, info in config.doc.platforms.items() if not info.counted}
    counted: list[TargetStats] = []
    left_out: list[str] = []
    for target in targets:
        if target.selector.platform in excluded:
            left_out.append(target.name)
            continue
        jobs = generation.selection(target).with_quarantined
        counted.append(TargetStats(target, tuple(j for j in jobs if j.platform not in excluded)))
    return Stats(
        targets=tuple(counted),
        pipelines=tuple(_pipelines(counted, config)),
        excluded_platforms=tuple(sorted(excluded)),
        excluded_targets=tuple(sorted(left_out)),
        config=config,
    )


def not_counted(stats: Stats) -> str | None:
    """The line that says what `stats` (and `stats --cost`) leave out, if anything."""
    if not stats.excluded_platforms:
        return None
    platforms, targets = stats.excluded_platforms, stats.excluded_targets
    line = f"Not counted: platform{'s' if len(platforms) > 1 else ''} {', '.join(platforms)}"
    if targets:
        line += f"; target{'s' if len(targets) > 1 else ''} {', '.join(targets)}"
    return line + " (--all-platforms counts them)"


def _pipelines(targets: Sequence[TargetStats], config: ProjectConfig) -> list[PipelineStats]:
    groups: dict[tuple[str, str | None], list[TargetStats]] = {}
    for stats in targets:
        system = stats.target.system.value
        scope = stats.target.selector.scope
        groups.setdefault((system, scope), []).append(stats)
        groups.setdefault((system, None), []).append(stats)
    return [
        PipelineStats(
            system=system,
            scope=scope,
            jobs=_distinct(m.jobs for m in members),
            targets=tuple(m.target.name for m in members),
            config=config,
        )
        for (system, scope), members in sorted(
            groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or "~")
        )
    ]


def check_platforms(context: ValidationContext) -> Iterator[Finding]:
    """platforms.<p> must be a platform of the vocabulary; alias_of must name
    another one, without a loop."""
    config = context.tree.config
    vocab = config.vocabulary
    if vocab is None:
        return
    for name, info in sorted(config.doc.platforms.items()):
        if name not in vocab.platforms:
            yield finding(
                config.locate(["platforms", name]),
                "platform",
                f'platforms: "{name}" is not in vocabulary.platforms'
                f"{did_you_mean(name, vocab.platforms)}",
            )
        alias = info.alias_of
        if alias is not None and (alias == name or alias not in vocab.platforms):
            yield finding(
                config.locate(["platforms", name, "alias_of"]),
                "platform",
                f'platforms.{name}.alias_of: "{alias}" must be another platform'
                f"{did_you_mean(alias, vocab.platforms - {name})}",
            )
        elif alias is not None and _alias_chain(config, name)[1]:
            yield finding(
                config.locate(["platforms", name, "alias_of"]),
                "platform",
                f"platforms.{name}.alias_of: aliases form a loop",
            )


def render_table(stats: Stats) -> str:
    models = sorted({j.model for t in stats.targets for j in t.jobs})
    rows = [
        [
            d.name,
            d.platform or "",
            d.environment or "",
            d.cadence or "",
            d.jobs,
            *(d.models.get(m, 0) for m in models),
            *(d.quarantine[s] for s in QUARANTINE_STATES),
        ]
        for d in (t.row for t in stats.targets)
    ]
    headers = ["target", "platform", "env", "cadence", "jobs", *models]
    out = ["Targets (jobs before quarantine; skip/allow-failure/deselect/mute: quarantined)"]
    out.append(table(rows, [*headers, "skip", "allow-fail", "deselect", "mute"]))
    rows: list[list[object]] = []
    for d in (p.row for p in stats.pipelines):
        fleets = ", ".join(f"{k} {v}" for k, v in d.cases_by_fleet.items())
        platforms = ", ".join(f"{k} {v}" for k, v in d.cases_by_platform.items())
        rows.append(
            [
                d.pipeline,
                d.cases,
                fleets,
                platforms if platforms != fleets else "",
                d.unit_test_jobs,
                d.unit_test_buckets,
                "/".join(str(d.quarantine[s]) for s in QUARANTINE_STATES),
            ]
        )
    headers = ["pipeline", "cases", "by fleet", "by platform", "unit jobs", "buckets"]
    out.append("Pipelines (distinct jobs over their targets; cases = functional jobs)")
    out.append(table(rows, [*headers, "skip/allow-fail/deselect/mute"]))
    # Each row's counts in the order platforms() and models() declare them.
    rows = [[name, *v.values()] for name, v in stats.platforms().items()]
    out.append("Platforms (distinct jobs over every counted target; quarantined in any of them)")
    out.append(table(rows, ["platform", "jobs", "functional", "unit tests", "quarantined"]))
    rows = [[name, *v.values()] for name, v in stats.models().items()]
    out.append("Models (distinct jobs over every counted target; quarantined in any of them)")
    out.append(table(rows, ["model", "jobs", *QUARANTINE_STATES]))
    line = not_counted(stats)
    if line is not None:
        out.append(line + "\n")
    return "\n".join(out)
