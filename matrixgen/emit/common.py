"""What the emitters share. A target's settings (its own over its system's,
and the image pinned for its platform's architecture) are resolved once, by
`emit.registry.resolve_settings`, into `EmitSettings`: the emitters turn jobs
and settings into text and never read the config."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, NamedTuple

from msgspec import Struct, field
from msgspec.structs import replace

from matrixgen.documents.config import ProjectConfig
from matrixgen.engine.select import unused_value, used_values
from matrixgen.model.errors import RecipeError, UsageError, did_you_mean
from matrixgen.model.jobs import EMPTY_MAPPING, Job, JobId, QuarantineMark, Target
from matrixgen.model.vocab import QuarantineAction, resolve_scope
from matrixgen.util.values import ComparedValue

# Megatron-LM's shared launcher: it submits the recipe's own `script` to a cluster: it takes no node
# ids, and the job's variables do not reach the test process it starts.
REMOTE_LAUNCHER = "launch_jet_workload.py"
# Where a job's node-level entries are applied (see `node_route`).
ROUTE_PLUGIN = "plugin"  # the job's variables hand the quarantine file to the pytest plugin
ROUTE_SCRIPT = "script"  # the recipe's own script sets MATRIXGEN_QUARANTINE for the plugin


class EmitSettings(Struct, frozen=True, kw_only=True):
    """Everything an emitter needs besides the jobs, already resolved."""

    target: Target
    # (platform, environment) -> image
    images: Mapping[tuple[str, str], str | None] = field(default_factory=dict)
    runner_tags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # platform -> tags
    timeout: int | None = None  # seconds, for every job; None: derived per job
    timeout_overhead: int = 0  # seconds added to a derived timeout (setup, image pull)
    timeout_cap: int | None = None  # the longest timeout the system allows
    n_repeat: int | None = None  # a decision's override of every job's n_repeat
    lightweight: bool = False  # a decision's lightweight mode, passed to the launcher
    # The settings only the target's system has, resolved by its emitter
    # (`Emitter.own_settings`); None: the emitter's defaults.
    own: Any = None
    # Jobs outside the recipes a spec's needs may name (graph.external.<system>).
    external_needs: frozenset[str] = frozenset()
    # The quarantine file as a job's test process finds it (MATRIXGEN_QUARANTINE).
    quarantine_file: str = "quarantine.yaml"

    def image(self, job: Job) -> str | None:
        return self.images.get((job.platform, job.environment))

    def tags(self, job: Job) -> tuple[str, ...]:
        return self.runner_tags.get(job.platform, ())

    def n_repeat_for(self, job: Job) -> int:
        """A decision's n_repeat stands in for the config's default: a recipe that
        sets its own (cases that run once by design) keeps it."""
        if self.n_repeat is not None and "n_repeat" not in job.spec:
            return self.n_repeat
        return job.n_repeat

    def timeout_seconds(self, job: Job) -> int:
        """The CI job's timeout: the target's fixed one, else the recipe's own
        `timeout`, else derived from the work: the launcher runs n_repeat repeats
        of up to time_limit each, plus the system's overhead."""
        if self.timeout is not None:
            return self.timeout
        own = recipe_timeout(job)
        if own is not None:
            return own
        return self.n_repeat_for(job) * job.time_limit + self.timeout_overhead


class Waits(NamedTuple):
    """What a target's jobs wait for besides their recipes' needs (`Emitter.waits`)."""

    # The first job runs alone and every other job needs it.
    warmup: bool = False
    # A job of the parent pipeline every job needs.
    parent_job: str | None = None


class EmittedJob(ComparedValue, frozen=True, kw_only=True):
    """One job of one target as its file holds it (`content`, read-only): the one
    value the emitters serialise, `generate` counts and the diff compares, so
    they cannot disagree. `plain` is the job emitted as if no quarantine entry
    applied (the diff compares it for changes, the marks for quarantine
    changes); a job a skip entry takes out is `skipped`, with no content."""

    identity: JobId
    content: Mapping[str, Any]
    plain: Mapping[str, Any]
    quarantine: QuarantineMark | None = None
    skipped: bool = False
    job: Job  # the job it was emitted from; not compared

    NOT_COMPARED: ClassVar[frozenset[str]] = frozenset({"job"})

    @property
    def running(self) -> bool:
        return not self.skipped


