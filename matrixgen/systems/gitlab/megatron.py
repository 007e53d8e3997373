"""Megatron-LM's JET child pipelines, call for call (`matrixgen jet-trigger`).

Megatron-LM's generator writes one child pipeline per (scope, environment,
platform[, tag]) call; this writes the same file for the same call, and adds
what the generator cannot do (docs/megatron.md, "Where jet-trigger differs").
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from msgspec import Struct, field
from msgspec.structs import replace

from matrixgen.emit.limits import Notice, limit_notices
from matrixgen.emit.registry import emitter_for
from matrixgen.emit.yamltext import dump_yaml
from matrixgen.engine.select import among, used_values
from matrixgen.engine.targets import target_name
from matrixgen.model.errors import RecipeError, UsageError, did_you_mean
from matrixgen.model.jobs import Job, Selector, Target
from matrixgen.model.vocab import ALL_CADENCES, System
from matrixgen.quarantine.jobenv import script_reaches_plugin
from matrixgen.systems.github.limits import matrix_rows, output_size
from matrixgen.systems.gitlab.emitter import PARENT_PIPELINE_VARIABLE
from matrixgen.systems.gitlab.limits import (
    RESERVED_NAMES,
    child_pipeline_size,
    job_name_length,
    needed_name_length,
    needs_count,
    reserved_job_name,
)

if TYPE_CHECKING:
    from matrixgen.pipeline import Generation

# The runner tags of every job, before its `cluster/<resolved cluster>` tag.
DEFAULT_RUNNER_TAGS: tuple[str, ...] = (
    "arch/amd64",
    "env/prod",
    "origin/jet-fleet",
    "owner/jet-core",
    "purpose/jet-client",
    "team/megatron",
)
# --cluster -> the name its runner tag and JET config carry. A project config's
# `jet.clusters` adds to it or overrides it.
DEFAULT_CLUSTERS: Mapping[str, str] = {
    "dgxh100_eos": "eos",
    "dgxgb200_oci-hsg": "oci-hsg",
    "dgxa100_dracooci": "draco-oci-iad",
    "dgxa100_dracooci-ord": "draco-oci-ord",
    "dgxh100_coreweave": "coreweave",
    "cpu_eos": "eos-cpu",
    "cpu_coreweave": "coreweave-cpu",
    "cpu_dracooci": "draco-oci-iad-cpu",
    "cpu_oci-hsg": "oci-hsg-cpu",
    "ghci": "ghci",
}
# Models whose jobs never block, whatever the recipe says.
ALLOW_FAILURE_MODELS: tuple[str, ...] = ("gpt-nemo",)

LAUNCHER = "export PYTHONPATH=$(pwd); python tests/test_utils/python_scripts/launch_jet_workload.py"
TRIAGE_LOG = "jet_workload.log"
TRIAGE_REPORT = "error_report.json"
JOB_RETRY: dict[str, Any] = {
    "max": 2,
    "when": ["unknown_failure", "stuck_or_timeout_failure", "runner_system_failure"],
}
PLACEHOLDER_STAGE = "empty-pipeline-placeholder"
PLACEHOLDER_JOB = "empty-pipeline-placeholder-job"
PARENT_RULE = '$CI_PIPELINE_SOURCE == "parent_pipeline" || $CI_MERGE_REQUEST_ID'


class JetProfile(Struct, frozen=True, kw_only=True):
    """The settings of Megatron-LM's CI that are data: a config extends them."""

    runner_tags: tuple[str, ...] = DEFAULT_RUNNER_TAGS
    clusters: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_CLUSTERS))

    def resolve_cluster(self, cluster: str) -> str:
        found = self.clusters.get(cluster)
        if found is None:
            known = sorted(self.clusters)
            raise UsageError(
                f'unknown --cluster "{cluster}"{did_you_mean(cluster, known)}; known: '
                f"{', '.join(known)} (a project config adds more under jet.clusters)"
            )
        return found


