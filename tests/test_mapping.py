"""evidence/mapping.py: which job ran each test of a report. A unit test goes to
the bucket holding its file (the file, else the longest directory, else a glob),
any other test to the job its testsuite names; `--job` takes them all; a test
that maps nowhere is an error at its file and line."""

from __future__ import annotations

import fnmatch
import textwrap

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from matrixgen.model.errors import UsageError
from matrixgen.model.vocab import System
from matrixgen.pipeline import Generation, generate_from_files
from matrixgen.results import junit
from matrixgen.results.junit import Outcome, Report
from matrixgen.results.mapping import BucketIndex, job_key, map_reports

TREE = {
    "matrixgen.yaml": """
        format_version: 2
        vocabulary:
          platforms: [dgx_h100]
          environments: [dev]
          scopes: {github: [L1], gitlab: [mr]}
    """,
    "_build.yaml": "type: build\nformat_version: 2\nspec: {name: img}\n",
    "unit.yaml": """
        type: basic
        format_version: 2
        spec: {name: "unit_{test_case}", model: unit-tests, build: img, platforms: dgx_h100}
        products:
          - test_case: [tests/unit/data/]
            products: [{environment: [dev], scope: [mr]}]
          - test_case: [tests/unit/models/test_gpt.py]
            products: [{environment: [dev], scope: [mr]}]
          - test_case: ["tests/unit/models/**/*.py"]
            products: [{environment: [dev], scope: [mr]}]
    """,
    "gpt.yaml": """
        type: basic
        format_version: 2
        spec: {name: "gpt_{test_case}", model: gpt, build: img, platforms: dgx_h100}
        products:
          - test_case: [tp2]
            products:
              - {environment: [dev], scope: [mr]}
    """,
}


def generation() -> Generation:
    files = {k: textwrap.dedent(v).lstrip("\n").encode() for k, v in TREE.items()}
    found = generate_from_files(files)
    assert not found.expansion.errors, found.expansion.errors
    return found


def record(node_id: str, suite: str = "", line: int = 1) -> junit.Testcase:
    classname, _, name = node_id.rpartition("::")
    return junit.Testcase(
        node_id=node_id,
        classname=classname,
        name=name,
        suite=suite,
        outcome=Outcome.PASSED,
        duration=1.0,
        line=line,
    )


def report(*tests: junit.Testcase) -> Report:
    return Report(path="r.xml", testcases=tests, finished_at=None)


def placed(groups) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {t.node_id: g.job.test_case for g in groups for t in g.testcases}


def test_each_test_goes_to_the_bucket_that_holds_its_file() -> None:
    groups = map_reports(
        generation(),
        [
            report(
                record("tests/unit/models/test_gpt.py::test_a"),  # the file itself, not the glob
                record("tests/unit/models/moe/test_b.py::test_b"),  # only the glob
                record("tests/unit/data/deep/test_c.py::test_c"),  # the directory
                record("tests/functional/test_d.py::test_d", suite="gpt_tp2"),  # by its suite
            )
        ],
    )
    assert placed(groups) == {
        "tests/unit/models/test_gpt.py::test_a": "tests/unit/models/test_gpt.py",
        "tests/unit/models/moe/test_b.py::test_b": "tests/unit/models/**/*.py",
        "tests/unit/data/deep/test_c.py::test_c": "tests/unit/data/",
        "tests/functional/test_d.py::test_d": "tp2",
    }
    unit = {g.job.test_case: g.job.unit for g in groups}
    assert unit["tp2"] is False and unit["tests/unit/data/"] is True


def test_a_test_no_job_holds_is_an_error_at_its_line() -> None:
    with pytest.raises(UsageError) as caught:
        map_reports(generation(), [report(record("other/test_e.py::test_e", line=7))])
    message = caught.value.message
    assert message.startswith("r.xml:7: test other/test_e.py::test_e is in no unit-test bucket")
    assert "give --job NAME" in message


def test_a_named_job_takes_every_test_and_a_wrong_name_is_refused() -> None:
    tests = [record("tests/unit/data/test_c.py::c"), record("x.py::y")]
    (group,) = map_reports(generation(), [report(*tests)], job="gpt_tp2")
    assert group.job.test_case == "tp2" and len(group.testcases) == 2
    with pytest.raises(UsageError, match=r'no job is named "gpt_tp3".*did you mean "gpt_tp2"'):
        map_reports(generation(), [report(*tests)], job="gpt_tp3")


def test_a_job_key_names_the_system_and_an_empty_tag() -> None:
    job = next(j for j in generation().jobs if j.model == "gpt")
    key = job_key(job, System.GITLAB)
    assert (key.system, key.scope, key.tag, key.test_case, key.unit) == (
        "gitlab",
        "mr",
        "",
        "tp2",
        False,
    )


def _reference(path: str, buckets: list[str]) -> str | None:
    """The rule as the module doc says it, by brute force."""
    if path in buckets:
        return path
    directories = [b for b in buckets if not set(b) & set("*?[")]
    holding = [b for b in directories if path.startswith(b.rstrip("/") + "/")]
    if holding:  # the longest directory; of names for one directory (a, a/), the first
        return min(holding, key=lambda b: (-len(b.rstrip("/")), b))
    return next(
        (g for g in sorted(buckets) if set(g) & set("*?[") and fnmatch.fnmatchcase(path, g)), None
    )


PART = st.sampled_from(["a", "b", "t.py"])
PATH = st.lists(PART, min_size=1, max_size=4).map("/".join)
BUCKET = st.one_of(
    PATH, PATH.map(lambda p: p + "/"), PATH.map(lambda p: p + "/*.py"), st.just("a/**")
)


@given(st.lists(BUCKET, max_size=5), st.lists(PATH, min_size=1, max_size=5))
@example(["a", "a/"], ["a/a"])  # two names for one directory
def test_the_bucket_index_follows_the_rule(buckets: list[str], paths: list[str]) -> None:
    index = BucketIndex(buckets)
    for path in paths:
        assert index(path) == _reference(path, buckets), (path, buckets)
        assert index(path) == _reference(path, buckets)  # looked up once, same answer
