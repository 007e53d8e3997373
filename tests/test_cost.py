"""GPU-hours: the formula, platform weights, quarantine, and the shipped tree's
figures checked against values computed by hand from its recipes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from matrixgen.model.jobs import Job, Selector, Target
from matrixgen.model.vocab import System
from matrixgen.views.cost import gpu_hours, jobs_cost, signed_hours
from tests.conftest import run_cli

SHIPPED = Path(__file__).resolve().parents[1] / "recipes"


def gpu_job(*, n_repeat: int, time_limit: int, nodes: int, gpus: int) -> Job:
    """A job of the mr scope with the fields the cost formula reads."""
    return Job(
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


@given(
    nodes=st.integers(1, 16),
    gpus=st.integers(0, 8),
    time_limit=st.integers(1, 20_000),
    n_repeat=st.integers(1, 10),
)
def test_the_formula(nodes: int, gpus: int, time_limit: int, n_repeat: int) -> None:
    job = gpu_job(n_repeat=n_repeat, time_limit=time_limit, nodes=nodes, gpus=gpus)
    assert gpu_hours(job) == pytest.approx(nodes * gpus * time_limit * n_repeat / 3600)
    # A decision's n_repeat applies where the recipe leaves it to the default.
    target = Target(name="t", system=System.GITHUB, selector=Selector(scope="mr"), n_repeat=1)
    from matrixgen.documents.config import DEFAULT_CONFIG

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


# ---------------------------------------------------------------- measured durations

JOB = "gpt3_tp1_pp1_dev_dgx_h100"  # 1 node x 8 GPUs, 45 min x 5 repeats: 30 GPU-h max


def junit(durations: list[float], stamp: str) -> str:
    cases = "\n".join(
        f'    <testcase classname="functional" name="step{i}" time="{d}"/>'
        for i, d in enumerate(durations)
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<testsuite name="{JOB}" tests="{len(durations)}" timestamp="{stamp}">\n'
        f"{cases}\n"
        '    <testcase classname="functional" name="later" time="900">'
        '<skipped message="not on this platform"/></testcase>\n'
        "</testsuite>\n"
    )


@pytest.fixture
def measured_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pinned_today: object) -> Path:
    """A SQLite store with three runs of one job, filled by `results ingest`:
    1,800 s, 2,400 s and 2,000 s (two tests each; a skipped one does not count)."""
    monkeypatch.chdir(tmp_path)  # no default store of a checkout around
    monkeypatch.delenv("MATRIXGEN_RESULTS_DB", raising=False)
    db = tmp_path / "results.db"
    for n, (runs, day) in enumerate(
        [([1000, 800], "2026-11-10"), ([1500, 900], "2026-11-11"), ([1200, 800], "2026-11-12")]
    ):
        report = tmp_path / f"run{n}.xml"
        report.write_text(junit([float(x) for x in runs], f"{day}T10:00:00"))
        args = ["results", "ingest", str(report), "--run-id", f"r{n}", "--job", JOB]
        args += ["--target", "gitlab-mr-h100-dev", "--recipes", str(SHIPPED), "--db", str(db)]
        run = run_cli(args)
        assert run.code == 0, run.err
    return db


def cost_json(*extra: str) -> dict:
    run = run_cli(["stats", "--recipes", str(SHIPPED), "--cost", "--format", "json", *extra])
    assert run.code == 0, run.err
    return json.loads(run.out)


def test_expected_gpu_hours_from_measured_durations(measured_store: Path) -> None:
    data = cost_json("--db", str(measured_store))
    targets = {t["target"]: t for t in data["targets"]}
    mr = targets["gitlab-mr-h100-dev"]
    # The median run is 2,000 s (the repeats it holds included): 8 GPUs x 2,000 s.
    assert mr["gpu_hours_expected"] == round(8 * 2000 / 3600, 3) == 4.444
    assert mr["measured_jobs"] == 1
    # Only that job was measured, and only where it ran (GitLab mr): elsewhere
    # there is no figure, never a made-up one.
    assert "gpu_hours_expected" not in targets["github-l1-h100-pr"]
    assert "gpu_hours_expected" not in targets["gitlab-mr-h100-lts"]
    pipelines = {p["pipeline"]: p for p in data["pipelines"]}
    assert pipelines["gitlab/mr"]["gpu_hours_expected"] == 4.444
    assert "gpu_hours_expected" not in pipelines["github/L1/pr"]
    files = {f["file"]: f for f in data["files"]}
    assert files["h100/gpt.yaml"]["gpu_hours_expected"] == 4.444
    # The upper bound does not move.
    assert (
        mr["gpu_hours_max"]
        == cost_json()["targets"][
            [t["target"] for t in data["targets"]].index("gitlab-mr-h100-dev")
        ]["gpu_hours_max"]
    )
    table = run_cli(["stats", "--recipes", str(SHIPPED), "--cost", "--db", str(measured_store)])
    row = next(line for line in table.out.splitlines() if line.startswith("gitlab/mr "))
    # 322 jobs in gitlab/mr's targets, less the 4 of GB300 (counted: false).
    assert row.endswith("  4.44 (1 of 318 measured)")


def test_no_store_no_expected_figure(measured_store: Path) -> None:
    data = cost_json()  # no --db, no variable, no default store here
    assert all("gpu_hours_expected" not in t for t in data["targets"])
    assert all("gpu_hours_expected" not in p for p in data["pipelines"])


def test_the_default_store_and_the_variable_are_read(
    measured_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MATRIXGEN_RESULTS_DB", str(measured_store))
    targets = {t["target"]: t for t in cost_json()["targets"]}
    assert targets["gitlab-mr-h100-dev"]["gpu_hours_expected"] == 4.444


def test_seconds_per_repeat_follow_the_repeats_of_the_target() -> None:
    """The hook gives the median run over the repeats one run of the job holds
    in the target (a decision's n_repeat included), so the expected figure is the
    job's GPUs x its median run; a job never measured has no figure."""
    from msgspec.structs import replace

    from matrixgen.documents.config import DEFAULT_CONFIG
    from matrixgen.results.durations import measured_hook
    from matrixgen.results.mapping import job_key

    job = gpu_job(n_repeat=4, time_limit=3600, nodes=1, gpus=8)
    plain = Target(name="t", system=System.GITLAB, selector=Selector(scope="mr"))
    decided = Target(name="d", system=System.GITLAB, selector=Selector(scope="mr"), n_repeat=2)
    hook = measured_hook({job_key(job, System.GITLAB): 7200.0})
    assert hook(job, plain) == 1800  # 7,200 s over 4 repeats
    assert hook(job, decided) == 3600  # over the 2 repeats the decision leaves
    for target in (plain, decided):
        cost = jobs_cost([job], target, DEFAULT_CONFIG, measured=hook)
        assert cost.expected == 16 and cost.measured_jobs == 1  # 8 GPUs x 2 h
    assert hook(replace(job, test_case="other"), plain) is None
    github = Target(name="g", system=System.GITHUB, selector=Selector(scope="mr"))
    assert hook(job, github) is None  # measured on GitLab only


@given(
    rows=st.lists(
        st.tuples(
            st.integers(1, 4),
            st.sampled_from([0, 4, 8]),
            st.sampled_from([600, 2700]),
            st.integers(1, 5),
            st.sampled_from(["a", "b"]),
            st.booleans(),
        ),
        max_size=12,
    ),
    decided=st.one_of(st.none(), st.integers(1, 3)),
)
def test_a_selection_costs_the_sum_of_its_jobs(rows: list[tuple], decided: int | None) -> None:
    """`jobs_cost` adds up each job's cost (weights, decided repeats, measured hook)."""
    from matrixgen.documents.config import parse_config
    from matrixgen.views.cost import Cost, weight

    config = parse_config(b"platforms: {b: {gpu_hour_weight: 1.5}}\n", "matrixgen.yaml")
    jobs = [
        Job(model="gpt", test_case=f"c{i}", environment="dev", platform=platform, tag=None,
            scope="mr", cadence=("pr",), name=f"c{i}", build=None, n_repeat=n_repeat,
            time_limit=limit, nodes=nodes, gpus=gpus,
            spec={"n_repeat": n_repeat} if own else {})
        for i, (nodes, gpus, limit, n_repeat, platform, own) in enumerate(rows)
    ]  # fmt: skip
    target = Target(
        name="t",
        system=System.GITLAB,
        selector=Selector(scope="mr"),
        n_repeat=decided,
    )

    def measured(job: Job, _: Target) -> float | None:
        return 100.0 * int(job.test_case[1:]) if int(job.test_case[1:]) % 2 else None

    total = Cost()
    for job in jobs:
        repeats = decided if decided is not None and "n_repeat" not in job.spec else None
        hours = gpu_hours(job, repeats)
        seconds = measured(job, target)
        total = total + Cost(
            jobs=1,
            gpu_hours_max=hours,
            weighted_max=hours * weight(config, job.platform),
            expected=gpu_hours(job, repeats, seconds) if seconds is not None else None,
            measured_jobs=1 if seconds is not None else 0,
            without_gpus=0 if job.gpus else 1,
        )
    assert jobs_cost(jobs, target, config, measured=measured) == total


def _strict(text: str) -> object:
    """orjson reads strict JSON only: NaN and Infinity are refused."""
    import orjson

    return orjson.loads(text)


def test_huge_test_durations_never_make_an_infinite_cost(
    measured_store: Path, tmp_path: Path
) -> None:
    """Two tests of time="1e308" summed to Infinity, which `stats --cost --format
    json` wrote: the report is refused (exit 10, located) and stores nothing."""
    from matrixgen.model.errors import ExitCode

    report = tmp_path / "huge.xml"
    report.write_text(junit([1e308, 1e308], "2026-11-13T10:00:00"))
    args = ["results", "ingest", str(report), "--run-id", "huge", "--job", JOB]
    args += ["--target", "gitlab-mr-h100-dev", "--recipes", str(SHIPPED)]
    run = run_cli([*args, "--db", str(measured_store)])
    assert run.code == ExitCode.RESULTS_FILE, run
    assert f"{report}:3:" in run.err and 'time="1e+308" is more than' in run.err
    run = run_cli(["stats", "--recipes", str(SHIPPED), "--cost", "--format", "json",
                   "--db", str(measured_store)])  # fmt: skip
    assert run.code == 0
    targets = {t["target"]: t for t in _strict(run.out)["targets"]}  # type: ignore[index]
    assert targets["gitlab-mr-h100-dev"]["gpu_hours_expected"] == 4.444


def test_a_store_holding_huge_durations_is_refused(measured_store: Path) -> None:
    """A store written other than by ingest: its sums are not figures."""
    import sqlite3

    from matrixgen.model.errors import ExitCode

    with sqlite3.connect(measured_store) as conn:
        conn.execute("UPDATE results SET duration = 1e308")
    conn.close()
    run = run_cli(["stats", "--recipes", str(SHIPPED), "--cost", "--format", "json",
                   "--db", str(measured_store)])  # fmt: skip
    assert run.code == ExitCode.RESULTS_STORE, run
    assert "sums to inf seconds of tests, not a duration" in run.err and run.out == ""


OVERFLOW_TREE = """
type: basic
format_version: 1
spec:
  name: "{test_case}"
  model: gpt
  nodes: NODES
  gpus: 8
  platforms: dgx_h100
products:
  - test_case: [huge]
    products:
      - {environment: [dev], scope: [mr], time_limit: [TIME_LIMIT], n_repeat: [1]}
"""


@pytest.mark.parametrize(
    ("nodes", "time_limit"),
    [("1", "1" + "0" * 400), ("1" + "0" * 150, "1" + "0" * 170), ("1", "1" + "0" * 300)],
)
def test_counts_too_large_for_a_number_are_the_trees_mistake(
    tree, nodes: str, time_limit: str
) -> None:
    """A time limit or node count past what a float holds ends in one clear line
    (exit 1), never a traceback nor `Infinity` in the JSON."""
    root = tree(
        {"h100/gpt.yaml": OVERFLOW_TREE.replace("NODES", nodes).replace("TIME_LIMIT", time_limit)}
    )
    run = run_cli(["stats", "--cost", "--recipes", str(root), "--format", "json"])
    if run.code == 0:
        import orjson

        orjson.loads(run.out)  # strict: no Infinity, no NaN
        return
    assert run.code == 1, run
    assert "Traceback" not in run.err
    # validate refuses such a number where it is written.
    assert "error: the number" in run.err, run


def test_a_weight_whose_sum_overflows_is_the_trees_mistake(tmp_path: Path) -> None:
    """gpu_hour_weight 1.0e+308 is a number the schema takes; the sums it makes
    are not: one clear line (exit 1), never a traceback nor `Infinity`."""
    import shutil

    root = tmp_path / "recipes"
    shutil.copytree(SHIPPED, root)
    config = root / "matrixgen.yaml"
    text = config.read_text(encoding="utf-8")
    assert "gpu_hour_weight: 1.5" in text
    config.write_text(text.replace("gpu_hour_weight: 1.5", "gpu_hour_weight: 1.0e+308"))
    run = run_cli(["stats", "--cost", "--recipes", str(root), "--format", "json"])
    assert run.code == 1, run
    assert "do not fit a number" in run.err and "Traceback" not in run.err


@given(st.floats(min_value=1e300, max_value=1.7e308))
def test_a_weight_too_large_for_the_sum_is_refused(weight: float) -> None:
    from matrixgen.model.errors import RecipeError
    from matrixgen.views.cost import _require_finite

    job = gpu_job(n_repeat=5, time_limit=2700, nodes=4, gpus=8)
    target = Target(name="t", system=System.GITLAB, selector=Selector(scope="mr"))
    hours = gpu_hours(job)
    from matrixgen.views.cost import Cost

    cost = Cost(jobs=1, gpu_hours_max=hours, weighted_max=hours * weight * 1e10)
    with pytest.raises(RecipeError, match="do not fit a number"):
        _require_finite(target, cost)


def test_cost_counts_the_jobs_stats_counts(pinned_today: object) -> None:
    """`stats` and `stats --cost` leave out the same platforms and targets
    (`counted: false`: GB300 in the shipped tree), and say so the same way."""
    stats = json.loads(run_cli(["stats", "--recipes", str(SHIPPED), "--format", "json"]).out)
    cost = cost_json()
    assert cost["excluded_platforms"] == stats["excluded_platforms"] == ["dgx_gb300"]
    assert cost["excluded_targets"] == stats["excluded_targets"]
    assert [t["target"] for t in cost["targets"]] == [t["name"] for t in stats["targets"]]
    assert "dgx_gb300" not in {p["platform"] for p in cost["platforms"]}
    assert not any(f["file"].startswith("gb300/") for f in cost["files"])
    # Every job stats counts in a target costs, but the ones quarantine skips.
    for counted, costed in zip(stats["targets"], cost["targets"], strict=True):
        assert costed["jobs"] == counted["jobs"] - counted["quarantine"]["skip"]
    lines = [
        run_cli(["stats", "--recipes", str(SHIPPED), *a]).out.splitlines() for a in ([], ["--cost"])
    ]
    said = [[line for line in out if line.startswith("Not counted: ")] for out in lines]
    assert (
        said[0]
        == said[1]
        == [
            "Not counted: platform dgx_gb300; targets gitlab-mr-gb300-dev, "
            "gitlab-nightly-gb300-dev (--all-platforms counts them)"
        ]
    )
    # --all-platforms counts them in both.
    every = cost_json("--all-platforms")
    assert every["excluded_platforms"] == [] and "dgx_gb300" in {
        p["platform"] for p in every["platforms"]
    }


def test_a_platform_weighs_its_own_weight_before_the_one_it_is_an_alias_of() -> None:
    import msgspec

    from matrixgen.documents.config import ProjectConfig
    from matrixgen.documents.config_sections import ConfigDocument
    from matrixgen.views.cost import weight

    platforms = {
        "dgx_h100": {"gpu_hour_weight": 2.0},
        "h100_eos": {"alias_of": "dgx_h100", "gpu_hour_weight": 3.0},  # its own wins
        "h100_ord": {"alias_of": "h100_eos"},  # the end of its chain: dgx_h100's
        "a100": {},
    }
    doc = msgspec.convert({"platforms": platforms}, ConfigDocument)
    config = ProjectConfig(path="matrixgen.yaml", document=None, doc=doc)
    assert [weight(config, p) for p in platforms] == [2.0, 3.0, 2.0, 1.0]


@pytest.mark.parametrize(
    ("value", "shown"),
    [(12.5, "+12.5"), (-0.75, "-0.75"), (1234.0, "+1,234"), (0.0, "0"), (-0.001, "0")],
)
def test_a_change_in_gpu_hours_is_signed_unless_it_shows_as_zero(value: float, shown: str) -> None:
    assert signed_hours(value) == shown


def test_a_cost_table_writes_jobs_in_thousands_in_html_only() -> None:
    from matrixgen.views.cost import Cost, cost_report

    report = cost_report("pipeline (one run)", [("gitlab/mr", Cost(jobs=1234))], {"gitlab/mr": 2})
    assert "<td class=n>2</td><td class=n>1,234</td>" in report.html()
    assert report.text().splitlines()[2].split() == ["gitlab/mr", "1234", "0", "0", "-"]