class JetCall(Struct, frozen=True, kw_only=True):
    """One call of the generator: its options, with the generator's defaults."""

    scope: str
    environment: str
    test_cases: str
    platform: str
    cluster: str
    container_image: str
    container_tag: str
    dependent_job: str
    slurm_account: str
    n_repeat: int = 1
    time_limit: int = 1
    partition: str | None = None
    record_checkpoints: str | None = None
    tag: str | None = None
    run_name: str | None = None
    wandb_experiment: str | None = None
    enable_lightweight_mode: bool = False
    enable_warmup: bool = True
    cadence: str | None = None
    enable_error_extraction: bool = False

    def selector(self) -> Selector:
        names = () if self.test_cases == "all" else tuple(self.test_cases.split(","))
        return Selector(
            scope=self.scope,
            cadence=self.cadence or None,  # empty: no cadence filter, as upstream
            environment=self.environment,
            platform=self.platform,
            tag=self.tag,
            test_cases=names,
        )


class JetPipeline(Struct, frozen=True, kw_only=True):
    """What one call writes, and what it has to say about it."""

    text: str  # the file the call writes
    # (job key, job) in pipeline order; empty for the placeholder pipeline.
    jobs: tuple[tuple[str, Job], ...]
    skipped: tuple[Job, ...] = ()
    notices: tuple[Notice, ...] = ()
    target: Target


# --------------------------------------------------------------------------- the call


def jet_target(call: JetCall, system: System) -> Target:
    """The place a call asks for: its system, scope, platform, environment and
    cadence (quarantine entries are placed by system and scope)."""
    selector = call.selector()
    named = replace(selector, tag=None, test_cases=())  # named by its place alone
    return Target(name=target_name(system, named), system=system, selector=selector)


def check_call(call: JetCall) -> None:
    """Refuse what the generator itself refuses (it stops with a traceback)."""
    cadence = call.cadence or None
    if cadence is not None and cadence not in ALL_CADENCES:
        raise UsageError(
            f'unknown --cadence "{cadence}"{did_you_mean(cadence, ALL_CADENCES)}; '
            f"allowed: {', '.join(ALL_CADENCES)} (or empty: no cadence filter)"
        )


def unused_values(call: JetCall, jobs: Sequence[Job]) -> list[Notice]:
    """Each asked-for value that no recipe uses: the generator selects nothing for
    it without a word (`--platform dgx_gb2100`). The values used are
    `engine.select.used_values` (scopes with their tiers' legacy names)."""
    notices = [
        Notice(
            "unknown-value",
            f'--{key} "{value}" is used by no recipe, so it selects nothing'
            f"{did_you_mean(value, known)}",
        )
        for key in ("scope", "platform", "environment", "tag")
        if (value := getattr(call, key)) is not None
        and not among(value, known := used_values(key, jobs), scope=key == "scope")
    ]
    if call.test_cases != "all":
        cases = used_values("test_case", jobs)
        notices += [
            Notice(
                "unknown-value",
                f'--test-cases "{name}" is no test case of any recipe{did_you_mean(name, cases)}',
            )
            for name in dict.fromkeys(call.test_cases.split(","))
            if name not in cases
        ]
    return notices


def call_pipeline(
    generation: Generation, call: JetCall, system: System, *, file_order: Mapping[str, int]
) -> JetPipeline:
    """The pipeline of one call on a loaded tree: the call's target and its
    selection (quarantine applied), with the config's `jet` profile; every job
    of the tree is checked for the values the call asks for."""
    jet = generation.tree.config.doc.jet
    profile = JetProfile(
        runner_tags=jet.runner_tags if jet.runner_tags is not None else DEFAULT_RUNNER_TAGS,
        clusters={**DEFAULT_CLUSTERS, **jet.clusters},
    )
    target = jet_target(call, system)
    chosen = generation.selection(target)
    return jet_pipeline(
        chosen.jobs,
        chosen.skipped,
        call,
        target,
        profile,
        file_order=file_order,
        all_jobs=generation.jobs,
    )


