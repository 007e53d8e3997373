"""Stage 5, select: the jobs one target gets (DESIGN §3).

Scope is compared after resolving legacy aliases on both sides, so `nightly`
selects what `L2` selects; cadence, when asked, must be in the job's cadence
list; every other criterion is plain equality.
"""

from __future__ import annotations

from collections.abc import Iterable

from matrixgen.errors import UsageError, did_you_mean
from matrixgen.model import Job, Selector
from matrixgen.vocab import ALL_CADENCES, resolve_scope


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
    """The matching jobs, in the order given (expansion order is already sorted)."""
    check_selector(selector)
    return [job for job in jobs if matches(job, selector)]
