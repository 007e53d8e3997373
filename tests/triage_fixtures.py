"""Real runs for the triage tests: the project under tests/triage_project run
through pytest with --junitxml: eight scheduled baseline runs on main (seeds 0
to 7, a commit each), then two runs of a merge request's branch: one with the
branch's bug (seed 100), one with it fixed (seed 101)."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from matrixgen.cli.main import main
from matrixgen.results import junit
from matrixgen.results.ingest import ingest
from matrixgen.results.store import JobKey, JobResults, RunInfo, open_store
from tests import tiers
from tests.results_fixtures import TARGET

HERE = Path(__file__).resolve().parent
PROJECT = HERE / "triage_project"
SUITE = "gpt3_tp1_pp1_dev_dgx_h100"  # the functional job its functional tests stand for
BASELINE_RUNS = 8


@dataclass(frozen=True)
class TriageRun:
    run_id: str
    commit: str
    finished_at: str
    ref: str
    source: str
    report: Path


def _pytest(report: Path, seed: int, *, branch: bool, fixed: bool) -> None:
    tiers.uses("pytest")
    env = {
        **os.environ,
        "TRIAGE_PROJECT_RUN": "1",
        "TRIAGE_SEED": str(seed),
        "TRIAGE_BRANCH": "1" if branch else "0",
        "TRIAGE_FIXED": "1" if fixed else "0",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "--rootdir",
            str(PROJECT),
            "-c",
            str(PROJECT / "pytest.ini"),
            f"--junitxml={report}",
            "-o",
            f"junit_suite_name={SUITE}",
            "tests",
        ],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert report.exists(), done.stdout + done.stderr


@pytest.fixture(scope="session")
def triage_runs(tmp_path_factory: pytest.TempPathFactory) -> list[TriageRun]:
    out = tmp_path_factory.mktemp("triage-runs")
    runs = []
    for k in range(BASELINE_RUNS):
        report = out / f"{5000 + k}.xml"
        _pytest(report, k, branch=False, fixed=False)
        runs.append(
            TriageRun(
                str(5000 + k),
                f"{k:02d}" * 20,
                f"2026-11-{20 + k}T02:00:00Z",
                "main",
                "schedule",
                report,
            )
        )
    for k, (seed, fixed) in enumerate(((100, False), (101, True))):
        report = out / f"{6000 + k}.xml"
        _pytest(report, seed, branch=True, fixed=fixed)
        runs.append(
            TriageRun(
                str(6000 + k),
                f"b{k}" * 20,
                f"2026-11-28T1{k}:00:00Z",
                "feature",
                "merge_request_event",
                report,
            )
        )
    return runs


BUCKET = JobKey(
    "gitlab", "mr", "dgx_h100", "dev", "unit-tests", "tests/unit_tests/x/", "", unit=True
)


NODE = "tests/unit_tests/x/test_x.py::test_x"


START = dt.datetime(2026, 11, 10, tzinfo=dt.UTC)


def _store(
    db: str, baseline: str, *, node: str = NODE, messages: tuple[str, str] = ("", "")
) -> None:
    """Baseline runs on main from a schedule, one per character of `baseline`
    (F failed, P passed), then a merge request's run in which the test fails;
    `messages`: the baseline's failures' message, the merge request's."""
    store = open_store(db, write=True)
    try:
        outcomes = [(c == "F", "main", "schedule") for c in baseline]
        outcomes.append((True, "feature", "merge_request_event"))
        for k, (failed, ref, source) in enumerate(outcomes):
            test = junit.Testcase(
                node_id=node,
                classname="x",
                name="test_x",
                suite="",
                outcome=junit.Outcome.FAILED if failed else junit.Outcome.PASSED,
                duration=1.0,
                message=messages[k == len(baseline)] if failed else "",
            )
            group = JobResults(job=BUCKET, job_name="unit", target="", testcases=(test,))
            run = RunInfo(
                run_id=str(100 + k),
                commit=f"{k:040x}",
                finished_at=START + dt.timedelta(hours=k),
                ref=ref,
                source=source,
            )
            ingest(store, run, [group])
    finally:
        store.close()


# Entries of the triage tests: an allow-failure entry on the functional job, one
# on the dist_checkpointing bucket.
ENTRIES = """
  - id: gpt3-golden-values
    tracker: "#8101"
    kind: baseline-failure
    action: allow-failure
    match:
      model: gpt
      test_case: gpt3_tp1_pp1
      platforms: [dgx_h100]
      environments: [dev]
    owner: mcore-gpt
    added: "2026-11-15"
    expires: "2027-01-31"
    reason: Loss off its golden values since the optimizer change.

  - id: ckpt-bucket-allow-failure
    tracker: "#8102"
    kind: flaky
    action: allow-failure
    match:
      model: unit-tests
      test_case: tests/unit_tests/dist_checkpointing/
      environments: [dev]
    owner: mcore-dist-ckpt
    added: "2026-11-15"
    expires: "2027-01-31"
    reason: Timed out on the shared file system.
"""


def _ingest(db: str, recipes: Path, runs: list[TriageRun]) -> None:
    for run in runs:
        args = ["results", "ingest", "--db", db, "--recipes", str(recipes), "--target", TARGET]
        args += ["--tag", "latest", "--run-id", run.run_id, "--commit", run.commit]
        args += ["--finished-at", run.finished_at, "--ref", run.ref, "--source", run.source]
        assert main([*args, str(run.report)]) == 0