def jet_pipeline(
    jobs: Sequence[Job],
    skipped: Sequence[Job],
    call: JetCall,
    target: Target,
    profile: JetProfile,
    *,
    file_order: Mapping[str, int],
    all_jobs: Sequence[Job] = (),
) -> JetPipeline:
    """The child pipeline of one call, from the target's selection (quarantine
    applied: `jobs` kept and marked, `skipped` taken out)."""
    check_call(call)
    notices = unused_values(call, all_jobs) if all_jobs else []
    # The generator's order: by model, then by file (as listed), then by row;
    # jobs of one row keep their expansion order.
    last = len(file_order)
    ordered = sorted(
        jobs,
        key=lambda j: (j.model, file_order.get(j.recipe, last), j.source.line, j.source.column),
    )
    _refuse_unreachable(ordered, target)
    keys: list[str] = []
    if not ordered:
        document = _placeholder(call, profile)
    else:
        keys, key_notices = job_keys(ordered)
        notices += [*key_notices, *_allow_failure_notices(ordered, target)]
        cluster_tag = f"cluster/{profile.resolve_cluster(call.cluster)}"
        document = _pipeline_head(ordered)
        for index, (key, job) in enumerate(zip(keys, ordered, strict=True)):
            needs = [{"pipeline": PARENT_PIPELINE_VARIABLE, "job": call.dependent_job}]
            if call.enable_warmup and index > 0:
                needs.append({"job": keys[0]})
            notices += limit_notices(needs_count(key, len(needs)))
            document[key] = _job_entry(job, call, profile, cluster_tag, needs)
    text = dump_yaml(sorted_document(document))
    notices += _limits(keys, ordered if keys else [], call, target, text)
    return JetPipeline(
        text=text,
        jobs=tuple(zip(keys, ordered, strict=True)),
        skipped=tuple(skipped),
        notices=tuple(notices),
        target=target,
    )


def _limits(
    keys: Sequence[str], jobs: Sequence[Job], call: JetCall, target: Target, text: str
) -> list[Notice]:
    """What the CI system the file goes to would refuse: GitLab's limits on job
    names, names in `needs` and the file's size; where the file becomes a GitHub
    matrix (one row per job, `{model, test_case}`), GitHub's on its rows and
    bytes. A key GitLab would not run is said by `job_keys`."""
    problems = [job_name_length(key, f'test case "{key}"') for key in keys]
    problems.append(needed_name_length(call.dependent_job, "--dependent-job"))
    if call.enable_warmup and len(keys) > 1:
        problems.append(needed_name_length(keys[0], "the warm-up job"))
    problems.append(child_pipeline_size(len(text.encode("utf-8")), f"target {target.name}"))
    if not emitter_for(target.system).child_pipelines:
        what = f"the matrix GitHub's workflow builds from this file (target {target.name})"
        problems.append(matrix_rows(len(keys), what))
        problems.append(output_size(_matrix_bytes(keys, jobs), what))
    return limit_notices(*problems)


