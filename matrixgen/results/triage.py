"""Which of a run's failures did its change cause: one verdict per failure.

The failures, the verdicts (the first that holds) and the grouping by reason
are described in docs/evidence.md, "Triage a pipeline's failures". Lift
candidates: results/lifts.py. Everything here but `triage` works on values;
`triage` reads the store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import closing
from enum import StrEnum
from typing import Any, ClassVar

from msgspec import Struct

from matrixgen.model.jobs import Job, Target
from matrixgen.pipeline import Generation
from matrixgen.quarantine.apply import applying_entries
from matrixgen.quarantine.model import Entry
from matrixgen.results.flaky import FlakyPolicy, FlakyRow, RunRef, Verdict, iso, runs_text
from matrixgen.results.junit import Outcome
from matrixgen.results.known import NO_KNOWN_FAILURES, KnownFailures, KnownRef
from matrixgen.results.lifts import (
    EntryRef,
    LiftCandidate,
    entry_ref,
    lift_candidates,
    names_tests,
)
from matrixgen.results.mapping import places
from matrixgen.results.queries import RunFilter, RunOutcomes, test_outcomes
from matrixgen.results.reasons import ReasonGroup, group_reasons
from matrixgen.results.store import JOB_JSON_KEYS, JobKey, RunRow, Store
from matrixgen.util.nodeid import covers
from matrixgen.util.values import JsonLayout

DEFAULT_BASELINE_RUNS = 1


class TriageVerdict(StrEnum):
    """In the order reports list failures: new ones first."""

    NEW = "new"
    BASELINE = "baseline"
    FLAKY = "flaky"
    KNOWN = "known"
    QUARANTINED = "quarantined"

    @property
    def heading(self) -> str:
        """The title of its section on the report's Triage page."""
        return _WORDS[self][0]

    @property
    def counted(self) -> str:
        """What follows its count in the comment's summary sentence."""
        return _WORDS[self][1]


# Each verdict's words, so that every report of a triage loops over the verdicts.
_WORDS = {
    TriageVerdict.NEW: ("New failures", "new"),
    TriageVerdict.BASELINE: (
        "Also failed in the baseline, with the same reason",
        "also failed in the baseline with the same reason",
    ),
    TriageVerdict.FLAKY: ("Flaky on the baseline ref", "flaky there"),
    TriageVerdict.KNOWN: ("Known failures", "known"),
    TriageVerdict.QUARANTINED: ("Quarantined", "quarantined"),
}
_RANK = {v: i for i, v in enumerate(TriageVerdict)}
# The verdicts that do not fail a triage: the comment folds them.
NOT_NEW = tuple(v for v in TriageVerdict if v is not TriageVerdict.NEW)


class FailureKey(Struct, frozen=True, order=True):
    """One failure of a run: a unit-test bucket's test (`node_id`), a check
    of a whole job (`metric`: the failed test's node id), or a whole job that
    failed with no failed test stored (both None)."""

    job: JobKey
    node_id: str | None = None
    metric: str | None = None

    @property
    def test(self) -> str | None:
        """The failed test, in a bucket or in a whole job; None: the job itself."""
        return self.node_id or self.metric

    @property
    def flaky_key(self) -> tuple[JobKey, str | None]:
        """The key `flaky` judges it by: its test, else the whole job."""
        return (self.job, self.test)


class Failure(Struct, frozen=True, kw_only=True):
    job: JobKey
    node_id: str | None  # a unit-test bucket's failed test; None: a whole job
    verdict: TriageVerdict
    evidence: str
    entry: EntryRef | None = None
    baseline_run: RunRef | None = None  # the latest baseline run it failed in, with its reason
    metric: str | None = None  # a whole job's failed check (its test's node id)
    reason: str | None = None  # None: the job failed with no failed test stored
    known: KnownRef | None = None
    baseline_reason: str | None = None  # how the latest baseline run failed it, differently

    @property
    def case(self) -> str:
        return self.job.case

    @property
    def test(self) -> str | None:
        return self.node_id or self.metric

    def sort_key(self) -> tuple:
        return (_RANK[self.verdict], self.job, self.node_id or "", self.metric or "")

    JSON: ClassVar[JsonLayout] = JsonLayout(
        keys=(
            *JOB_JSON_KEYS,
            *((k, k) for k in ("metric", "verdict", "reason", "evidence", "entry", "known")),
            ("baseline_run", "baseline_run"),
            ("baseline_reason", "baseline_reason"),
        )
    )


