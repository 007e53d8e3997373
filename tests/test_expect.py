"""The --expect grammar: parsing, matching targets, counting, failing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matrixgen.diff.expect import Check, check_rules, evaluate, parse_rule, parse_rules, require
from matrixgen.diff.model import (
    QUARANTINED,
    ChangedJob,
    QuarantineChange,
    SelectionDiff,
    TargetDiff,
    target_counts,
)
from matrixgen.engine.errors import ExitCode, ExpectationError, UsageError
from matrixgen.engine.model import Job, QuarantineMark
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
    check_rules(parse_rules(["github/L1:+10", "*/nightly/dgx_h*:=2", "gitlab/L2:q1"]), diff)
    for rule, says in [
        ("githb/L1:+1", 'unknown system "githb" (did you mean "github"?)'),
        ("github/L9:+0", 'unknown github scope "L9"'),
        ("github/L2:+0", 'unknown github scope "L2"; the targets of this diff have: L1'),
        ("gitlab/nightlyy:+0", 'unknown gitlab scope "nightlyy" (did you mean "nightly"?)'),
        ("github/L1/dgx_h10:+0", 'unknown platform "dgx_h10" (did you mean "dgx_h100"?)'),
        ("github/L1/dgx_h100/dev/prr:+0", 'unknown cadence "prr"'),
    ]:
        with pytest.raises(UsageError) as info:
            check_rules(parse_rules([rule]), diff)
        assert says in str(info.value), (rule, str(info.value))
        assert info.value.exit_code is ExitCode.USAGE


def test_equals_zero_means_no_change_of_any_kind() -> None:
    assert outcome("gitlab/mr*:=0").ok
    nightly = outcome("gitlab/nightly:=0")
    assert not nightly.ok and nightly.counts["="] == 2  # one changed, one quarantined
    assert outcome("gitlab/*:=2").ok
    assert outcome("gitlab/*:q1,~1,+0,-0").ok


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
    rules = parse_rules(["github/L1:+10", "gitlab/*:=0", "github/L9:+0"])
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
    require(evaluate(parse_rules(["github/L1:+10"]), scenario()), scenario())  # no raise


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
    assert target_counts([]) == {"+": 0, "-": 0, "~": 0, "q": 0, "m": 0, "=": 0}


def test_large_counts_are_shown_whole() -> None:
    assert Check("+", "", 6).shown(1_234_567) == "1234567 added"