def _matrix_bytes(keys: Sequence[str], jobs: Sequence[Job]) -> int:
    """The matrix's bytes as compact JSON: a row per job, its model and key."""
    rows = [{"model": job.model, "test_case": key} for key, job in zip(keys, jobs, strict=True)]
    return len(json.dumps(rows, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def _refuse_unreachable(ordered: Sequence[Job], target: Target) -> None:
    """A RecipeError naming each job whose node-level entries its script cannot
    hand to the pytest plugin."""
    lines = [
        f"entry {j.quarantine.id} ({j.quarantine.action}) cannot reach the tests of "
        f"{j.identity} in target {target.name}: the job's script {why} (docs/megatron.md)"
        for j in ordered
        if j.quarantine is not None
        and j.quarantine.node_ids
        and (why := script_reaches_plugin(j.spec)) is not None
    ]
    if lines:
        raise RecipeError("; ".join(lines))


def _allow_failure_notices(ordered: Sequence[Job], target: Target) -> list[Notice]:
    allowed = [j for j in ordered if j.quarantine and j.quarantine.action == "allow-failure"]
    if not allowed or emitter_for(target.system).child_pipelines:
        return []
    # A system without child pipelines (GitHub) has its workflow turn this file
    # into its matrix with yq, reading only each job's stage and key:
    # allow_failure does not reach the job there.
    return [
        Notice(
            "github-allow-failure",
            f"{len(allowed)} job(s) allowed to fail by quarantine ("
            + ", ".join(sorted({j.quarantine.id for j in allowed if j.quarantine}))
            + "): GitHub's workflow reads only model and test case from this file, so "
            "they still block there unless its matrix carries allow_failure "
            '(docs/megatron.md, "Allow-failure on GitHub")',
        )
    ]


def _pipeline_head(ordered: Sequence[Job]) -> dict[str, Any]:
    """Stages, workflow rules and defaults: the pipeline before its jobs."""
    return {
        "stages": sorted({j.model for j in ordered}),
        "workflow": {
            "rules": [
                {
                    "if": f'({PARENT_RULE}) && $CI_COMMIT_BRANCH == "main"',
                    "auto_cancel": {"on_new_commit": "interruptible"},
                },
                {"if": PARENT_RULE},
                {"when": "never"},
            ],
            "auto_cancel": {"on_new_commit": "interruptible"},
        },
        "default": {"interruptible": True, "retry": {"max": 2, "when": "runner_system_failure"}},
    }


def _job_entry(
    job: Job, call: JetCall, profile: JetProfile, cluster_tag: str, needs: list[dict[str, str]]
) -> dict[str, Any]:
    """One job of the pipeline, keys in the generator's order."""
    script = launcher_command(job, call)
    artifacts = ["results/"]
    if call.enable_error_extraction:
        script = with_error_extraction(script)
        artifacts += [TRIAGE_LOG, TRIAGE_REPORT]
    return {
        "stage": job.model,
        "image": f"{call.container_image}:{call.container_tag}",
        "tags": [*profile.runner_tags, cluster_tag],
        "timeout": "7 days",
        "needs": needs,
        "script": [script],
        "artifacts": {"paths": artifacts, "when": "always"},
        "allow_failure": allow_failure(job),
        "retry": JOB_RETRY,
    }


def _placeholder(call: JetCall, profile: JetProfile) -> dict[str, Any]:
    return {
        "stages": [PLACEHOLDER_STAGE],
        "workflow": {"rules": [{"if": PARENT_RULE}, {"when": "never"}]},
        "default": {"interruptible": True},
        PLACEHOLDER_JOB: {
            "stage": PLACEHOLDER_STAGE,
            "image": f"{call.container_image}:{call.container_tag}",
            "tags": list(profile.runner_tags),
            "timeout": "7 days",
            "needs": [{"pipeline": PARENT_PIPELINE_VARIABLE, "job": call.dependent_job}],
            "script": ["sleep 1"],
            "artifacts": {"paths": ["results/"], "when": "always"},
            "retry": JOB_RETRY,
        },
    }


def allow_failure(job: Job) -> Any:
    """The recipe's own allow_failure (as written), else whether the model never
    blocks; an allow-failure quarantine entry makes it true."""
    if job.quarantine is not None and job.quarantine.action == "allow-failure":
        return True
    written = job.spec.get("allow_failure", False)
    if written:
        return written if isinstance(written, bool | int | str) else True
    return job.model in ALLOW_FAILURE_MODELS


def launcher_command(job: Job, call: JetCall) -> str:
    """The launcher call of one job: the generator's options, in its order.

    Values from the call are the operator's and are written as given; values
    from a recipe (model, test case) are quoted for the shell where needed: the
    generator writes them raw (the test case inside single quotes), so a name
    with a quote or a `;` would run as a command."""
    test_case = job.test_case
    quoted_case = f"'{test_case}'" if "'" not in test_case else shlex.quote(test_case)
    parts = [
        LAUNCHER,
        f"--model {shlex.quote(job.model)}",
        f"--environment {shlex.quote(job.environment)}",
        f"--n-repeat {call.n_repeat}",
        f"--time-limit {call.time_limit}",
        f"--scope {call.scope}",
        f"--test-case {quoted_case}",
        f"--container-tag {call.container_tag}",
        f"--cluster {call.cluster}",
        f"--platform {call.platform}",
        f"--record-checkpoints {call.record_checkpoints}",
        f"--account {call.slurm_account}",
    ]
    if call.partition is not None:
        parts.append(f"--partition {call.partition}")
    if call.tag is not None:
        parts.append(f"--tag {call.tag}")
    if call.enable_lightweight_mode:
        parts.append("--enable-lightweight-mode")
    if call.run_name is not None and call.wandb_experiment is not None:
        parts.append(f"--run-name {call.run_name}")
        experiment = f"{call.wandb_experiment}-{job.model}-{test_case}"
        if shlex.quote(f"{job.model}-{test_case}") != f"{job.model}-{test_case}":
            experiment = shlex.quote(experiment)
        parts.append(f"--wandb-experiment {experiment}")
    return " ".join(parts)


def with_error_extraction(command: str) -> str:
    """The launcher call wrapped so that a structured error report is extracted
    from its log, and the job still ends with the launcher's exit code."""
    return "\n".join(
        [
            "set +e",
            "set -o pipefail",
            f"{command} 2>&1 | tee {TRIAGE_LOG}",
            "exit_code=${PIPESTATUS[0]}",
            "set -e",
            f"extract-errors {TRIAGE_LOG} --output {TRIAGE_REPORT} "
            '--exit-code "$exit_code" || true',
            'exit "$exit_code"',
        ]
    )


def job_keys(jobs: Sequence[Job]) -> tuple[list[str], list[Notice]]:
    """Each job's key: its test case, as the generator keys it. Where the
    generator would lose a job (a second job of one test case overwrites the
    first; a test case named like a GitLab keyword is no job), the job the
    generator keeps keeps its key, and every other gets `NAME (2)`, `NAME (3)`...,
    never a name another job has."""
    by_case: dict[str, list[int]] = {}
    for index, job in enumerate(jobs):
        by_case.setdefault(job.test_case, []).append(index)
    keys: list[str | None] = [None] * len(jobs)
    taken = {j.test_case for j in jobs} | RESERVED_NAMES
    notices: list[Notice] = []
    for case, indexes in by_case.items():
        kept_plain = indexes[-1] if case not in RESERVED_NAMES else None
        counter = 2
        renamed: list[tuple[Job, str]] = []
        for index in indexes:
            if index == kept_plain:
                keys[index] = case
                continue
            while f"{case} ({counter})" in taken:
                counter += 1
            name = f"{case} ({counter})"
            taken.add(name)
            keys[index] = name
            renamed.append((jobs[index], name))
        if not renamed:
            continue
        kept_as = ", ".join(f'"{name}" ({job.identity}, {job.source})' for job, name in renamed)
        if kept_plain is None:
            why = (
                f"test case {reserved_job_name(case)}: the generator would write it so and "
                f"run nothing; kept as {kept_as}"
            )
            notices.append(Notice("job-key-reserved", why))
            continue
        kept = jobs[kept_plain]
        why = (
            f'{len(indexes)} selected jobs share test case "{case}": the generator keeps '
            f"only the last ({kept.identity}, {kept.source}); kept all, the others as "
            f"{kept_as}. The launcher finds a job by test case alone, so it cannot tell "
            "them apart either: give each its own test case name"
        )
        notices.append(Notice("job-key-duplicate", why))
    # A hidden key stays hidden whatever is added after it: said, not renamed.
    hidden = sorted(k for k in keys if k and k not in RESERVED_NAMES and reserved_job_name(k))
    notices += [Notice("job-key-hidden", f"test case {reserved_job_name(k)}") for k in hidden]
    return [k for k in keys if k is not None], notices


def sorted_document(value: Any) -> Any:
    """Mappings with their keys sorted, as the generator's YAML dump writes them."""
    if isinstance(value, dict):
        return {k: sorted_document(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [sorted_document(v) for v in value]
    return value
