"""Stage 5, select: the jobs one target gets (docs/megatron-format.md: Selecting).

Scope is compared after resolving legacy aliases on both sides, so `nightly`
selects what `L2` selects; cadence, when asked, must be in the job's cadence
list; every other criterion is plain equality.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence

from msgspec.structs import replace

from matrixgen.documents.config import ProjectConfig
from matrixgen.model.errors import UsageError, did_you_mean
from matrixgen.model.jobs import Job, Selector
from matrixgen.model.vocab import ALL_CADENCES, LEGACY_SCOPE_ALIASES, resolve_scope, scope_names


def check_selector(selector: Selector) -> None:
    """Refuse a selector that can never be right, before any work."""
    if selector.cadence is not None and selector.cadence not in ALL_CADENCES:
        raise UsageError(
            f'unknown cadence "{selector.cadence}"{did_you_mean(selector.cadence, ALL_CADENCES)}; '
            f"allowed: {', '.join(ALL_CADENCES)}"
        )


def matches(job: Job, selector: Selector) -> bool:
    if selector.scope is not None and job.scope != resolve_scope(selector.scope):
        return False
    if selector.cadence is not None and selector.cadence not in job.cadence:
        return False
    if selector.environment is not None and job.environment != selector.environment:
        return False
    if selector.platform is not None and job.platform != selector.platform:
        return False
    if selector.model is not None and job.model != selector.model:
        return False
    if selector.tag is not None and job.tag != selector.tag:
        return False
    return not selector.test_cases or job.test_case in selector.test_cases


def select(jobs: Iterable[Job], selector: Selector) -> list[Job]:
    """The matching jobs, one per identity and scope (`one_per_identity`), in the
    order given (expansion order is already sorted)."""
    check_selector(selector)
    return one_per_identity([job for job in jobs if matches(job, selector)])


def one_per_identity(jobs: Sequence[Job]) -> list[Job]:
    """One job per identity and scope: of several rows that define the same job
    for a selection, the last one (in file path order, then row order) is the job,
    as Megatron-LM's GitLab generator keeps the last job of a name. The kept job
    lists where every copy selected here is (`Job.definitions`); a job whose other
    copies this selection does not take (another cadence) lists none; `validate`
    reports each such duplicate."""
    if not any(job.definitions for job in jobs):
        return list(jobs)
    groups: dict[tuple[str, ...], list[Job]] = defaultdict(list)
    for job in jobs:
        if job.definitions:
            groups[job.duplicate_key()].append(job)
    kept: dict[int, Job] = {}
    for group in groups.values():
        last = max(group, key=lambda j: j.source)
        where = tuple(sorted(j.source for j in group)) if len(group) > 1 else ()
        kept[id(last)] = last if where == last.definitions else replace(last, definitions=where)
    return [
        kept[id(job)] if job.definitions else job
        for job in jobs
        if not job.definitions or id(job) in kept
    ]


def used_values(key: str, jobs: Iterable[Job]) -> frozenset[str]:
    """The values of one field (scope, platform, environment, model, tag,
    test_case) that the jobs use; scopes with every legacy name of a used tier
    (`nightly` beside `L2`), as Megatron-LM's parser accepts both."""
    found = frozenset(v for v in {getattr(j, key) for j in jobs} if v)
    if key != "scope":
        return found
    legacy = {name for name, (tier, _) in LEGACY_SCOPE_ALIASES.items() if tier in found}
    return found | legacy


def unused_value(what: str, value: str, used: Iterable[str], *, prefix: str) -> str | None:
    """The message for a value of a tree without vocabulary that no job uses, with
    "did you mean" from the used ones and (when few) the list; None when used.
    `what`: scope, platform, ..., or "test case"; `prefix` starts the message
    (`--platform "x"`, `target NAME: platform "x"`)."""
    known = set(used)
    if among(value, known, scope=what.endswith("scope")):
        return None
    if not known:
        return f"{prefix}: no job of the tree has a {what}"
    hint = did_you_mean(value, known)
    shown = scope_names(known) if what.endswith("scope") else sorted(known)
    listing = (
        f"; used: {', '.join(shown)}" if len(shown) <= USED_SHOWN else f" ({len(shown)} are used)"
    )
    return f"{prefix}: no job of the tree has this {what}{hint}{listing}"


# A tree's used values are listed in an error up to this many.
USED_SHOWN = 24


def among(value: str, names: Collection[str], *, scope: bool) -> bool:
    """Whether `value` is one of `names`; a scope by its tier (`nightly` is `L2`)."""
    if scope:
        return resolve_scope(value) in {resolve_scope(k) for k in names}
    return value in names


def value_problem(
    flag: str, key: str, value: str, config: ProjectConfig, jobs: Sequence[Job]
) -> str | None:
    """Why `flag value` can select nothing, or None: against the declared
    vocabulary when there is one for `key`, else against the values the jobs
    use; both with "did you mean"."""
    names = config.vocabulary.declared(key) if config.vocabulary is not None else None
    what = "test case" if key == "test_case" else key
    if names is None:
        return unused_value(what, value, used_values(key, jobs), prefix=f'{flag} "{value}"')
    if among(value, names, scope=key == "scope"):
        return None
    return (
        f'{flag} "{value}" is not declared in {config.path}{did_you_mean(value, names)}; '
        f"declared: {', '.join(scope_names(names) if key == 'scope' else sorted(names))}"
    )


def check_values(
    flag: str, key: str, values: Iterable[str], config: ProjectConfig, jobs: Sequence[Job]
) -> None:
    """Refuse (UsageError) the values of an option that can select nothing (see
    value_problem): every command's --scope, --platform, --environment, --model,
    --tag and --test-case, and the options that leave values out."""
    errors = [p for v in values if (p := value_problem(flag, key, v, config, jobs)) is not None]
    if errors:
        raise UsageError("; ".join(errors))


def check_selector_values(selector: Selector, config: ProjectConfig, jobs: Sequence[Job]) -> None:
    """A value asked for that can select nothing is most likely a typo: a
    UsageError with "did you mean", against the declared vocabulary (format_version
    2) or, in a tree that declares none, against the values its jobs use; test
    cases (no vocabulary lists them) always against the jobs'. Megatron-LM's own
    parser would select nothing for such a value, and say nothing."""
    problems = [
        value_problem(f"--{key}", key, value, config, jobs)
        for key in ("scope", "platform", "environment", "model", "tag")
        if (value := getattr(selector, key)) is not None
    ]
    cases = used_values("test_case", jobs) if selector.test_cases else frozenset()
    problems += [
        unused_value("test case", case, cases, prefix=f'--test-case "{case}"')
        for case in selector.test_cases
    ]
    if errors := [p for p in problems if p is not None]:
        raise UsageError("; ".join(errors))


class JobIndex:
    """Jobs grouped by scope, platform and environment once, so that each of many
    targets only looks at the jobs it can match (a tree of 60,000 jobs and 20
    targets would otherwise match every job against every target)."""

    def __init__(self, jobs: Sequence[Job]) -> None:
        self.jobs = jobs
        groups: dict[tuple[str | None, str, str], list[Job]] = defaultdict(list)
        for job in jobs:
            groups[(job.scope, job.platform, job.environment)].append(job)
        self.groups = groups
        self.test_cases = frozenset(job.test_case for job in jobs)

    def candidates(self, selector: Selector) -> Sequence[Job]:
        """A superset of the jobs the selector matches, in expansion order."""
        if selector.scope is None or selector.platform is None or selector.environment is None:
            return self.jobs
        key = (resolve_scope(selector.scope), selector.platform, selector.environment)
        return self.groups.get(key, ())
