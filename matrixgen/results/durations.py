"""Measured durations for the cost model, from the results store (docs/cost.md).

The median over a job's stored runs is robust against one stuck until its
timeout. Jobs are matched by `mapping.job_key`: one never ingested has no
figure; nothing is made up.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from contextlib import closing

from matrixgen.model.jobs import Job, Target
from matrixgen.results.mapping import job_key
from matrixgen.results.store import JobKey
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
    """The hook fed from the store (callers ask `summary.store_configured` first)."""
    from matrixgen.results.queries import run_durations
    from matrixgen.results.store import open_store

    with closing(open_store(db, write=False)) as store:
        durations = run_durations(store)
    return measured_hook({key: statistics.median(runs) for key, runs in durations.items() if runs})
