"""validate's checks of what the emitters would write (emit.checks): GitLab job
names, node-level entries that cannot reach their tests, and how a finding
shows the values and jobs it is about."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from matrixgen.emit.checks import (
    _short_value,
    check_duplicates,
    check_gitlab_names,
    check_node_routes,
)
from matrixgen.engine.context import ValidationContext
from matrixgen.model.errors import Finding, Severity
from matrixgen.pipeline import generate_from_files
from tests.tree_fixtures import v1_tree, v2_tree

MUTE = """entries:
  - id: mute-tc
    tracker: "#1"
    kind: flaky
    action: mute
    match: {test_case: "tc*"}
    node_ids: ["tests/test_x.py::test_y"]
    owner: alice
    expires: 2099-01-01
    reason: flaky
"""
# A recipe whose jobs run their own launcher with an env the pytest plugin reads.
OWN_ENV = """type: basic
format_version: 2
spec:
  name: "{test_case}"
  model: bert
  build: img-dev
  platforms: dgx_h100
  launcher: bash run.sh
  env: {MATRIXGEN_QUARANTINE: mine}
products:
  - test_case: [tcz]
    products:
      - {environment: [dev], scope: [mr]}
"""


def findings_of(
    check: Callable[[ValidationContext], Iterable[Finding]], files: dict[str, str]
) -> list[Finding]:
    generation = generate_from_files({k: v.encode() for k, v in files.items()})
    context = ValidationContext(generation=generation, targets=generation.checked_targets())
    return list(check(context))


def cases(n: int) -> str:
    """Products of n test cases (tc0, tc1, ...), each one job in gitlab mr."""
    return "".join(
        f"\n  - test_case: [tc{i}]\n    products:\n      - {{environment: [dev], scope: [mr]}}\n"
        for i in range(n)
    )


# --------------------------------------------------------------------------- GitLab job names


@pytest.mark.parametrize(
    ("tree", "severity"), [(v1_tree, Severity.WARNING), (v2_tree, Severity.ERROR)]
)
def test_a_job_gitlab_cannot_name_is_found_at_its_row(
    tree: Callable[[str], dict[str, str]], severity: Severity
) -> None:
    # Past 255 characters: generate would refuse the target (an error), which a
    # format_version 1 tree, read as Megatron-LM reads it, only warns about.
    files = tree(cases(1).replace("tc0", "t" * 250))
    found = findings_of(check_gitlab_names, files)
    assert [(f.code, f.severity, f.location.line) for f in found] == [
        ("gitlab-job-name", severity, 17 if tree is v1_tree else 16)
    ]
    platform = "dgx_a100" if tree is v1_tree else "dgx_h100"
    assert "characters (at most 255)" in found[0].message
    assert found[0].message.endswith(f"... (target gitlab-mr-{platform}-dev)")


def test_jobs_gitlab_can_name_are_no_finding() -> None:
    assert findings_of(check_gitlab_names, v2_tree(cases(3))) == []


# --------------------------------------------------------------------------- node routes


@pytest.mark.parametrize(
    ("jobs", "more"), [(1, ""), (2, " and 1 more job(s)"), (3, " and 2 more job(s)")]
)
def test_an_unreachable_entry_is_one_error_per_target_counting_its_jobs(
    jobs: int, more: str
) -> None:
    files = v2_tree(cases(jobs)) | {"quarantine.yaml": MUTE}
    found = findings_of(check_node_routes, files)
    assert [(f.code, str(f.location)) for f in found] == [
        ("quarantine-unreachable", "quarantine.yaml:5:13")  # the entry's action
    ]
    assert found[0].message.startswith(
        'entry "mute-tc" (mute) cannot reach the tests of target gitlab-mr-dgx_h100-dev '
        f"(gpt/tc0 on dgx_h100/dev{more}): its launcher (launch_jet_workload.py) takes no "
        "node ids"
    )


def test_an_unreachable_entry_says_why_for_the_first_job_it_names() -> None:
    # Two reasons in one target: the message names the first job, and its reason.
    files = v2_tree(cases(1)) | {"quarantine.yaml": MUTE, "bert.yaml": OWN_ENV}
    [found] = findings_of(check_node_routes, files)
    assert "(bert/tcz on dgx_h100/dev and 1 more job(s)): its recipe env sets " in found.message
    assert "launch_jet_workload.py" not in found.message


# --------------------------------------------------------------------------- duplicates


@pytest.mark.parametrize("scopes", [["nightly", "L2"], ["L2", "nightly"], ["L2", "L2", "nightly"]])
@pytest.mark.parametrize("differ", [False, True])
def test_a_doubled_job_is_found_at_its_first_copy_named_as_its_last(
    scopes: list[str], differ: bool
) -> None:
    # One job in several spellings of its scope: the finding is at the first
    # row, and names the copy generate keeps, the last.
    repeats = [f", n_repeat: [{i + 1}]" if differ else "" for i in range(len(scopes))]
    rows = "".join(
        f"      - {{environment: [dev], scope: [{s}]{n}}}\n"
        for s, n in zip(scopes, repeats, strict=True)
    )
    files = v2_tree(f"\n  - test_case: [tc]\n    products:\n{rows}")
    [found] = findings_of(check_duplicates, files)
    assert (found.code, str(found.location)) == (
        "duplicate-conflict" if differ else "duplicate-job",
        "gpt.yaml:16:9",
    )
    assert found.message.startswith(
        f"gpt/tc on dgx_h100/dev in scope {scopes[-1]} is defined {len(scopes)} times"
    )


# --------------------------------------------------------------------------- values shown


@given(st.recursive(st.none() | st.text() | st.integers(), lambda x: st.lists(x, max_size=3)))
@example("x" * 78)  # 80 characters with its quotes: shown whole
@example("x" * 79)  # 81: cut
@example(None)
def test_a_value_is_shown_as_json_cut_to_80_characters(value: object) -> None:
    text = "(unset)" if value is None else json.dumps(value, ensure_ascii=False)
    shown = _short_value(value)
    if len(text) <= 80:
        assert shown == text
    else:
        assert len(shown) == 80 and shown == text[:77] + "..."
