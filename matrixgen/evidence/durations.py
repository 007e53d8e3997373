"""Measured durations for the cost model: what one run of a job took, from the
results store.

A job's measured run is the sum of its tests' durations in one stored run (the
tests of a functional job run one after the other in its CI job; skipped tests
and tests without a duration are left out); its figure is the median over
every stored run of it (robust against one run stuck until its timeout). A run
holds the job's repeats, so `views.cost` gets seconds per repeat: the median
divided by the repeats one run of it holds in the target. The expected cost of
a job is then its GPUs x the median run / 3,600. Jobs are matched by identity
and place (`evidence.mapping.job_key`: system, scope, platform, environment,
model, test case, tag), so a job that has never been ingested has no figure:
nothing is made up.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from contextlib import closing

from matrixgen.evidence.mapping import job_key
from matrixgen.evidence.store import JobKey
from matrixgen.model.jobs import Job, Target
from matrixgen.views.cost import Measured, repeats_in


def measured_hook(medians: Mapping[JobKey, float]) -> Measured:
    """The `measured` hook of `views.cost.compute_cost`: seconds per repeat."""

    def measured(job: Job, target: Target) -> float | None:
        seconds = medians.get(job_key(job, target.system))
        if seconds is None:
            return None
        return seconds / max(1, repeats_in(job, target))

    return measured


def measured_from_store(db: str | None) -> Measured:
    """The hook fed from the results store (--db, $MATRIXGEN_RESULTS_DB, or the
    default file: callers ask `summary.store_configured` first)."""
    from matrixgen.evidence.queries import run_durations
    from matrixgen.evidence.store import open_store

    with closing(open_store(db, write=False)) as store:
        durations = run_durations(store)
    return measured_hook({key: statistics.median(runs) for key, runs in durations.items() if runs})
