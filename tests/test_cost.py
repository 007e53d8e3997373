"""GPU-hours: the formula, platform weights, quarantine, and the shipped tree's
figures checked against values computed by hand from its recipes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from matrixgen.engine.model import Job, Selector, Target
from matrixgen.engine.vocab import System
from matrixgen.views.cost import gpu_hours, jobs_cost
from tests.conftest import run_cli

SHIPPED = Path(__file__).resolve().parents[1] / "recipes"


@given(
    nodes=st.integers(1, 16),
    gpus=st.integers(0, 8),
    time_limit=st.integers(1, 20_000),
    n_repeat=st.integers(1, 10),
)
def test_the_formula(nodes: int, gpus: int, time_limit: int, n_repeat: int) -> None:
    job = Job(
        model="gpt",
        test_case="c",
        environment="dev",
        platform="p",
        tag=None,
        scope="mr",
        cadence=("pr",),
        name="c",
        build=None,
        n_repeat=n_repeat,
        time_limit=time_limit,
        nodes=nodes,
        gpus=gpus,
    )
    assert gpu_hours(job) == pytest.approx(nodes * gpus * time_limit * n_repeat / 3600)
    # A decision's n_repeat applies where the recipe leaves it to the default.
    target = Target(
        name="t", system=System.GITHUB, selector=Selector(scope="mr"), settings={"n_repeat": 1}
    )
    from matrixgen.engine.config import DEFAULT_CONFIG

    cost = jobs_cost([job], target, DEFAULT_CONFIG)
    assert cost.gpu_hours_max == pytest.approx(nodes * gpus * time_limit / 3600)


@pytest.fixture
def shipped(pinned_today: object) -> dict:
    run = run_cli(["stats", "--recipes", str(SHIPPED), "--cost", "--format", "json"])
    assert run.code == 0, run.err
    return json.loads(run.out)


def test_shipped_figures_by_hand(shipped: dict) -> None:
    targets = {t["target"]: t for t in shipped["targets"]}
    # L0 on GB200: 4 cases of 2 nodes x 4 GPUs, 45 min, 5 repeats = 30 GPU-h each;
    # a GB200 GPU-hour weighs 1.5.
    l0 = targets["github-l0-gb200-pr"]
    assert (l0["jobs"], l0["gpu_hours_max"], l0["weighted_gpu_hours_max"]) == (4, 120, 180)
    # One-node GB200 alias: 1 node x 4 GPUs x 45 min x 5 = 15 GPU-h; the alias
    # weighs as its fleet.
    one = targets["github-l1-gb200-1node-pr"]
    assert (one["jobs"], one["gpu_hours_max"], one["weighted_gpu_hours_max"]) == (4, 60, 90)
    # mr-slim on H100: 8 jobs (one of the 9 is skipped by quarantine), 1 x 8 GPUs.
    slim = targets["gitlab-mr-slim-h100-dev"]
    assert slim["jobs"] == 8
    # The skipped case costs nothing: 7 numerical cases (30 GPU-h) + 1 inference
    # case (1 repeat: 6 GPU-h).
    assert slim["gpu_hours_max"] == 7 * 30 + 6
    pipelines = {p["pipeline"]: p for p in shipped["pipelines"]}
    mr = [t for t in shipped["targets"] if t["system"] == "gitlab" and t["scope"] == "mr"]
    assert pipelines["gitlab/mr"]["gpu_hours_max"] == pytest.approx(
        sum(t["gpu_hours_max"] for t in mr)
    )
    assert "github/L1/pr" in pipelines and "gitlab/nightly" in pipelines
    assert shipped["formula"].startswith("nodes x gpus x time_limit x n_repeat / 3600")
    files = {f["file"]: f for f in shipped["files"]}
    # The long nightly recipe: 90-minute cases on 4 nodes x 8 GPUs, 5 repeats = 240 GPU-h.
    long_runs = files["h100/gpt-long.yaml"]
    assert long_runs["gpu_hours_max"] == long_runs["jobs"] * 240


def test_the_table_names_the_formula(pinned_today: object) -> None:
    run = run_cli(["stats", "--recipes", str(SHIPPED), "--cost"])
    assert run.code == 0, run.err
    assert "pipeline (one run)" in run.out and "GPU-hours = nodes x gpus" in run.out
    assert "github-l0-gb200-pr                4     120        180" in run.out
