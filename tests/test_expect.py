"""The --expect grammar: parsing, matching targets, counting, failing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from matrixgen.diff.expect import Check, case_counts, check_rules, evaluate, parse_rule, require
from matrixgen.diff.model import (
    QUARANTINED,
    ChangedJob,
    QuarantineChange,
    SelectionDiff,
    TargetDiff,
)
from matrixgen.model.errors import ExitCode, ExpectationError, UsageError
from matrixgen.model.jobs import Job, QuarantineMark
from tests.diff_fixtures import target


def job(test_case: str, scope: str, platform: str = "dgx_h100", **kw: object) -> Job:
    fields: dict[str, object] = {
        "model": "gpt",
        "test_case": test_case,
        "environment": "dev",
        "platform": platform,
        "tag": None,
        "scope": scope,
        "cadence": ("pr", "nightly", "mergegroup"),
        "name": test_case,
        "build": None,
        "n_repeat": 5,
        "time_limit": 2700,
    }
    return Job(**{**fields, **kw})  # type: ignore[arg-type]


def scenario() -> SelectionDiff:
    """Six jobs added to GitHub L1 (split over two platforms and two cadence
    targets), GitLab unchanged, one nightly change and one nightly quarantine."""
    h100 = [job(f"new{i}", "L1") for i in range(4)]
    gb200 = [job(f"new{i}", "L1", "dgx_gb200") for i in range(2)]
    nightly_old = job("n", "L2")
    nightly_new = job("n", "L2", time_limit=5400)
    marked = job(
        "q", "L2", quarantine=QuarantineMark(id="e", tracker="#1", action="skip", kind="flaky")
    )
    return SelectionDiff(
        base="a" * 40,
        head="worktree",
        targets=(
            TargetDiff(target("github", "L1", cadence="pr"), added=tuple(h100)),
            TargetDiff(target("github", "L1", cadence="mergegroup"), added=tuple(h100)),
            TargetDiff(target("github", "L1", "dgx_gb200"), added=tuple(gb200)),
            TargetDiff(target("gitlab", "mr")),
            TargetDiff(target("gitlab", "mr-slim")),
            TargetDiff(
                target("gitlab", "nightly", cadence="nightly"),
                changed=(ChangedJob(nightly_old, nightly_new, {"time_limit": (2700, 5400)}),),
                quarantine=(QuarantineChange(QUARANTINED, job("q", "L2"), marked),),
            ),
        ),
    )


def outcome(rule: str):  # type: ignore[no-untyped-def]
    (result,) = evaluate([parse_rule(rule)], scenario())
    return result


def test_parse_examples() -> None:
    rule = parse_rule("github/L1:+6")
    assert rule.parts == ("github", "L1") and rule.checks == (Check("+", "", 6),)
    rule = parse_rule("github/L0/dgx_h100:+>=1,-0 ~<=3")
    assert rule.checks == (Check("+", ">=", 1), Check("-", "", 0), Check("~", "<=", 3))
    rule = parse_rule("gitlab-mr-*:q!=2")
    assert rule.name == "gitlab-mr-*" and rule.checks == (Check("q", "!=", 2),)
    assert parse_rule("gitlab/*:+6-0").checks == (Check("+", "", 6), Check("-", "", 0))


@pytest.mark.parametrize(
    ("rule", "says"),
    [
        ("github/L1+6", "PATTERN:CHECKS"),
        (":+6", "PATTERN:CHECKS"),
        ("github/L1:", 'no check after ":"'),
        ("github/L1:6", 'cannot read "6"'),
        ("github/L1:+six", 'cannot read "+six"'),
        ("github/L1:+-1", 'cannot read "+-1"'),
        ("github/L1:+6,+6", "given twice"),
        ("github//dev:+1", "empty part"),
        ("a/b/c/d/e/f:+1", "at most 5 parts"),
        ("github/L1:*1", 'cannot read "*1"'),
        ("github/L1:+\u0666", 'cannot read "+\u0666"'),  # an Arabic-Indic six is no count
        ("github/L1:+6,,", 'cannot read ","'),
    ],
)
def test_malformed_rules_are_usage_errors(rule: str, says: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_rule(rule)
    assert says in str(info.value)
    assert info.value.exit_code is ExitCode.USAGE


def test_counts_are_per_target_as_the_table_shows_them() -> None:
    # The four H100 jobs are in two cadence targets: 4 + 4, and 2 on GB200.
    result = outcome("github/L1:+10")
    assert result.ok and result.counts["+"] == 10
    assert len(result.targets) == 3
    assert not outcome("github/L1:+6").ok
    assert outcome("github/L1/dgx_h100:+8").ok
    assert outcome("github/L1/dgx_gb200:+2").ok
    assert outcome("github/L1/dgx_h100/dev/pr:+4").ok


def test_unknown_parts_of_a_rule_are_usage_errors() -> None:
    diff = scenario()
    check_rules(
        [parse_rule(r) for r in ["github/L1:+10", "*/nightly/dgx_h*:=2", "gitlab/L2:q1"]], diff
    )
    for rule, says in [
        ("githb/L1:+1", 'unknown system "githb" (did you mean "github"?)'),
        ("github/L9:+0", 'unknown github scope "L9"'),
        ("github/L2:+0", 'unknown github scope "L2"; the targets of this diff have: L1'),
        ("gitlab/nightlyy:+0", 'unknown gitlab scope "nightlyy" (did you mean "nightly"?)'),
        ("github/L1/dgx_h10:+0", 'unknown platform "dgx_h10" (did you mean "dgx_h100"?)'),
        ("github/L1/dgx_h100/dev/prr:+0", 'unknown cadence "prr"'),
    ]:
        with pytest.raises(UsageError) as info:
            check_rules([parse_rule(rule)], diff)
        assert says in str(info.value), (rule, str(info.value))
        assert info.value.exit_code is ExitCode.USAGE


def test_equals_zero_means_no_change_of_any_kind() -> None:
    assert outcome("gitlab/mr*:=0").ok
    nightly = outcome("gitlab/nightly:=0")
    assert not nightly.ok and nightly.counts["="] == 2  # one changed, one quarantined
    assert outcome("gitlab/*:=2").ok
    assert outcome("gitlab/*:q1,~1,+0,-0").ok
    # A target whose own definition changes counts once in `=`, but in no test case's.
    mr = target("gitlab", "mr")
    settings = replace(scenario(), targets=(TargetDiff(mr, settings={"tag": ("a", "b")}),))
    (whole,) = evaluate([parse_rule("gitlab/mr:=1,~0")], settings)
    assert whole.ok
    (by_case,) = evaluate([parse_rule("gitlab/mr{n}:=0")], replace(settings, test_cases=("n",)))
    assert by_case.ok


def test_scopes_match_by_name_or_tier() -> None:
    # Configured as "nightly": `L2` finds it; a legacy name in the rule resolves too.
    assert outcome("*/L2:~1").ok
    assert outcome("*/nightly:-0").ok
    assert outcome("github/mr-github:+10").ok  # mr-github is L1


def test_target_name_patterns() -> None:
    assert outcome("github-L1-dgx_h100-*:+8").ok
    assert outcome("gitlab-nightly-dgx_h100-nightly:~1,q1").ok


def test_operators() -> None:
    assert outcome("github/*:+>=10").ok
    assert outcome("github/*:+>9").ok
    assert not outcome("github/*:+<10").ok
    assert outcome("github/*:+<=10").ok
    assert outcome("github/*:-!=1").ok
    assert outcome("github/*:+==10").ok


def test_failing_and_unmatched_rules_raise_expectation_errors() -> None:
    rules = [parse_rule(r) for r in ["github/L1:+10", "gitlab/*:=0", "github/L9:+0"]]
    outcomes = evaluate(rules, scenario())
    assert [o.ok for o in outcomes] == [True, False, False]
    with pytest.raises(ExpectationError) as info:
        require(outcomes, scenario())
    text = str(info.value)
    assert info.value.exit_code is ExitCode.EXPECTATION
    assert "2 of 3 expectation(s) failed" in text
    assert "--expect gitlab/*:=0: FAILED: expected exactly 0 changes in total, got 2" in text
    assert '--expect github/L9:+0: matches no target (did you mean "github/L1"?)' in text
    assert "system/scope of the targets of this diff: github/L1, gitlab/mr, " in text
    require(evaluate([parse_rule("github/L1:+10")], scenario()), scenario())  # no raise


@settings(max_examples=50, deadline=None)
@given(
    kind=st.sampled_from("+-~q="),
    op=st.sampled_from(["", "<=", ">=", "<", ">", "!=", "=="]),
    number=st.integers(0, 10_000),
)
def test_every_well_formed_check_parses_back(kind: str, op: str, number: int) -> None:
    rule = parse_rule(f"github/L1:{kind}{op}{number}")
    assert rule.checks == (Check(kind, op, number),)
    assert str(rule.checks[0]) == f"{kind}{op}{number}"


def test_count_of_nothing() -> None:
    zero = {"+": 0, "-": 0, "~": 0, "q": 0, "m": 0, "=": 0, "starts": 0, "stops": 0}
    assert case_counts([], None) == zero


def test_large_counts_are_shown_whole() -> None:
    assert Check("+", "", 6).shown(1_234_567) == "1234567 added"


# ------------------------------------------------------------- starts, stops, test cases

SKIP_MARK = QuarantineMark(id="cp2", tracker="#7733", action="skip", kind="broken")
ALLOW_MARK = QuarantineMark(id="ep8", tracker="#7734", action="allow-failure", kind="broken")
BUCKET = "tests/unit/**/*.py"  # a unit-test bucket: named like a glob


def lifted_scenario() -> SelectionDiff:
    """GitHub L1 after a lift of six CP2 cases (skip entries: they start
    running), one EP8 case moved from skip to allow-failure (it starts too), one
    allow-failure entry added (it keeps running), one case parked in a habit
    scope (it stops), and two unit-test buckets, one lifted."""
    from matrixgen.diff.model import ACTION_CHANGED, LIFTED, Habit

    cp2 = [job(f"cp2_{i}", "L1") for i in range(6)]
    changes = [QuarantineChange(LIFTED, replace(j, quarantine=SKIP_MARK), j) for j in cp2]
    ep8 = job("ep8_fp8", "L1")
    changes.append(
        QuarantineChange(ACTION_CHANGED, replace(ep8, quarantine=SKIP_MARK),
                         replace(ep8, quarantine=ALLOW_MARK))
    )  # fmt: skip
    flaky = job("flaky_one", "L1")
    changes.append(QuarantineChange(QUARANTINED, flaky, replace(flaky, quarantine=ALLOW_MARK)))
    parked = job("parked_one", "L1")
    habit = Habit(scope="mr-github-broken")
    changes.append(QuarantineChange(QUARANTINED, parked, None, habit=habit))
    bucket = job(BUCKET, "L1", model="unit-tests")
    other = job("tests/unit/a/b.py", "L1", model="unit-tests")
    changes.append(QuarantineChange(LIFTED, replace(bucket, quarantine=SKIP_MARK), bucket))
    return SelectionDiff(
        base="a" * 40,
        head="worktree",
        targets=(
            TargetDiff(
                target("github", "L1"), quarantine=tuple(changes), base_jobs=50, head_jobs=57
            ),
            TargetDiff(target("gitlab", "mr"), added=(job("new", "mr"),), removed=(other,)),
        ),
        test_cases=(*(j.test_case for j in cp2), "ep8_fp8", "flaky_one", "parked_one", BUCKET,
                    "tests/unit/a/b.py", "new"),
    )  # fmt: skip


def lifted(rule: str):  # type: ignore[no-untyped-def]
    diff = lifted_scenario()
    rules = [parse_rule(rule)]
    check_rules(rules, diff)
    (result,) = evaluate(rules, diff)
    return result


def test_starts_and_stops_count_what_runs_whatever_the_cause() -> None:
    l1 = lifted_scenario().targets[0]
    starts, stops = l1.running_changes()
    # Six lifted, one skip made allow-failure, one bucket lifted; one parked.
    assert len(starts) == 8 and [j.test_case for j in stops] == ["parked_one"]
    assert l1.head_jobs - l1.base_jobs == len(starts) - len(stops)
    assert lifted("github/L1:starts=8,stops=1").ok
    assert lifted("github/L1:q10,+0,-0").ok  # a lift adds no row
    assert lifted("gitlab/mr:starts=1,stops=1,+1,-1").ok  # added and removed rows count too


def test_a_failed_count_of_rows_says_what_starts_running() -> None:
    result = lifted("github/L1:+6")
    assert not result.ok
    assert str(result) == (
        "--expect github/L1:+6: FAILED: expected exactly 6 added, got 0 added (but 8 start "
        "running, lifts and habits included: `starts` counts those) (over 1 target(s))"
    )
    assert "stop running" in str(lifted("github/L1:-0,-<1,-!=0"))


def test_test_cases_in_a_rule_count_only_their_jobs() -> None:
    assert lifted("github/L1{cp2_*}:starts=6,stops=0,q6").ok
    assert lifted("github/L1{cp2_0,cp2_5}:starts=2").ok
    assert lifted("github/L1{parked_one}:stops=1,starts=0,=1").ok
    assert lifted("github/L1{ep8_fp8,flaky_one}:starts=1,q2").ok
    assert lifted("*{new,cp2_1}:starts=2,+1").ok  # a target name pattern takes them too
    # A name that looks like a glob matches itself only; a glob matches by fnmatch.
    assert lifted("github/L1{" + BUCKET + "}:starts=1").ok
    assert lifted("gitlab/mr{" + BUCKET + "}:stops=0").ok
    assert lifted("gitlab/mr{tests/unit/*}:stops=1").ok


@pytest.mark.parametrize(
    ("rule", "says"),
    [
        ("github/L1:+=6", '(did you mean "+6" or "+==6"?)'),
        ("github/L1:cost=+2h", '(did you mean "cost==+2h"?)'),
        ("github/L1:startz=6", '(did you mean "starts"?)'),
        ("github/L1{cp2_*}:cost<=0", "cost<=0 counts whole targets and takes no test cases"),
        ("github/L1{cp2_*}:findings=0", "counts whole targets"),
        ("github/L1{}:starts=1", "an empty test case"),
        ("github/L1{a,,b}:starts=1", "an empty test case"),
        ("github/L1{a,a}:starts=1", "given twice in the braces"),
        ("github/{a}L1:starts=1", "one pair of braces at the end of the pattern"),
    ],
)
def test_malformed_running_and_case_rules_are_usage_errors(rule: str, says: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_rule(rule)
    assert says in str(info.value), str(info.value)


@pytest.mark.parametrize(
    ("rule", "says"),
    [
        ("github/L1{cp2_9x}:starts=1", '"cp2_9x" is no test case of either side'),
        ("github/L1{ep8_fp9}:starts=1", 'did you mean "ep8_fp8"?'),
        ("github/L1{nothing_*}:starts=1", '"nothing_*" matches no test case of either side'),
    ],
)
def test_a_test_case_no_job_has_is_a_usage_error(rule: str, says: str) -> None:
    with pytest.raises(UsageError) as info:
        lifted(rule)
    assert says in str(info.value) and info.value.exit_code is ExitCode.USAGE


@settings(max_examples=30, deadline=None)
@given(word=st.sampled_from(["starts", "stops"]), op=st.sampled_from(["", "=", "<=", ">=", "!="]),
       number=st.integers(0, 1000))  # fmt: skip
def test_running_checks_parse_back(word: str, op: str, number: int) -> None:
    (check,) = parse_rule(f"github/L1:{word}{op}{number}").checks
    assert check == Check(word, "" if op == "=" else op, number)
    assert parse_rule(f"github/L1:{check}").checks == (check,)


@pytest.mark.parametrize(
    ("check", "says"),
    [
        ("+<3", "fewer than 3 added"),
        ("-!=0", "not 0 removed"),
        ("starts>=2", "at least 2 jobs that start running"),
        ("cost<+2h", "less than +2 GPU-h per run"),
        ("cost==-30m", "a change of exactly -30 GPU-min per run"),
        ("cost!=0", "a change other than 0 GPU-h per run"),
    ],
)
def test_each_comparison_reads_as_words(check: str, says: str) -> None:
    (parsed,) = parse_rule(f"github/L1:{check}").checks
    assert parsed.describe() == says
