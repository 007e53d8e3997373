"""Emit a GitLab child pipeline: the YAML a `trigger: include: artifact` job runs.

Every value put into the script is quoted with `shlex.quote`, and a value that
starts with "-" is joined to its option (`--test-case=-x`), so no test case
runs a command or reads as an option. Where two jobs share a name, the tag, then
the environment, then the platform is added; a collision left after that is an
error (GitLab would silently keep only the last job of a name). A string GitLab's
YAML 1.1 reader would not read back as that string is written quoted.

`needs: []` lets every job start at once: stages only group jobs by model. A
need of the parent pipeline's job needs `PARENT_PIPELINE_ID: $CI_PIPELINE_ID`
in the trigger job's `variables`. A recipe's `spec.needs` must name a job of
the same target or one listed in `graph.external.gitlab` (in the parent
pipeline). Node-level entries reach the tests through the pytest plugin's
variables (`common.node_route`), never a `--deselect` (a prefix match).
"""

from __future__ import annotations

import heapq
import shlex
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from operator import attrgetter
from typing import Any

from msgspec import Struct

from matrixgen.emit.common import (
    ROUTE_PLUGIN,
    EmitSettings,
    EmittedJob,
    EmittedTarget,
    Waits,
    allowed_to_fail,
    emitted_job,
    emitted_jobs,
    job_route,
    plugin_variables,
    quarantine_label,
    warmup_index,
)
from matrixgen.emit.limits import refuse
from matrixgen.emit.yamltext import dump_yaml
from matrixgen.model.errors import Finding, LimitError, RecipeError, Severity
from matrixgen.model.jobs import Job, spec_needs
from matrixgen.model.sections import SystemSettings
from matrixgen.systems.gitlab.limits import (
    child_pipeline_size,
    job_name_length,
    needed_name_length,
    needs_count,
    reserved_job_name,
)
from matrixgen.systems.gitlab.settings import GitlabSettings, Retry
from matrixgen.util.values import json_value

PLACEHOLDER_JOB = "no-jobs-selected"
FALLBACK_STAGE = "test"
QUARANTINE_VARIABLE = "MATRIXGEN_QUARANTINE"
# A job whose MATRIXGEN_QUARANTINE names the file for the plugin carries its label here.
ENTRY_LABEL_VARIABLE = "MATRIXGEN_QUARANTINE_ENTRY"
PARENT_PIPELINE_VARIABLE = "$PARENT_PIPELINE_ID"


# Megatron-LM's shared launcher: the command a job runs when neither the recipe
# (spec.launcher) nor the config (systems.gitlab.launcher) names another one.
DEFAULT_LAUNCHER = "python tests/test_utils/python_scripts/launch_jet_workload.py"
# Retry on infrastructure failures only: a failing test must stay red.
DEFAULT_RETRY: Mapping[str, Any] = {
    "max": 2,
    "when": ["runner_system_failure", "stuck_or_timeout_failure", "api_failure"],
}


class GitlabOwn(Struct, frozen=True, kw_only=True):
    """The settings of a target only GitLab has (`EmitSettings.own`), resolved."""

    retry: Mapping[str, Any] | None = None
    parent_job: str | None = None
    launcher: str = DEFAULT_LAUNCHER
    launcher_forced: bool = False  # --launcher: wins over a recipe's own launcher too
    warmup: bool = False
    artifacts: Mapping[str, Any] | None = None

    def launcher_for(self, job: Job) -> str:
        """The launcher command a job runs: --launcher, else the recipe's, else the config's."""
        given = job.spec.get("launcher")
        if not self.launcher_forced and isinstance(given, str) and given.strip():
            return given
        return self.launcher


def own(settings: EmitSettings) -> GitlabOwn:
    """A target's GitLab settings (the defaults where none were resolved)."""
    return settings.own if isinstance(settings.own, GitlabOwn) else GitlabOwn()


