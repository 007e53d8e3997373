"""The results store at the scale of a large CI, on PostgreSQL: ingest, triage, flaky.

    python bench/bench_store_scale.py --db postgresql://USER@HOST:PORT/DB [--runs 300]
        [--buckets 40] [--tests 800] [--functional 300]

Fills an empty store (the URL's database must hold no store yet) with RUNS runs
of one pipeline each: BUCKETS unit-test buckets of TESTS tests each, and
FUNCTIONAL functional jobs of 5 tests each (40 x 800 + 300 x 5 = 33,500 results
a run; 300 runs: 10,050,000 rows). Two runs in three are scheduled runs of
`main`, the third a merge request's. Failures as a CI sees them: 1% of the tests
flaky (failing one run in ten), 0.2% broken from a third of the way on, 0.05%
failing only in merge requests. Each run is one `ingest.ingest` (what `matrixgen
results ingest` does with the records it reads: one transaction, COPY into
the staging table, then INSERT ... SELECT into results, and the weeks that
are over rolled up); the reports are built
in memory, so the figure is the store's. Client CPU is this process's only.
Figures: docs/results-store.md.

Then times, medians of --repeat runs:
- `triage` of the last merge request's run against main's scheduled runs
  (`results.triage.triage`: the run's failures, the baseline's, the flaky
  verdicts of those keys, quarantine of the shipped recipes);
- `flaky` over the whole store (`flaky_rows`, no time window), and over the
  default window (the last 30 days).

Prints the row counts, the ingest throughput (results per second, over all
runs and over the last tenth: the cost grows with the indexes) and the times.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import statistics
import time
from pathlib import Path

from matrixgen.pipeline import generate
from matrixgen.results.flaky import FlakyPolicy, flaky_rows
from matrixgen.results.ingest import ingest
from matrixgen.results.junit import Outcome, Testcase
from matrixgen.results.queries import RunFilter
from matrixgen.results.store import JobKey, JobResults, RunInfo, open_store
from matrixgen.results.triage import triage

RECIPES = Path(__file__).resolve().parents[1] / "recipes"
START = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)


def _plan(buckets: int, tests: int, functional: int, seed: int) -> list[tuple[JobKey, list]]:
    """Each job, and per test (node id, kind): ok, flaky, broken or branch."""
    rng = random.Random(seed)

    def kind() -> str:
        x = rng.random()
        return "flaky" if x < 0.01 else "broken" if x < 0.012 else "branch" if x < 0.0125 else "ok"

    plan = []
    for b in range(buckets):
        key = JobKey("gitlab", "mr", "dgx_h100", "dev", "unit-tests", f"tests/unit/b{b}/", "", True)
        plan.append(
            (key, [(f"tests/unit/b{b}/test_{i // 20}.py::test_{i}", kind()) for i in range(tests)])
        )
    for f in range(functional):
        key = JobKey("gitlab", "mr", "dgx_h100", "dev", "gpt", f"case_{f}", "", False)
        plan.append(
            (key, [(f"tests/functional/test_case.py::check_{i}", kind()) for i in range(5)])
        )
    return plan


def _run(plan: list, k: int, runs: int, mr: bool, rng: random.Random) -> list[JobResults]:
    groups = []
    for key, tests in plan:
        cases = []
        for node, kind in tests:
            failed = (
                (kind == "flaky" and rng.random() < 0.1)
                or (kind == "broken" and k >= runs // 3)
                or (kind == "branch" and mr)
            )
            cases.append(
                Testcase(
                    node_id=node,
                    classname="",
                    name=node.rsplit("::", 1)[-1],
                    suite="",
                    outcome=Outcome.FAILED if failed else Outcome.PASSED,
                    duration=0.5,
                    message="assert 0 == 1" if failed else "",
                )
            )
        groups.append(
            JobResults(job=key, job_name=key.test_case, target="", testcases=tuple(cases))
        )
    return groups


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, help="postgresql://... (an empty database)")
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--buckets", type=int, default=40)
    parser.add_argument("--tests", type=int, default=800)
    parser.add_argument("--functional", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--timings-only", action="store_true", help="Time triage and flaky on a filled store."
    )
    args = parser.parse_args()
    # The runs end 100 days after START; `triage` judges flakiness over the 30
    # days before the day of the last run.
    last_day = (START + dt.timedelta(hours=8 * (args.runs - 1))).date()
    os.environ["MATRIXGEN_TODAY"] = last_day.isoformat()

    last_mr = str(100_000 + max(k for k in range(args.runs) if k % 3 == 2))
    if not args.timings_only:
        fill(args)
    time_reads(args, last_mr)


def fill(args: argparse.Namespace) -> None:
    plan = _plan(args.buckets, args.tests, args.functional, seed=1)
    rng = random.Random(2)
    store = open_store(args.db, write=True)
    per_run: list[tuple[int, float]] = []
    cpus: list[float] = []  # this process's CPU seconds per ingest (the server's are not in it)
    try:
        for k in range(args.runs):
            mr = k % 3 == 2
            groups = _run(plan, k, args.runs, mr, rng)
            info = RunInfo(
                run_id=str(100_000 + k),
                commit=f"{k:040x}",
                finished_at=START + dt.timedelta(hours=8 * k),
                ref=f"mr-{k}" if mr else "main",
                source="merge_request_event" if mr else "schedule",
            )
            began, cpu = time.perf_counter(), time.process_time()
            report = ingest(store, info, groups)
            per_run.append((report.rows, time.perf_counter() - began))
            cpus.append(time.process_time() - cpu)
            if (k + 1) % max(1, args.runs // 10) == 0:
                rows = sum(r for r, _ in per_run)
                seconds = sum(s for _, s in per_run)
                print(
                    f"{k + 1} runs, {rows:,} results, {rows / seconds:,.0f} results/s", flush=True
                )
    finally:
        store.close()
    rows = sum(r for r, _ in per_run)
    seconds = sum(s for _, s in per_run)
    tail = per_run[-max(1, len(per_run) // 10) :]
    print(
        f"ingest: {rows:,} results in {seconds:.1f} s: {rows / seconds:,.0f} results/s "
        f"(client CPU {sum(cpus):.1f} s)"
    )
    tail_rate = sum(r for r, _ in tail) / sum(s for _, s in tail)
    print(f"ingest, the last tenth of the runs: {tail_rate:,.0f} results/s")


def time_reads(args: argparse.Namespace, last_mr: str) -> None:
    generation = generate(RECIPES)
    baseline = RunFilter(ref="main", source="schedule")
    triage_times, flaky_times, triage_cpu, flaky_cpu = [], [], [], []
    window_times: list[float] = []
    for _ in range(args.repeat):
        store = open_store(args.db, write=False)
        try:
            began, cpu = time.perf_counter(), time.process_time()
            result = triage(store, generation, last_mr, baseline=baseline)
            triage_times.append(time.perf_counter() - began)
            triage_cpu.append(time.process_time() - cpu)
            began, cpu = time.perf_counter(), time.process_time()
            judged = flaky_rows(store, FlakyPolicy(since_days=None))
            flaky_times.append(time.perf_counter() - began)
            flaky_cpu.append(time.process_time() - cpu)
            began = time.perf_counter()
            windowed = flaky_rows(store, FlakyPolicy())
            window_times.append(time.perf_counter() - began)
        finally:
            store.close()
    summary = result.summary()
    print(
        f"triage of run {last_mr}: {statistics.median(triage_times):.3f} s "
        f"(client CPU {statistics.median(triage_cpu):.3f} s; "
        f"{len(result.failures)} failures: {summary})"
    )
    print(
        f"flaky over the whole store: {statistics.median(flaky_times):.2f} s "
        f"(client CPU {statistics.median(flaky_cpu):.2f} s; "
        f"{len(judged.rows):,} keys, {judged.by_verdict()})"
    )
    print(
        f"flaky over the last 30 days (the default window): "
        f"{statistics.median(window_times):.2f} s ({len(windowed.rows):,} keys)"
    )


if __name__ == "__main__":
    main()