class TriageReport(Struct, frozen=True, kw_only=True):
    run: RunRow
    baseline: RunFilter
    baseline_runs: tuple[RunRow, ...]  # latest first
    failures: tuple[Failure, ...]
    lift_candidates: tuple[LiftCandidate, ...]

    @property
    def groups(self) -> tuple[ReasonGroup, ...]:
        """The failures with a reason by it, the largest groups first; a job
        that failed whole is named model/case."""
        return group_reasons(
            (f.reason, f.test or f"{f.job.model}/{f.case}", 1) for f in self.failures if f.reason
        )

    @property
    def shared(self) -> tuple[ReasonGroup, ...]:
        """The groups of more than one failure: what a reader reads once."""
        return tuple(g for g in self.groups if g.count > 1)

    @property
    def note(self) -> str | None:
        """Why every failure is new, when there is no baseline to tell them apart."""
        if self.baseline_runs:
            return None
        return (
            f"no baseline: no run of {self.baseline} finished before run {self.run.run_id}, "
            "so no failure can be told apart from the baseline's (ingest the baseline's "
            "runs with --ref and --source)"
        )

    def summary(self) -> dict[str, int]:
        return {v.value: sum(f.verdict is v for f in self.failures) for v in TriageVerdict}

    @property
    def new(self) -> tuple[Failure, ...]:
        return tuple(f for f in self.failures if f.verdict is TriageVerdict.NEW)

    # Its JSON (`matrixgen results triage --format json`, schema/triage.schema.json).
    JSON: ClassVar[JsonLayout] = JsonLayout(
        keys=(
            ("run", "run"),
            ("baseline", "baseline_report"),
            ("failures", "failures"),
            ("groups", "groups"),
            ("summary", "counts"),
            ("lift_candidates", "lift_candidates"),
            ("note", "note"),
        )
    )

    @property
    def baseline_report(self) -> Baseline:
        return Baseline(ref=self.baseline.ref, source=self.baseline.source, runs=self.baseline_runs)

    counts = property(summary)


class Baseline(Struct, frozen=True, kw_only=True):
    """The baseline a triage judged against: its ref and source, its runs (latest first)."""

    ref: str
    source: str | None
    runs: tuple[RunRow, ...]

    JSON: ClassVar[JsonLayout] = JsonLayout()


def covering_entry(
    node_id: str | None,
    where: Sequence[tuple[Target, Job]],
    entries: Sequence[Entry],
    known: set[str],
) -> Entry | None:
    """The strongest entry that covers a failure there; a node-level entry only
    the tests it names, as the pytest plugin decides (`util.nodeid.covers`)."""
    for target, job in where:
        for entry in applying_entries(job, entries, target, known):
            if entry.action.node_level and not (
                node_id is not None and any(covers(n, node_id) for n in entry.node_ids)
            ):
                continue
            return entry
    return None


def failures_of(outcomes: RunOutcomes, ref: int) -> list[FailureKey]:
    """A run's failures: the failed tests of unit-test buckets; each failed
    check (test) of a failed whole job; a failed job with no failed test
    stored (a crash before any report, a bucket included), whole."""
    tests = outcomes.failed_tests.get(ref, {})
    jobs = outcomes.jobs.get(ref, {})
    with_tests = {job for job, _ in tests}
    found = [
        FailureKey(job) for job, outcome in jobs.items() if outcome.failed and job not in with_tests
    ]
    for job, node in tests:
        if job.unit:
            found.append(FailureKey(job, node_id=node))
        elif jobs.get(job, Outcome.FAILED).failed:
            found.append(FailureKey(job, metric=node))  # a check that failed the job
    return sorted(found)


