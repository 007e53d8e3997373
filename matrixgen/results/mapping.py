"""Which matrixgen job ran each test of a report (docs/evidence.md).

The candidates are the jobs of `--target` before quarantine (a job an entry
lets fail still runs), else every job; `--tag` leaves out the jobs of another
tag. A test that maps to no job, or to several, is an error naming its file
and line: nothing is stored.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
from collections.abc import Callable, Collection, Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from msgspec import Struct
from msgspec.structs import replace

from matrixgen.emit.registry import emitter_for
from matrixgen.engine.select import select
from matrixgen.engine.targets import default_system, resolve_targets
from matrixgen.model.errors import UsageError, did_you_mean
from matrixgen.model.jobs import Job, JobId, Target
from matrixgen.model.vocab import QuarantineAction, System
from matrixgen.pipeline import Generation
from matrixgen.results.junit import Outcome, Report, Testcase
from matrixgen.results.store import JobKey, JobResults
from matrixgen.util.nodeid import covers
from matrixgen.views.stats import UNIT_TEST_MODEL

if TYPE_CHECKING:
    from matrixgen.quarantine.model import Entry

_GLOB_CHARS = frozenset("*?[")


class Candidate(Struct, frozen=True):
    """A job in a place it runs: its system and the target (when known)."""

    job: Job
    system: System
    target: str  # "" when not told
    names: tuple[str, ...]  # the names a CI job of it may carry

    @property
    def key(self) -> JobKey:
        return job_key(self.job, self.system)


def job_key(job: Job, system: System) -> JobKey:
    return JobKey(
        system=system.value,
        scope=job.scope or "",
        platform=job.platform,
        environment=job.environment,
        model=job.model,
        test_case=job.test_case,
        tag=job.tag or "",
        unit=job.model == UNIT_TEST_MODEL,
    )


def places(
    generation: Generation,
    targets: Sequence[Target] | None = None,
    key: Callable[[Job, System], JobKey] = job_key,
) -> dict[JobKey, list[tuple[Target, Job]]]:
    """Every job of the targets (default: all), by its `key`, with where it runs."""
    found: dict[JobKey, list[tuple[Target, Job]]] = {}
    if targets is None:
        targets = resolve_targets(generation.tree.config, generation.jobs)
    for target in targets:
        for job in select(generation.jobs, target.selector):
            found.setdefault(key(job, target.system), []).append((target, job))
    return found


def candidates(
    generation: Generation, *, target: str | None = None, tag: str | None = None
) -> list[Candidate]:
    jobs = generation.jobs
    if target is not None:
        specs, names = ([target], []) if "=" in target else ([], [target])
        (chosen,) = resolve_targets(generation.tree.config, jobs, specs=specs, names=names)
        found = _in_target(generation, chosen)
    else:
        unique: dict[tuple[JobKey, str], Candidate] = {}  # each (job, CI name) once: its first
        for chosen in resolve_targets(generation.tree.config, jobs):
            for c in _in_target(generation, chosen):
                unique.setdefault((c.key, c.names[-1]), Candidate(c.job, c.system, "", c.names))
        found = list(unique.values())
        placed = {c.key for c in found}
        for job in jobs:
            system = default_system(job.scope or "")
            if job.scope and job_key(job, system) not in placed:
                found.append(Candidate(job, system, "", (job.name,)))
    if tag is not None:
        tags = sorted({c.job.tag or "" for c in found})
        if tag not in tags:
            raise UsageError(f'--tag "{tag}": no job has that tag{did_you_mean(tag, tags)}')
        found = [c for c in found if not c.job.tag or c.job.tag == tag]
    return found


def _in_target(generation: Generation, target: Target) -> list[Candidate]:
    emitter = emitter_for(target.system)
    ci_names: dict[JobId, str] = {}  # job identity -> its CI job's name
    if emitter.names_jobs:
        emitted = generation.jobs_for(target)
        ci_names = {j.identity: n for j, n in zip(emitted, emitter.job_names(emitted), strict=True)}
    return [
        Candidate(
            job,
            target.system,
            target.name,
            tuple(dict.fromkeys([job.name, ci_names.get(job.identity) or job.name])),
        )
        for job in select(generation.jobs, target.selector)
    ]


def _one(found: Sequence[Candidate], what: str) -> Candidate | None:
    """The one job among candidates (places that share a key are one job)."""
    keys = {c.key for c in found}
    if not keys:
        return None
    if len(keys) > 1:
        shown = sorted(f"{k.case} {k.place} on {k.platform}/{k.environment}" for k in keys)
        more = f" and {len(shown) - 5} more" if len(shown) > 5 else ""
        raise UsageError(
            f"{what} is {len(keys)} jobs: {'; '.join(shown[:5])}{more}; "
            "give --target (and --tag) to say which"
        )
    return found[0]


def map_reports(
    generation: Generation,
    reports: Sequence[Report],
    *,
    target: str | None = None,
    job: str | None = None,
    tag: str | None = None,
    pool: Sequence[Candidate] | None = None,
) -> list[JobResults]:
    """The reports' tests grouped by the job that ran them (`pool`: the
    candidates, when the caller has them)."""
    mapper = Mapper(generation, target=target, job=job, tag=tag, pool=pool)
    grouped: dict[JobKey, tuple[Candidate, list[Testcase]]] = {}
    for report in reports:
        for test in report.testcases:
            picked = mapper(report.path, test)
            grouped.setdefault(picked.key, (picked, []))[1].append(test)
    return [
        JobResults(job=c.key, job_name=c.names[-1], target=c.target, testcases=tuple(tests))
        for c, tests in grouped.values()
    ]


# Entries a lookup cache keeps before it starts again (memory stays bounded).
_CACHE_LIMIT = 100_000


class Mapper:
    """The job of each test, one at a time (a streamed ingest's need)."""

    def __init__(
        self,
        generation: Generation,
        *,
        target: str | None = None,
        job: str | None = None,
        tag: str | None = None,
        pool: Sequence[Candidate] | None = None,
    ) -> None:
        if pool is None:
            pool = candidates(generation, target=target, tag=tag)
        self.where = f" in target {target}" if target else ""
        self.named: Candidate | None = None
        if job is not None:
            self.named = _one([c for c in pool if job in c.names], f'job "{job}"{self.where}')
            if self.named is None:
                known = sorted({n for c in pool for n in c.names})
                raise UsageError(f'no job is named "{job}"{self.where}{did_you_mean(job, known)}')
        self.buckets: dict[str, list[Candidate]] = {}
        self.by_name: dict[str, list[Candidate]] = {}
        for c in pool:
            if c.job.model == UNIT_TEST_MODEL:
                self.buckets.setdefault(c.job.test_case, []).append(c)
            for name in c.names:
                self.by_name.setdefault(name, []).append(c)
        # Each file looked up once.
        self.index = lru_cache(maxsize=_CACHE_LIMIT)(BucketIndex(self.buckets))
        self.chosen_for: dict[tuple[str, str], Candidate] = {}

    def __call__(self, path: str, test: Testcase) -> Candidate:
        if self.named is not None:
            return self.named
        bucket = self.index(test.node_id.split("::", 1)[0])
        cache_key = (bucket or "", test.suite if bucket is None else "")
        picked = self.chosen_for.get(cache_key)
        if picked is not None:
            return picked
        at = f"{path}:{test.line}: test {test.node_id}"
        if bucket is not None:
            picked = _one(self.buckets[bucket], f"{at}: its unit-test bucket {bucket}")
        else:
            picked = _one(self.by_name.get(test.suite, []), f'{at}: suite "{test.suite}"')
        if picked is None:
            raise UsageError(
                f"{at} is in no unit-test bucket{self.where}, and its testsuite "
                f'"{test.suite}" names no job; give --job NAME'
            )
        if len(self.chosen_for) >= _CACHE_LIMIT:
            self.chosen_for.clear()
        self.chosen_for[cache_key] = picked
        return picked


class BucketIndex:
    """The unit-test bucket that holds a test file: the file itself, else the
    longest directory holding it (of `a` and `a/`, the first sorted), else the
    first glob (sorted) that matches. Cost per file: its depth, plus the globs."""

    def __init__(self, buckets: Iterable[str]) -> None:
        self.exact: set[str] = set()
        self.directories: dict[str, str] = {}
        self.globs: list[str] = []
        for bucket in sorted(buckets):
            self.exact.add(bucket)
            if not _GLOB_CHARS.isdisjoint(bucket):
                self.globs.append(bucket)
            else:
                self.directories.setdefault(bucket.rstrip("/") + "/", bucket)

    def __call__(self, path: str) -> str | None:
        if path in self.exact:
            return path
        end = len(path)
        while (end := path.rfind("/", 0, end)) >= 0:
            bucket = self.directories.get(path[: end + 1])
            if bucket is not None:
                return bucket
        for glob in self.globs:
            if fnmatch.fnmatchcase(path, glob):
                return glob
        return None


class MuteGrants:
    """Which muted records keep their mute (a test can write the claim): those
    a mute entry of the trusted quarantine file (at the run's base) applies to
    there, unexpired, naming the test. Any other is stored as the failure or
    error it was; `refused` counts them, `first` names one."""

    def __init__(self, entries: Sequence[Entry], known: Collection[str], today: dt.date) -> None:
        self.mutes = [
            e for e in entries if e.action is QuarantineAction.MUTE and not e.expired(today)
        ]
        self.known = known
        self.refused = 0
        self.first: str | None = None

    def __call__(self, candidate: Candidate, test: Testcase) -> Testcase:
        if test.outcome is not Outcome.MUTED:
            return test
        job = candidate.job
        for entry in self.mutes:
            if (
                entry.applies_in(candidate.system, job.scope)
                and entry.match.matches(job, self.known)
                and any(covers(n, test.node_id) for n in entry.node_ids)
            ):
                return test
        self.refused += 1
        if self.first is None:
            self.first = test.node_id
        return replace(test, outcome=test.muted_from or Outcome.FAILED, muted_from=None)
