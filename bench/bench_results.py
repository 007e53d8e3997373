"""The results store on SQLite: ingest speed and `flaky` speed.

    python bench/bench_results.py [--files 1000] [--tests 100] [--runs 1000] [--keys 1000]

Ingest: writes N JUnit XML files of M tests each, in pytest's shape, the tests of
each file under one unit-test bucket directory of the shipped recipes, then
times what `matrixgen results ingest` does with them (read and parse every
file, map each test to its job in gitlab-mr-h100-dev, store), two ways:
- one ingest of all N files (one run, one transaction);
- N ingests of one file each (N runs: one CI job per run, a transaction each).
The recipe tree is loaded once before either; a process start is not counted.

flaky: fills a store with RUNS runs x KEYS tests (1,000 x 1,000: a million
result rows) through the same ingest, with failures as a CI sees them (most
tests never fail; 2% flaky, failing about one run in ten; 1% broken from a
run on), then times `flaky_rows` (the whole `matrixgen results flaky` but printing)
and the command itself in a new process. Figures are medians of --repeat runs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from matrixgen.pipeline import generate
from matrixgen.results.flaky import FlakyPolicy, flaky_rows
from matrixgen.results.ingest import ingest
from matrixgen.results.junit import Outcome, Testcase, read_report, report_files
from matrixgen.results.mapping import candidates, map_reports
from matrixgen.results.queries import counts
from matrixgen.results.store import JobResults, RunInfo, open_store

RECIPES = Path(__file__).resolve().parents[1] / "recipes"
TARGET = "gitlab-mr-h100-dev"
BUCKETS = [
    "tests/unit_tests/data/",
    "tests/unit_tests/datasets/",
    "tests/unit_tests/tokenizers/",
    "tests/unit_tests/dist_checkpointing/",
    "tests/unit_tests/distributed/",
]
START = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)


class Clock:
    """Wall time, and the CPU time of this process and its children: on a shared
    machine the wall clock also counts the waits for a core; CPU time does not."""

    def __enter__(self) -> Clock:
        import resource

        self._wall = time.perf_counter()
        self._cpu = time.process_time()
        self._children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return self

    def __exit__(self, *_exc: object) -> None:
        import resource

        self.wall = time.perf_counter() - self._wall
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        children = (after.ru_utime + after.ru_stime) - (
            self._children.ru_utime + self._children.ru_stime
        )
        self.cpu = time.process_time() - self._cpu + children


def _median(clocks: list[Clock]) -> str:
    wall = statistics.median(c.wall for c in clocks)
    cpu = statistics.median(c.cpu for c in clocks)
    return f"{wall:.2f} s (CPU {cpu:.2f} s)"


def write_reports(out: Path, files: int, tests: int, seed: int = 1) -> None:
    rnd = random.Random(seed)
    for i in range(files):
        bucket = BUCKETS[i % len(BUCKETS)].rstrip("/").replace("/", ".")
        module = f"{bucket}.test_file{i}"
        cases = []
        for j in range(tests):
            body = ""
            roll = rnd.random()
            if roll < 0.01:
                body = '<failure message="assert 1 == 2">trace</failure>'
            elif roll < 0.02:
                body = '<skipped message="needs 8 GPUs"/>'
            cases.append(
                f'<testcase classname="{module}.TestK" name="test_{j}[p{j % 7}]" '
                f'time="0.{j % 10}">{body}</testcase>'
            )
        (out / f"report-{i:04d}.xml").write_text(
            '<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests">'
            f'<testsuite name="pytest" tests="{tests}" timestamp="2026-11-20T10:00:00+00:00" '
            f'time="12.0">{"".join(cases)}</testsuite></testsuites>'
        )


def time_ingest(files: int, tests: int) -> tuple[Clock, Clock, int]:
    generation = generate(RECIPES)
    with tempfile.TemporaryDirectory() as tmp:
        reports_dir = Path(tmp) / "reports"
        reports_dir.mkdir()
        write_reports(reports_dir, files, tests)
        paths = report_files([reports_dir])

        db = str(Path(tmp) / "one.db")
        with Clock() as one:
            reports = [read_report(p) for p in paths]
            groups = map_reports(generation, reports, target=TARGET, tag="latest")
            store = open_store(db, write=True)
            ingest(store, RunInfo(run_id="1", commit="c1", finished_at=START), groups)
        rows = counts(store)["results"]
        store.close()

        db = str(Path(tmp) / "many.db")
        with Clock() as many:
            store = open_store(db, write=True)
            pool = candidates(generation, target=TARGET, tag="latest")
            for n, path in enumerate(paths):
                groups = map_reports(generation, [read_report(path)], pool=pool)
                at = START + dt.timedelta(minutes=n)
                run = RunInfo(run_id=str(n), commit=f"c{n // 10}", finished_at=at)
                ingest(store, run, groups)
        store.close()
    return one, many, rows


def fill_store(db: str, runs: int, keys: int, seed: int = 7, *, ref: str | None = None) -> int:
    """RUNS runs of KEYS tests, spread over the buckets' jobs (of branch `ref`,
    when given, from a schedule)."""
    generation = generate(RECIPES)
    probe = map_reports(
        generation,
        [read_report_from_tests([f"{b}test_probe.py::test_x" for b in BUCKETS])],
        target=TARGET,
        tag="latest",
    )
    jobs = [g.job for g in probe]
    rnd = random.Random(seed)
    per_job = keys // len(jobs)
    kinds = []
    for _ in range(keys):
        roll = rnd.random()
        kinds.append("flaky" if roll < 0.02 else "broken" if roll < 0.03 else "ok")
    broken_from = {k: rnd.randrange(runs) for k, kind in enumerate(kinds) if kind == "broken"}
    store = open_store(db, write=True)
    try:
        for r in range(runs):
            groups = []
            for j, job in enumerate(jobs):
                tests = []
                for t in range(per_job):
                    k = j * per_job + t
                    failed = (kinds[k] == "flaky" and rnd.random() < 0.1) or (
                        kinds[k] == "broken" and r >= broken_from[k]
                    )
                    tests.append(
                        Testcase(
                            node_id=f"{BUCKETS[j]}test_m{t % 50}.py::test_{t}",
                            classname="",
                            name=f"test_{t}",
                            suite="pytest",
                            outcome=Outcome.FAILED if failed else Outcome.PASSED,
                            duration=0.5,
                        )
                    )
                groups.append(
                    JobResults(job=job, job_name=f"job{j}", target=TARGET, testcases=tuple(tests))
                )
            at = START + dt.timedelta(minutes=30 * r)
            source = "schedule" if ref is not None else None
            info = RunInfo(
                run_id=str(10000 + r), commit=f"c{r // 3}", finished_at=at, ref=ref, source=source
            )
            ingest(store, info, groups)
        return counts(store)["results"]
    finally:
        store.close()


def read_report_from_tests(node_ids: list[str]):
    from matrixgen.results.junit import Report

    return Report(
        path="probe",
        testcases=tuple(
            Testcase(
                node_id=n, classname="", name="x", suite="", outcome=Outcome.PASSED, duration=0
            )
            for n in node_ids
        ),
        finished_at=None,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--tests", type=int, default=100)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    ones, manys = [], []
    for _ in range(args.repeat):
        one, many, rows = time_ingest(args.files, args.tests)
        ones.append(one)
        manys.append(many)
    print(
        f"ingest {args.files} files, {args.files * args.tests} tests ({rows} rows stored): "
        f"one ingest {_median(ones)}; {args.files} ingests of one file {_median(manys)}"
    )

    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "big.db")
        start = time.perf_counter()
        rows = fill_store(db, args.runs, args.keys)
        print(f"filled a store with {rows} result rows in {time.perf_counter() - start:.1f} s")
        lib, cli = [], []
        for _ in range(args.repeat):
            store = open_store(db, write=False)
            with Clock() as clock:
                report = flaky_rows(store, FlakyPolicy(since_days=None))
            lib.append(clock)
            store.close()
            with Clock() as clock:
                subprocess.run(
                    [sys.executable, "-m", "matrixgen", "results", "flaky", "--db", db,
                     "--since", "100000", "--format", "json"],
                    check=True,
                    capture_output=True,
                )  # fmt: skip
            cli.append(clock)
        verdicts = report.by_verdict()
        print(
            f"flaky over {rows} rows ({len(report.rows)} keys: {verdicts['broken']} broken, "
            f"{verdicts['flaky']} flaky, {verdicts['ok']} ok): {_median(lib)}; "
            f"the command in a new process {_median(cli)}"
        )


if __name__ == "__main__":
    main()