class EmittedTarget(Struct, frozen=True, kw_only=True):
    """Everything one target's file holds: its jobs in file order, the jobs a
    skip entry keeps out, and the stage order."""

    target: Target
    jobs: tuple[EmittedJob, ...]
    skipped: tuple[EmittedJob, ...] = ()
    stages: tuple[str, ...] = ()

    def by_identity(self) -> dict[JobId, EmittedJob]:
        """Every job of the target, running or skipped (one per identity: running wins)."""
        return {e.identity: e for e in (*self.skipped, *self.jobs)}


def skipped_jobs(jobs: Iterable[Job]) -> tuple[EmittedJob, ...]:
    """The jobs a skip entry keeps out of a file, as emitted jobs without content."""
    return tuple(
        EmittedJob(
            identity=j.identity,
            content=EMPTY_MAPPING,
            plain=EMPTY_MAPPING,
            quarantine=j.quarantine,
            skipped=True,
            job=j,
        )
        for j in sorted(jobs, key=Job.sort_key)
    )


def emitted_job(job: Job, emit: Callable[..., Mapping[str, Any]], *args: Any) -> EmittedJob:
    """A job as `emit(job, *args)` writes it, and as it writes it without its
    quarantine mark (`EmittedJob.plain`)."""
    content = emit(job, *args)
    plain = content if job.quarantine is None else emit(replace(job, quarantine=None), *args)
    return EmittedJob(
        identity=job.identity, content=content, plain=plain, quarantine=job.quarantine, job=job
    )


def recipe_timeout(job: Job) -> int | None:
    """A recipe's (or row's) own `timeout` in seconds, when it sets a valid one."""
    own = job.spec.get("timeout")
    return own if isinstance(own, int) and not isinstance(own, bool) and own >= 1 else None


def timeout_minutes(seconds: int) -> int:
    """GitHub's timeout-minutes: whole minutes, rounded up, at least one."""
    return max(1, math.ceil(seconds / 60))


def emitted_jobs(jobs: Iterable[Job]) -> list[Job]:
    """The jobs that go into a file, in a fixed order: never one a skip entry
    takes out, whatever the caller passed."""
    kept = [
        j
        for j in jobs
        if j.quarantine is None or j.quarantine.action != QuarantineAction.SKIP.value
    ]
    return sorted(kept, key=Job.sort_key)


def quarantine_label(job: Job) -> str | None:
    """`<entry id> <tracker>`: what every file says about a quarantined job."""
    from matrixgen.quarantine.jobenv import entry_label

    mark = job.quarantine
    return None if mark is None else entry_label(mark.id, mark.tracker)


def deselected(job: Job) -> tuple[str, ...]:
    mark = job.quarantine
    if mark is None or mark.action != QuarantineAction.DESELECT.value:
        return ()
    return mark.deselected


class Unreachable(Exception):
    """A job's node-level entries cannot reach the tests it runs; says why."""


def node_route(job: Job, *, launcher: str | None) -> str | None:
    """How a job's node-level entries (deselect, mute) reach its tests, None when
    none applies: always through the pytest plugin, which matches node ids
    exactly (pytest's `--deselect` is a prefix match: `::test_x` would drop
    `::test_x_after_restart`). `launcher`: the command the job's entry runs
    (None for a matrix row). Unreachable when Megatron-LM's remote launcher runs
    a script that does not hand the quarantine file on (ROUTE_SCRIPT when it
    does), or when the recipe env sets a variable the plugin reads
    (ROUTE_PLUGIN: the job's own variables)."""
    from matrixgen.quarantine.jobenv import (
        JOB_VARIABLES,
        QUARANTINE_VARIABLE,
        script_reaches_plugin,
    )

    mark = job.quarantine
    if mark is None or not mark.node_ids or mark.action == QuarantineAction.SKIP.value:
        return None
    if launcher is not None and REMOTE_LAUNCHER in launcher:
        why = script_reaches_plugin(job.spec)
        if why is None:
            return ROUTE_SCRIPT
        raise Unreachable(
            f"its launcher ({REMOTE_LAUNCHER}) takes no node ids and runs the recipe's "
            f"script, which {why} (docs/pytest-plugin.md)"
        )
    reserved = {QUARANTINE_VARIABLE, *JOB_VARIABLES.values()}
    taken = sorted(k for k, _ in job.env if k in reserved)
    if taken:
        raise Unreachable(
            f"its recipe env sets {', '.join(taken)}, which the pytest plugin reads to "
            "find the job's entries"
        )
    return ROUTE_PLUGIN


