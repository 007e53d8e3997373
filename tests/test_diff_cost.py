"""The diff's cost change: GPU-hours per target and pipeline on each side, derived
from the emitted jobs as `stats --cost` prices them, checked by hand and by
property; and the --expect cost rules."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matrixgen.diff.comment import render_markdown
from matrixgen.diff.compare import diff_generations
from matrixgen.diff.data import render_json, to_json_data
from matrixgen.diff.expect import CostCheck, evaluate, parse_rule, require
from matrixgen.diff.model import SelectionDiff, TargetDiff
from matrixgen.diff.render import render_text
from matrixgen.model.errors import ExitCode, ExpectationError, UsageError
from matrixgen.views.cost import compute_cost
from tests.diff_fixtures import (
    CONFIG,
    GPT,
    block,
    by_name,
    dumped,
    entry,
    gen,
    quarantine_file,
    v2_tree,
)
from tests.diff_fixtures import in_repo as in_repo
from tests.diff_fixtures import repo as repo

# A GB200 GPU-hour weighs 1.5 against an H100 one.
WEIGHTED = copy.deepcopy(CONFIG)
WEIGHTED["platforms"]["dgx_gb200"]["gpu_hour_weight"] = 1.5


def weighted_tree(gpt: dict[str, Any] | None = None) -> dict[str, Any]:
    tree = v2_tree(gpt)
    tree["matrixgen.yaml"] = copy.deepcopy(WEIGHTED)
    return tree


def two_node_gb200() -> dict[str, Any]:
    """GPT with a new case on GB200 for L1: 2 nodes x 4 GPUs x 3,600 s x 3 repeats."""
    gpt = copy.deepcopy(GPT)
    gpt["products"].append(
        block(
            "gpt_big",
            scope=["L1", "mr"],
            platforms=["dgx_gb200"],
            nodes=[2],
            gpus=[4],
            time_limit=[3600],
            n_repeat=[3],
        )
    )
    return gpt


def test_cost_change_by_hand() -> None:
    result = diff_generations(gen(weighted_tree()), gen(weighted_tree(two_node_gb200())))
    targets = by_name(result)
    l1 = targets["github-l1-gb200"]
    # Base: gpt_b on GB200, 1 node x 8 GPUs x 2,700 s x 5 = 30 GPU-h.
    # Head adds gpt_big: 2 x 4 x 3,600 x 3 / 3,600 = 24 GPU-h (x 1.5 weighted = 36).
    assert (l1.base_cost.gpu_hours_max, l1.head_cost.gpu_hours_max) == (30, 54)
    assert l1.gpu_hours_delta == 24
    assert (l1.base_cost.weighted_max, l1.head_cost.weighted_max) == (45, 81)
    assert l1.head_cost.weighted_max - l1.base_cost.weighted_max == 36
    # gpt_big is a GB200 job: the H100 mr target does not run it.
    assert targets["gitlab-mr-h100"].gpu_hours_delta == 0
    assert targets["gitlab-mr-h100"].head_cost.gpu_hours_max == 90  # gpt_a, gpt_b, gpt_c
    data = to_json_data(result)
    summary = data["summary"]
    assert (summary["gpu_hours_before"], summary["gpu_hours_after"]) == (210, 234)
    assert summary["gpu_hours_delta"] == 24 and summary["weighted_gpu_hours_delta"] == 36
    pipelines = {p["pipeline"]: p for p in summary["pipelines"]}
    assert pipelines["github/L1"]["jobs_delta"] == 1
    assert pipelines["github/L1"]["gpu_hours_delta"] == 24
    text = render_text(result)
    assert "  +1 jobs, +24 GPU-h (+36 weighted) per run of github/L1\n" in text
    assert (
        "github-l1-gb200 (github L1 dgx_gb200 dev): +1 -0 ~0, 1 -> 2 jobs, +24 GPU-h (30 -> 54)\n"
        in text
    )
    markdown = render_markdown(result)
    assert "- +1 jobs, +24 GPU-h (+36 weighted) per run of `github/L1`\n" in markdown
    assert "| `github-l1-gb200` | 1 → 2 | +24 (30 → 54) | +1 |" in markdown


def test_a_skip_entry_takes_a_jobs_cost_out_and_a_time_limit_change_is_priced() -> None:
    skip_c = entry(match={"model": "gpt", "test_case": "gpt_c"}, where=["gitlab/mr"])
    head = v2_tree(**{"quarantine.yaml": quarantine_file(skip_c)})
    head["h100/gpt.yaml"]["products"][0]["products"][0]["time_limit"] = [5400]
    targets = by_name(diff_generations(gen(v2_tree()), gen(head)))
    mr = targets["gitlab-mr-h100"]
    # gpt_a doubles (30 -> 60), gpt_c is skipped (30 -> 0): 90 -> 90.
    assert (mr.base_cost.gpu_hours_max, mr.head_cost.gpu_hours_max) == (90, 90)
    assert (mr.base_jobs, mr.head_jobs) == (3, 2)
    # nightly runs gpt_a only: 30 -> 60.
    assert targets["gitlab-nightly-h100"].gpu_hours_delta == 30


# ---------------------------------------------------------------- properties

ROW = st.fixed_dictionaries(
    {
        "scope": st.lists(st.sampled_from(["mr", "nightly", "L1"]), min_size=1, unique=True),
        "platforms": st.lists(
            st.sampled_from(["dgx_h100", "dgx_gb200"]), min_size=1, max_size=2, unique=True
        ),
    },
    optional={
        "nodes": st.lists(st.integers(1, 4), min_size=1, max_size=1),
        "gpus": st.lists(st.sampled_from([0, 1, 4, 8]), min_size=1, max_size=1),
        "n_repeat": st.lists(st.integers(1, 5), min_size=1, max_size=1),
        "time_limit": st.lists(st.sampled_from([600, 1800, 2700]), min_size=1, max_size=1),
    },
)
CASES = st.dictionaries(st.sampled_from(["c1", "c2", "c3", "c4"]), ROW, max_size=4)
WEIGHT = st.sampled_from([1, 1.5, 2])


def tree_of(rows: dict[str, dict[str, Any]], weight: float) -> dict[str, Any]:
    gpt = copy.deepcopy(GPT)
    gpt["products"] = [block(name, **row) for name, row in rows.items()]
    tree = weighted_tree(gpt)
    tree["matrixgen.yaml"]["platforms"]["dgx_gb200"]["gpu_hour_weight"] = weight
    return tree


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(CASES, WEIGHT, CASES, WEIGHT)
def test_cost_delta_is_head_minus_base_and_sums_up(
    base_rows: dict[str, Any], base_weight: float, head_rows: dict[str, Any], head_weight: float
) -> None:
    base, head = gen(tree_of(base_rows, base_weight)), gen(tree_of(head_rows, head_weight))
    result = diff_generations(base, head)
    # Each side's cost is what `stats --cost` says of that side's tree.
    for side, generation in (("base", base), ("head", head)):
        report = compute_cost(generation, [t.target for t in result.targets])
        stats = {t.name: c for t, c in report.targets}
        for t in result.targets:
            cost = t.base_cost if side == "base" else t.head_cost
            assert cost.gpu_hours_max == pytest.approx(stats[t.target.name].gpu_hours_max)
            assert cost.weighted_max == pytest.approx(stats[t.target.name].weighted_max)
            assert cost.jobs == (t.base_jobs if side == "base" else t.head_jobs)
    for t in result.targets:
        assert t.gpu_hours_delta == t.head_cost.gpu_hours_max - t.base_cost.gpu_hours_max
    data = json.loads(render_json(result))
    rows = data["targets"]
    for row in rows:
        assert row["gpu_hours_delta"] == pytest.approx(
            row["gpu_hours_after"] - row["gpu_hours_before"], abs=1e-9
        )
    summary = data["summary"]
    slack = 1e-3 * max(1, len(rows))  # each figure is rounded to 3 decimals
    for key in ("gpu_hours_delta", "weighted_gpu_hours_delta", "gpu_hours_after"):
        assert summary[key] == pytest.approx(sum(r[key] for r in rows), abs=slack)
        assert summary[key] == pytest.approx(sum(p[key] for p in summary["pipelines"]), abs=slack)
    assert sum(p["jobs_delta"] for p in summary["pipelines"]) == sum(
        r["jobs"]["head"] - r["jobs"]["base"] for r in rows
    )
    # The reverse diff is the negative; a rule over every target sees the total.
    backward = by_name(diff_generations(head, base))
    for t in result.targets:
        assert backward[t.target.name].gpu_hours_delta == pytest.approx(-t.gpu_hours_delta)
    (outcome,) = evaluate([parse_rule("*/*:cost>=-100000h")], result)
    assert outcome.counts["cost"] == pytest.approx(sum(t.gpu_hours_delta for t in result.targets))


# ---------------------------------------------------------------- --expect cost rules


def scenario(delta_hours: float) -> SelectionDiff:
    """One gitlab/mr target whose run costs `delta_hours` more, one GitHub target."""
    from matrixgen.views.cost import Cost
    from tests.diff_fixtures import target

    return SelectionDiff(
        base="a" * 40,
        head="worktree",
        targets=(
            TargetDiff(
                target("gitlab", "mr"),
                base_cost=Cost(jobs=2, gpu_hours_max=60, weighted_max=60),
                head_cost=Cost(jobs=3, gpu_hours_max=60 + delta_hours, weighted_max=60),
            ),
            TargetDiff(
                target("github", "L1"),
                base_cost=Cost(jobs=1, gpu_hours_max=30, weighted_max=30),
                head_cost=Cost(jobs=1, gpu_hours_max=25, weighted_max=25),
            ),
        ),
    )


def holds(rule: str, delta_hours: float) -> bool:
    (outcome,) = evaluate([parse_rule(rule)], scenario(delta_hours))
    return outcome.ok


def test_parse_cost_rules() -> None:
    assert parse_rule("gitlab/mr:cost<=+2h").checks == (CostCheck("<=", 2.0, "h"),)
    assert parse_rule("gitlab/mr:cost<=+30m").checks == (CostCheck("<=", 30.0, "m"),)
    assert parse_rule("gitlab/mr:cost<=0").checks == (CostCheck("<=", 0.0, ""),)
    assert parse_rule("*/nightly:cost>=-5h").checks == (CostCheck(">=", -5.0, "h"),)
    rule = parse_rule("gitlab/*:+<=6, cost<1.5h,-0")
    assert [str(c) for c in rule.checks] == ["+<=6", "cost<+1.5h", "-0"]


def test_cost_rules_hold_or_fail_on_the_gpu_hours_change() -> None:
    assert holds("gitlab/mr:cost<=+2h", 2)
    assert not holds("gitlab/mr:cost<=+2h", 2.5)
    assert holds("gitlab/mr:cost<=+30m", 0.5)
    assert not holds("gitlab/mr:cost<=+30m", 0.51)
    assert holds("gitlab/mr:cost<=+7m", 7 / 60)  # exactly 7 GPU-minutes
    assert holds("gitlab/mr:cost<=0", 0) and not holds("gitlab/mr:cost<=0", 0.001)
    assert holds("gitlab/mr:cost>=-5h", -5) and not holds("gitlab/mr:cost>=-5h", -5.5)
    assert holds("gitlab/mr:cost==+1h", 1) and holds("gitlab/mr:cost+1h", 1)
    assert holds("gitlab/mr:cost!=0", 1) and holds("gitlab/mr:cost>0", 0.25)
    # Over every target: +1 on mr, -5 on L1.
    assert holds("*/*:cost==-4h", 1)
    assert holds("*:cost<0", 1)  # by target name


def test_a_failing_cost_rule_says_what_it_got() -> None:
    outcomes = evaluate([parse_rule("gitlab/mr:cost<=+2h,+0")], scenario(12.5))
    with pytest.raises(ExpectationError) as info:
        require(outcomes, scenario(12.5))
    assert info.value.exit_code is ExitCode.EXPECTATION
    text = str(info.value)
    assert "expected at most +2 GPU-h per run, got +12.5 GPU-h per run" in text
    ok = evaluate([parse_rule("gitlab/mr:cost<=+20h")], scenario(12.5))
    assert str(ok[0]) == "--expect gitlab/mr:cost<=+20h: holds (cost<=+20h: +12.5 GPU-h per run)"


@pytest.mark.parametrize(
    ("rule", "says"),
    [
        ("gitlab/mr:cost<=2", 'the cost "2" needs a unit: "2h" (GPU-hours) or "2m"'),
        ("gitlab/mr:cost<=+2x", 'unknown unit "x"'),
        ("gitlab/mr:cost<=2H", 'unknown unit "H" in "cost<=2H" (did you mean "h"?)'),
        ("gitlab/mr:cots<=2h", 'cannot read "cots<=2h" (did you mean "cost"?)'),
        ("gitlab/mr:cost<=two", 'cannot read "cost<=two": a cost check is a signed amount'),
        ("gitlab/mr:cost<=", 'cannot read "cost<="'),
        ("gitlab/mr:cost<=1h,cost<=2h", "given twice"),
        ("gitlab/mr:cost<=" + "9" * 41 + "h", "has more than 40 characters"),
    ],
)
def test_malformed_cost_rules_are_usage_errors(rule: str, says: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_rule(rule)
    assert says in str(info.value)
    assert info.value.exit_code is ExitCode.USAGE


# What a person writes: up to a million, up to four decimals.
AMOUNTS = st.one_of(
    st.integers(-100_000, 100_000).map(float),
    st.decimals(-1_000_000, 1_000_000, places=4, allow_nan=False).map(float),
)


@settings(max_examples=100, deadline=None)
@given(
    op=st.sampled_from(["", "<=", ">=", "<", ">", "!=", "=="]),
    amount=AMOUNTS,
    unit=st.sampled_from(["h", "m"]),
)
def test_cost_checks_parse_back(op: str, amount: float, unit: str) -> None:
    check = CostCheck(op, amount, unit)
    (parsed,) = parse_rule(f"gitlab/mr:{check}").checks
    assert parsed == check
    assert str(parsed) == str(check)


# ---------------------------------------------------------------- the command


def test_cli_cost_in_every_format_and_rules(in_repo: Any, cli: Callable[..., Any]) -> None:
    in_repo.commit(dumped(weighted_tree()))
    in_repo.write(dumped(weighted_tree(two_node_gb200())))
    run = cli("diff", "HEAD", "--format", "json", "--expect", "github/L1:cost<=+24h")
    assert run.code == 0, run
    data = json.loads(run.out)
    assert data["summary"]["gpu_hours_delta"] == 24
    assert "--expect github/L1:cost<=+24h: holds (cost<=+24h: +24 GPU-h per run)" in run.err
    run = cli("diff", "HEAD", "--expect", "github/L1:cost<=+23.5h")
    assert run.code == ExitCode.EXPECTATION
    assert "expected at most +23.5 GPU-h per run, got +24 GPU-h per run" in run.err
    assert "+1 jobs, +24 GPU-h (+36 weighted) per run of github/L1" in run.out
    run = cli("diff", "HEAD", "--format", "markdown", "--expect", "github/L1:cost<=24")
    assert run.code == ExitCode.USAGE and "needs a unit" in run.err
    assert "Traceback" not in run.err