class _Baseline:
    """How the baseline runs failed each key, each run's first failed test per
    job read once: a run that failed thousands of tests costs no more per key."""

    def __init__(self, outcomes: RunOutcomes) -> None:
        self.runs = outcomes.baseline
        self.outcomes = outcomes
        self.first: dict[int, dict[JobKey, tuple[str, str | None]]] = {}
        for run in self.runs:
            first: dict[JobKey, tuple[str, str | None]] = {}
            for (job, node), reason in outcomes.failed_tests.get(run.ref, {}).items():
                if job not in first or node < first[job][0]:
                    first[job] = (node, reason)
            self.first[run.ref] = first

    def failed(self, key: FailureKey, run: RunRow) -> tuple[str | None, str | None] | None:
        """How `run` failed the key, (reason, the test it is of), None when it
        did not: the key's own test; else, for a whole job or a check of it,
        the job's first failed test, or (None, None) for a job that failed
        with no failed test stored."""
        tests = self.outcomes.failed_tests.get(run.ref, {})
        if key.test is not None and (key.job, key.test) in tests:
            return tests[(key.job, key.test)], key.test
        if key.node_id is not None:
            return None  # a bucket's test: only itself
        first = self.first.get(run.ref, {}).get(key.job)
        if first is not None:
            return first[1], first[0]
        outcome = self.outcomes.jobs.get(run.ref, {}).get(key.job)
        return (None, None) if outcome is not None and outcome.failed else None

    def same(self, key: FailureKey, reason: str | None) -> list[RunRow]:
        """The baseline runs that failed it with this reason, latest first."""
        return [run for run in self.runs if self.failed(key, run) == (reason, key.test)]

    def differently(self, key: FailureKey) -> tuple[RunRow, str | None, str | None] | None:
        """The latest baseline run that failed it otherwise: (run, reason,
        the test that reason is of)."""
        return next(
            ((run, *found) for run in self.runs if (found := self.failed(key, run)) is not None),
            None,
        )


def judge_failures(
    outcomes: RunOutcomes,
    flaky: Mapping[tuple[JobKey, str | None], FlakyRow],
    *,
    baseline: RunFilter,
    policy: FlakyPolicy,
    places_of: Mapping[JobKey, Sequence[tuple[Target, Job]]],
    entries: Sequence[Entry],
    known: set[str],
    too_few: Mapping[tuple[JobKey, str | None], int] | None = None,
    known_failures: KnownFailures = NO_KNOWN_FAILURES,
) -> list[Failure]:
    """Each failure of the run and its one verdict (pure: values in, values out)."""
    judged: list[Failure] = []
    base = _Baseline(outcomes)
    run_tests = outcomes.failed_tests.get(outcomes.run.ref, {})
    for key in failures_of(outcomes, outcomes.run.ref):
        job, test = key.job, key.test
        reason = run_tests.get((job, test)) if test is not None else None
        entry = covering_entry(key.node_id, places_of.get(job, ()), entries, known)
        row = flaky.get(key.flaky_key)
        message, line = outcomes.texts.get((job, test), (None, None)) if test else (None, None)
        known_hit = known_failures.explain(message, line)
        found: dict[str, Any] = {}
        if entry is not None:
            found = {
                "verdict": TriageVerdict.QUARANTINED,
                "evidence": f"quarantined by entry {entry.id} ({entry.action.value}, "
                f"{entry.kind.value}; tracker {entry.tracker_ref})",
                "entry": entry_ref(entry),
            }
        elif known_hit is not None:
            matched, where = known_hit
            found = {
                "verdict": TriageVerdict.KNOWN,
                "evidence": f'{matched.introduction()}the pattern "{matched.pattern}" matches '
                + where,
                "known": matched,
            }
        elif same := base.same(key, reason):
            last = same[0]
            share = (
                f" ({len(same)} of the {len(base.runs)} baseline runs)"
                if len(base.runs) > 1
                else ""
            )
            found = {
                "verdict": TriageVerdict.BASELINE,
                "evidence": f"also failed in baseline run {last.run_id} of {baseline} "
                f"({iso(last.finished_at)}){share}"
                + (", with the same reason" if reason is not None else ""),
                "baseline_run": RunRef(last.run_id, last.commit, last.finished_at),
            }
        else:
            other = base.differently(key)
            differently = _differently(key, other, baseline) if other is not None else ""
            found = {"baseline_reason": other[1]} if other is not None else {}
            if row is not None and row.verdict is Verdict.FLAKY and _flaky_so(row, reason):
                found |= {
                    "verdict": TriageVerdict.FLAKY,
                    "evidence": f"flaky on {baseline}: {row.evidence()}"
                    + (f"; {differently}" if differently else ""),
                }
            else:
                runs = (too_few or {}).get(key.flaky_key)
                found |= {
                    "verdict": TriageVerdict.NEW,
                    "evidence": (differently or _new_evidence(key, outcomes, baseline))
                    + _history(row, baseline, policy, runs),
                }
        judged.append(
            Failure(job=job, node_id=key.node_id, metric=key.metric, reason=reason, **found)
        )
    judged.sort(key=Failure.sort_key)
    return judged