def job_route(job: Job, settings: EmitSettings, *, launcher: str | None) -> str | None:
    """`node_route`, with an unreachable job as a RecipeError naming its entries
    and the target (validate reports the same, at each entry)."""
    try:
        return node_route(job, launcher=launcher)
    except Unreachable as exc:
        mark = job.quarantine
        assert mark is not None
        raise RecipeError(
            f"quarantine entry {mark.id} ({mark.action}) cannot reach the tests of "
            f"{job.identity} in target {settings.target.name}: {exc}"
        ) from None


def plugin_variables(job: Job, settings: EmitSettings, quarantine_file: str) -> dict[str, str]:
    """The variables that hand a job's quarantine to the pytest plugin."""
    from matrixgen.quarantine.jobenv import JobIdentity, identity_variables

    identity = JobIdentity(
        system=settings.target.system,
        scope=job.scope or settings.target.selector.scope or "",
        platform=job.platform,
        environment=job.environment,
        model=job.model,
        test_case=job.test_case,
        tag=job.tag or "",
    )
    return identity_variables(identity, quarantine_file)


def warmup_index(jobs: Sequence[Job]) -> int:
    """The job of a file the others wait for (`warmup: true`): the first that may
    not fail, since one that may would hold back every job if it failed."""
    return next((i for i, j in enumerate(jobs) if not allowed_to_fail(j)), 0)


def allowed_to_fail(job: Job) -> bool:
    """The recipe allows it, or an allow-failure quarantine entry applies."""
    mark = job.quarantine
    return job.allow_failure or (
        mark is not None and mark.action == QuarantineAction.ALLOW_FAILURE.value
    )


def check_ad_hoc_target(
    target: Target, sides: Sequence[tuple[ProjectConfig, Sequence[Job]]]
) -> None:
    """A `--target` given on the command line, checked against the declared
    vocabulary (else the values the jobs use) of each tree it is used on: a typo
    would give a target that selects nothing."""
    problems = ad_hoc_target_problems(target, sides)
    errors = [*problems.undeclared, *problems.unused]
    if errors:
        raise UsageError(f"target {target.name}: " + "; ".join(errors))


class AdHocProblems(Struct, frozen=True):
    """Values a declared vocabulary does not have (`undeclared`), and, in trees
    without one, values no job uses (`unused`; `unused_values`: (field, value))."""

    undeclared: tuple[str, ...] = ()
    unused: tuple[str, ...] = ()
    unused_values: tuple[tuple[str, str], ...] = ()


def ad_hoc_target_problems(
    target: Target, sides: Sequence[tuple[ProjectConfig, Sequence[Job]]]
) -> AdHocProblems:
    errors: list[str] = []
    unused: list[str] = []
    unused_values: list[tuple[str, str]] = []
    for key in ("scope", "platform", "environment", "model", "tag"):
        value = getattr(target.selector, key)
        if value is None:
            continue
        known: set[str] = set()
        declared = False
        for config, jobs in sides:
            vocab = config.vocabulary
            values: Iterable[str] | None = None
            if vocab is not None:
                # Scopes are declared per system; the others as the field's plural.
                values = (
                    vocab.scopes.get(target.system, ())
                    if key == "scope"
                    else getattr(vocab, key + "s")
                )
            declared |= values is not None
            known.update(used_values(key, jobs) if values is None else values)
        if not declared:
            problem = unused_value(key, value, known, prefix=f'{key} "{value}"')
            if problem is not None:
                unused.append(problem)
                unused_values.append((key, value))
            continue
        if value in known if key != "scope" else resolve_scope(value) in map(resolve_scope, known):
            continue
        hint = did_you_mean(value, known)
        what = f"{target.system.value} scope" if key == "scope" else key
        if key == "scope":
            owners = sorted(
                system.value
                for config, _ in sides
                if config.vocabulary is not None
                for system, scopes in config.vocabulary.scopes.items()
                if resolve_scope(value) in {resolve_scope(s) for s in scopes}
            )
            if owners:
                hint = f" (a {owners[0]} scope: give system={owners[0]})"
        shown = ", ".join(sorted(known)) or "none"
        errors.append(f'unknown {what} "{value}"{hint}; declared: {shown}')
    return AdHocProblems(tuple(errors), tuple(unused), tuple(unused_values))
