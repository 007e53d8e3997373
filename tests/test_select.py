"""Selection semantics, on jobs built directly (no files)."""

from __future__ import annotations

import pytest

from matrixgen.errors import UsageError
from matrixgen.model import Job, Selector
from matrixgen.select import matches, select


def job(**overrides) -> Job:
    base = dict(
        model="gpt",
        test_case="tc",
        environment="dev",
        platform="dgx_h100",
        tag=None,
        scope="mr",
        cadence=("pr", "nightly", "mergegroup"),
        name="n",
        build=None,
        n_repeat=5,
        time_limit=2700,
    )
    base.update(overrides)
    return Job(**base)


@pytest.mark.parametrize(
    "asked,job_scope,expected",
    [
        ("nightly", "L2", True),
        ("L2", "L2", True),
        ("mr-github", "L1", True),
        ("mr-github-slim", "L0", True),
        ("weekly", "L3", True),
        ("mr", "mr", True),
        ("mr", "L1", False),
        ("mr-slim", "mr", False),
        ("nightly", "nightly-broken", False),
        ("L1", "mr-github", False),  # jobs hold resolved scopes; a raw name never matches a tier
    ],
)
def test_scope_aliases_on_the_asked_side(asked: str, job_scope: str, expected: bool) -> None:
    assert matches(job(scope=job_scope), Selector(scope=asked)) is expected


def test_cadence_must_be_in_the_jobs_list() -> None:
    j = job(cadence=("nightly",))
    assert matches(j, Selector(cadence="nightly"))
    assert not matches(j, Selector(cadence="pr"))
    assert matches(j, Selector())  # no cadence asked: no filter


def test_every_criterion_is_an_intersection() -> None:
    jobs = [
        job(test_case="a", platform="dgx_h100", tag="latest", model="unit-tests"),
        job(test_case="b", platform="dgx_gb200", tag="legacy", model="unit-tests"),
        job(test_case="c", platform="dgx_h100", environment="lts"),
    ]
    assert [j.test_case for j in select(jobs, Selector(platform="dgx_h100"))] == ["a", "c"]
    assert [j.test_case for j in select(jobs, Selector(tag="legacy"))] == ["b"]
    assert [j.test_case for j in select(jobs, Selector(model="gpt"))] == ["c"]
    assert [j.test_case for j in select(jobs, Selector(test_cases=("a", "c")))] == ["a", "c"]
    both = Selector(platform="dgx_h100", environment="lts")
    assert [j.test_case for j in select(jobs, both)] == ["c"]
    # A job without a tag never matches a tag filter.
    assert [j.test_case for j in select(jobs, Selector(tag="latest"))] == ["a"]


def test_unknown_cadence_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match='did you mean "nightly"'):
        select([job()], Selector(cadence="nighly"))