def _retry(value: int | Retry) -> Mapping[str, Any]:
    """GitLab's `retry` of a job: a number of retries is the most, on any failure."""
    if isinstance(value, int):
        return {"max": value}
    out: dict[str, Any] = {"max": value.max}
    if value.when is not None:
        out["when"] = list(value.when)
    return out


def gitlab_duration(seconds: int) -> str:
    """A GitLab duration: 2700 -> "45m", 5400 -> "1h 30m", 90 -> "1m 30s"."""
    seconds = max(1, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return " ".join(f"{v}{unit}" for v, unit in ((hours, "h"), (minutes, "m"), (secs, "s")) if v)


def assign_names(jobs: Sequence[Job]) -> list[str | None]:
    """A unique GitLab job name for each job (None where none is left), independent
    of the order given.

    Round k gives each job still unnamed its k-th candidate name when no other
    unnamed job wants the same name this round, no earlier round took it, and
    it is a usable job name (not a keyword, not hidden by a leading dot).
    """
    names: list[str | None] = [None] * len(jobs)
    taken: set[str] = set()
    # Round 0 only needs each job's own name; the longer candidates are built for
    # the few jobs that share one.
    pending: list[tuple[int, str]] = [(i, job.name) for i, job in enumerate(jobs)]
    level = 0
    while pending:
        wanted = Counter(name for _, name in pending)
        unnamed: list[int] = []
        for i, name in pending:
            if wanted[name] == 1 and name not in taken and reserved_job_name(name) is None:
                names[i] = name
            else:
                unnamed.append(i)
        taken.update(name for i, name in pending if names[i] == name)
        level += 1
        pending = []
        for i in unnamed:
            # The name, then the same with tag, environment, platform added.
            candidates = [jobs[i].name]
            for extra in (jobs[i].tag, jobs[i].environment, jobs[i].platform):
                if extra:
                    candidates.append(f"{candidates[-1]}_{extra}")
            if level < len(candidates):  # else no name is left for it
                pending.append((i, candidates[level]))
    return names


def name_problems(
    jobs: Sequence[Job], names: Sequence[str | None] | None = None
) -> list[tuple[Job, str]]:
    """(job, why) for each job that gets no usable GitLab job name."""
    problems = []
    for job, name in zip(jobs, assign_names(jobs) if names is None else names, strict=True):
        why = (
            job_name_length(name, str(job.identity))
            if name is not None
            else f"{job.identity} gets no unique GitLab job name (name {job.name!r}), even "
            "with tag, environment and platform added: GitLab would keep only one "
            "job of each name"
        )
        if why is not None:
            problems.append((job, why))
    return problems


def named_as_they_are(jobs: Sequence[Job]) -> bool:
    """Whether `name_problems` finds nothing without naming the jobs one by one:
    distinct names, none reserved or hidden (a leading dot), none too long, are
    what `assign_names` gives at its first round, each job its own name. Most
    targets; the others go through `name_problems`."""
    names = set(map(attrgetter("name"), jobs))
    return len(names) == len(jobs) and not any(
        reserved_job_name(n) or job_name_length(n, "") for n in names
    )


def job_names(jobs: Sequence[Job]) -> list[str]:
    """Unique GitLab job names of the jobs (see `assign_names`); LimitError when a
    job gets none, or one longer than GitLab allows."""
    names = assign_names(jobs)
    problems = name_problems(jobs, names)
    if problems:
        shown = "; ".join(f"{why} (from {job.source})" for job, why in problems[:5])
        more = f"; and {len(problems) - 5} more" if len(problems) > 5 else ""
        raise LimitError(
            f"{len(problems)} job(s) cannot be written to a GitLab child pipeline: "
            f"{shown}{more}. Give them distinct, shorter names (spec.name) or make the "
            "target select fewer"
        )
    return [n for n in names if n is not None]


# A backtick, written without one: `"$(printf '\140')"` (POSIX). shlex.quote's
# single quotes already make a backtick literal for every shell that runs the
# job; gitlab-ci-local 4.x echoes each script line inside double quotes with `$`,
# `"` and `\` escaped but not backticks, so a literal one would run there.
_BACKTICK = "'\"$(printf '\\140')\"'"


@lru_cache(maxsize=65_536)  # flags and values repeat job after job
def shell_quote(value: str) -> str:
    """`shlex.quote`, with any backtick spelled so no shell or runner evaluates it."""
    quoted = shlex.quote(value)
    return quoted.replace("`", _BACKTICK) if "`" in quoted else quoted


def _option(flag: str, value: str) -> list[str]:
    """`--flag value`, or `--flag=value` when the value starts with "-": argparse
    would read `--test-case --model` as two options, every parser reads the joined
    form as one option and its value."""
    return [f"{flag}={value}"] if value.startswith("-") else [flag, value]


def job_script(
    job: Job,
    launcher: str,
    *,
    n_repeat: int | None = None,
    lightweight: bool = False,
) -> str:
    """The launcher command line; the launcher is the config's (or recipe's) shell
    text, every value after it is quoted. Node ids never go to it: the pytest
    plugin applies them (`common.node_route`)."""
    words: list[str] = [
        *_option("--model", job.model),
        *_option("--test-case", job.test_case),
        *_option("--environment", job.environment),
        *_option("--platform", job.platform),
    ]
    if job.tag:
        words += _option("--tag", job.tag)
    repeats = n_repeat if n_repeat is not None else job.n_repeat
    words += ["--n-repeat", str(repeats), "--time-limit", str(job.time_limit)]
    if job.nodes is not None:
        words += ["--nodes", str(job.nodes)]
    if job.gpus is not None:
        words += ["--gpus", str(job.gpus)]
    if lightweight:
        words.append("--lightweight")
    if job.build:
        words += _option("--build", job.build)
    if job.args:
        words += ["--", *job.args]
    return " ".join([launcher.strip(), *(shell_quote(w) for w in words)])


def _variables(job: Job, settings: EmitSettings, route: str | None) -> dict[str, Any]:
    variables: dict[str, Any] = {key: yaml_value(value) for key, value in job.env}
    label = quarantine_label(job)
    if label is None:
        return variables
    if route == ROUTE_PLUGIN:
        # node_route checked that the recipe env sets none of these.
        path = settings.quarantine_file
        if not path.startswith("/"):
            path = f"$CI_PROJECT_DIR/{path}"  # the checkout, wherever the launcher runs
        variables.update(plugin_variables(job, settings, path))
        variables[ENTRY_LABEL_VARIABLE] = yaml_value(label)
        return variables
    if QUARANTINE_VARIABLE in variables:
        raise RecipeError(
            f"{job.source}: env {QUARANTINE_VARIABLE} is reserved for the quarantine entry"
        )
    variables[QUARANTINE_VARIABLE] = label
    return variables


def yaml_value(value: str) -> Any:
    """A variable value as written: GitLab expands $NAME in values, and an env
    value or a label is data."""
    return {"value": value, "expand": False} if "$" in value else value


class GitlabPipeline(Struct, frozen=True):
    """The emitted child pipeline of one target."""

    text: str
    job_names: tuple[str, ...]  # empty for the placeholder pipeline


def _needed(name: str, what: str) -> str:
    refuse(needed_name_length(name, what))
    return name


def _placeholder(settings: EmitSettings) -> dict[str, Any]:
    """GitLab refuses a child pipeline without jobs: one that says so instead."""
    job: dict[str, Any] = {"stage": FALLBACK_STAGE}
    tags = settings.runner_tags.get(settings.target.selector.platform or "", ())
    if tags:
        job["tags"] = list(tags)
    job["needs"] = []
    message = f"matrixgen: no jobs selected for target {settings.target.name}"
    job["script"] = [f"echo {shell_quote(message)}"]
    return {"stages": [FALLBACK_STAGE], PLACEHOLDER_JOB: job}


def gitlab_jobs(jobs: Iterable[Job], settings: EmitSettings) -> tuple[list[EmittedJob], list[str]]:
    """The emitted jobs of a selection, in file order, and the stage order."""
    selected = emitted_jobs(jobs)
    if not selected:
        return [], []
    names = job_names(selected)
    mine = own(settings)
    common_needs: list[Any] = []
    if mine.parent_job:
        parent = _needed(mine.parent_job, "parent job")
        common_needs.append({"pipeline": PARENT_PIPELINE_VARIABLE, "job": parent})
    warmup: int | None = None
    if mine.warmup and len(selected) > 1:
        warmup = warmup_index(selected)
        _needed(names[warmup], "warm-up job")
    emitted_name: dict[str, str] = {}  # a recipe's job name -> its GitLab job name
    for job, name in zip(selected, names, strict=True):
        emitted_name.setdefault(job.name, name)
    all_needs: list[list[Any]] = []
    stage_after: dict[str, set[str]] = {}  # stage -> stages whose jobs it needs
    stage_of = {n: j.model or FALLBACK_STAGE for j, n in zip(selected, names, strict=True)}
    for i, (job, name) in enumerate(zip(selected, names, strict=True)):
        needs = list(common_needs)
        if warmup is not None and i != warmup:
            needs.append(names[warmup])
        for need in _recipe_needs(job, name, emitted_name, settings):
            if need not in needs:
                needs.append(need)
        refuse(needs_count(name, len(needs)))
        stage_after.setdefault(stage_of[name], set()).update(
            stage_of[n] for n in needs if isinstance(n, str)
        )
        all_needs.append(needs)
    stages = _stage_order(stage_after)
    out = [
        emitted_job(job, _job_content, name, stage_of[name], needs, settings)
        for job, name, needs in zip(selected, names, all_needs, strict=True)
    ]
    return out, stages


def _job_content(
    job: Job, name: str, stage: str, needs: list[Any], settings: EmitSettings
) -> dict[str, Any]:
    """`{"name": NAME, **the GitLab job}`, keys in the order the file has them."""
    entry: dict[str, Any] = {"name": name, "stage": stage}
    image = settings.image(job)
    if image:
        entry["image"] = image
    tags = settings.tags(job)
    if tags:
        entry["tags"] = list(tags)
    entry["timeout"] = gitlab_duration(settings.timeout_seconds(job))
    entry["needs"] = needs
    mine = own(settings)
    launcher = mine.launcher_for(job)
    variables = _variables(job, settings, job_route(job, settings, launcher=launcher))
    if variables:
        entry["variables"] = variables
    n_repeat = settings.n_repeat_for(job)
    entry["script"] = [
        job_script(job, launcher, n_repeat=n_repeat, lightweight=settings.lightweight)
    ]
    if mine.artifacts:
        entry["artifacts"] = dict(mine.artifacts)
    entry["retry"] = dict(mine.retry if mine.retry is not None else DEFAULT_RETRY)
    if allowed_to_fail(job):
        entry["allow_failure"] = True
    return entry


def _stage_order(stage_after: dict[str, set[str]]) -> list[str]:
    """Stages sorted by name, except that a stage comes after the stages whose jobs
    its jobs need: GitLab refuses a need on a job of a later stage."""
    waiting = {stage: set(before) - {stage} for stage, before in stage_after.items()}
    ready = [stage for stage, before in waiting.items() if not before]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        stage = heapq.heappop(ready)
        order.append(stage)
        for other, before in waiting.items():
            if stage in before:
                before.discard(stage)
                if not before:
                    heapq.heappush(ready, other)
    if len(order) < len(waiting):
        stuck = sorted(set(waiting) - set(order))
        raise LimitError(
            f"the jobs of stages {', '.join(stuck)} need each other's jobs: no order of "
            "stages (one per model) lets every job come after the jobs it needs"
        )
    return order


def _recipe_needs(
    job: Job, name: str, emitted_name: dict[str, str], settings: EmitSettings
) -> list[Any]:
    """The needs a recipe's spec.needs gives one job, as GitLab `needs` entries."""
    out: list[Any] = []
    for _, wanted in spec_needs(job):
        if wanted in emitted_name and emitted_name[wanted] != name:
            out.append(_needed(emitted_name[wanted], "needed job"))
        elif wanted in settings.external_needs:
            out.append({"pipeline": PARENT_PIPELINE_VARIABLE, "job": _needed(wanted, "job")})
        else:
            why = (
                "the job itself"
                if emitted_name.get(wanted) == name
                else f"no job of target {settings.target.name} (nor in graph.external.gitlab)"
            )
            finding = Finding(
                location=job.source,
                severity=Severity.ERROR,
                code="graph-missing",
                message=f'{job.name} needs "{wanted}", which is {why}',
            )
            raise RecipeError(
                f"target {settings.target.name}: a need cannot be met", findings=[finding]
            )
    return out


def emit_gitlab(jobs: Iterable[Job], settings: EmitSettings) -> GitlabPipeline:
    """The child pipeline of a selection; LimitError past GitLab's limits."""
    emitted, stages = gitlab_jobs(jobs, settings)
    return gitlab_pipeline(emitted, stages, settings)


def gitlab_pipeline(
    emitted: Sequence[EmittedJob], stages: Sequence[str], settings: EmitSettings
) -> GitlabPipeline:
    """The child pipeline file that holds emitted jobs (a placeholder job when none)."""
    document: dict[str, Any] = {"stages": list(stages)} if emitted else _placeholder(settings)
    for e in emitted:
        document[e.content["name"]] = {k: v for k, v in e.content.items() if k != "name"}
    names = [e.content["name"] for e in emitted]
    target = settings.target
    comment = (
        f"matrixgen child pipeline for target {target.name} "
        f"({', '.join(f'{k}={v}' for k, v in json_value(target.place).items() if v)}): "
        f"{len(names)} job(s). Generated: do not edit."
    )
    # One comment line whatever the target's values hold.
    header = "# " + "".join(ch if ch.isprintable() else "?" for ch in comment) + "\n"
    text = dump_yaml(document, header)
    refuse(child_pipeline_size(len(text.encode("utf-8")), f"target {target.name}"))
    return GitlabPipeline(text=text, job_names=tuple(names))


class GitlabEmitter:
    """GitLab CI: one child pipeline per target (an `emit.registry.Emitter`)."""

    suffix = ".yml"
    child_pipelines = True
    names_jobs = True
    jobs = staticmethod(gitlab_jobs)
    job_names = staticmethod(assign_names)

    def file(self, emitted: EmittedTarget, settings: EmitSettings) -> tuple[str, int]:
        pipeline = gitlab_pipeline(emitted.jobs, emitted.stages, settings)
        return pipeline.text, 1 if pipeline.job_names else 0

    def standalone(self, job: Job, settings: EmitSettings) -> dict[str, Any]:
        """Its own name, and its recipe's needs as written (no parent job, no
        warm-up): the emitted fields two definitions of one job are compared on."""
        needs: list[Any] = [wanted for _, wanted in spec_needs(job)]
        return _job_content(job, job.name, job.model or FALLBACK_STAGE, needs, settings)

    def launcher(self, job: Job, settings: EmitSettings) -> str | None:
        return own(settings).launcher_for(job)

    def waits(self, settings: SystemSettings) -> Waits:
        mine = self.own_settings(settings, launcher=None)
        return Waits(warmup=mine.warmup, parent_job=mine.parent_job)

    def own_settings(self, settings: SystemSettings, *, launcher: str | None) -> GitlabOwn:
        # A target implied by a tree without config has the shared settings only.
        mine = settings if isinstance(settings, GitlabSettings) else GitlabSettings()
        return GitlabOwn(
            retry=_retry(mine.retry) if mine.retry is not None else None,
            parent_job=mine.parent_job,
            launcher=launcher or mine.launcher or DEFAULT_LAUNCHER,
            launcher_forced=launcher is not None,
            warmup=mine.warmup is True,
            artifacts=json_value(mine.artifacts) if mine.artifacts is not None else None,
        )

    def name_problems(self, jobs: Sequence[Job]) -> list[tuple[Job, str]]:
        return [] if named_as_they_are(jobs) else name_problems(jobs)


EMITTER = GitlabEmitter()