def _differently(
    key: FailureKey, other: tuple[RunRow, str | None, str | None], baseline: RunFilter
) -> str:
    """The evidence "the baseline fails this test differently: <its reason>", and where."""
    run, reason, test = other
    shown = reason or "the job failed with no failed test stored"
    what = "test" if test == key.test else "job"
    # The test's name without its file: `test_b` of `tests/f.py::test_b`.
    on = f" (in {test.rsplit('::', 1)[-1]})" if what == "job" and test else ""
    return (
        f"the baseline fails this {what} differently: {shown}{on} "
        f"(baseline run {run.run_id} of {baseline}, {iso(run.finished_at)})"
    )


def _new_evidence(key: FailureKey, outcomes: RunOutcomes, baseline: RunFilter) -> str:
    if not outcomes.baseline:
        return f"no baseline: no run of {baseline} before this run to compare with"
    latest = outcomes.baseline[0]
    ran = key.job in outcomes.jobs.get(latest.ref, {})
    count = len(outcomes.baseline)
    return (
        f"did not fail in the {'baseline run ' + latest.run_id if count == 1 else runs_text(count)}"
        f" of {baseline} ({iso(latest.finished_at)}{', the latest' if count > 1 else ''})"
        if ran
        else f"not run in baseline run {latest.run_id} of {baseline}"
    )


def _flaky_so(row: FlakyRow, reason: str | None) -> bool:
    """Is a failure with this reason one of the key's flakes on the baseline
    ref: did it fail there with this reason (a job that failed with no test
    stored has none: any flake of the job is)?"""
    return reason is None or any(reason == why for why, _ in row.reasons)


def _history(
    row: FlakyRow | None, baseline: RunFilter, policy: FlakyPolicy, runs: int | None
) -> str:
    """What `flaky` says of a new failure's key on the baseline ref."""
    if row is not None and row.verdict is Verdict.FLAKY:  # but never with this reason
        return f"; flaky on {baseline}, but never with this reason: {row.evidence()}"
    if row is not None:
        return f"; {row.verdict.value} on {baseline}: {row.evidence()}"
    if runs:
        return (
            f"; only {runs_text(runs)} on {baseline} in the window, fewer than "
            f"--min-runs {policy.min_runs}: not judged for flakiness"
        )
    return ""


def triage(
    store: Store,
    generation: Generation,
    run_id: str,
    *,
    baseline: RunFilter,
    count: int = DEFAULT_BASELINE_RUNS,
    policy: FlakyPolicy | None = None,
) -> TriageReport:
    from matrixgen.model.errors import UsageError
    from matrixgen.results.flaky import flaky_rows
    from matrixgen.results.known import known_failures
    from matrixgen.results.queries import run_outcomes

    policy = policy or FlakyPolicy()
    policy.check()
    if count < 1:
        raise UsageError("--baseline-runs must be 1 or more")
    outcomes = run_outcomes(store, run_id, baseline, count)
    keys = [k.flaky_key for k in failures_of(outcomes, outcomes.run.ref)]
    flaky: dict[tuple[JobKey, str | None], FlakyRow] = {}
    too_few: dict[tuple[JobKey, str | None], int] = {}
    if keys:
        report = flaky_rows(store, policy, only=baseline, keys=keys)
        flaky = {(r.job, r.node_id): r for r in report.rows}
        too_few = {(job, node): n for job, node, n in report.left_out}
    places_of = places(generation)
    known = {j.test_case for j in generation.jobs}
    entries = generation.quarantine.entries
    named = {k for k, where in places_of.items() if names_tests(where, entries, known)}
    tests = test_outcomes(store, [outcomes.run.ref, *(b.ref for b in outcomes.baseline)], named)
    failures = judge_failures(
        outcomes,
        flaky,
        baseline=baseline,
        policy=policy,
        places_of=places_of,
        entries=entries,
        known=known,
        too_few=too_few,
        known_failures=known_failures(generation.tree.config),
    )
    return TriageReport(
        run=outcomes.run,
        baseline=baseline,
        baseline_runs=outcomes.baseline,
        failures=tuple(failures),
        lift_candidates=tuple(lift_candidates(outcomes, places_of, entries, known, tests)),
    )


def read_triage(
    db: str | None,
    generation: Generation,
    run_id: str,
    *,
    baseline: RunFilter,
    count: int = DEFAULT_BASELINE_RUNS,
    policy: FlakyPolicy | None = None,
) -> TriageReport:
    """`triage` over the store at `db`: the one reading `matrixgen results triage`
    and the report's Triage page make, so the two cannot disagree."""
    from matrixgen.results.store import open_store

    with closing(open_store(db, write=False)) as store:
        return triage(store, generation, run_id, baseline=baseline, count=count, policy=policy)
