"""One large JUnit XML report: read whole, and ingested into a store; time and peak memory.

    python bench/bench_junit.py [--megabytes 10 100 200] [--repeat 3]

Writes one report of about MEGABYTES MB for each size given, in pytest's shape
(one suite, testcases with classname, name and time, one in twenty failed), then
in a new process each time:

- `read`: `results.junit.read_report`, which holds every distinct test in memory;
- `ingest`: `matrixgen results ingest` into a new SQLite store (the shipped
  recipes, target gitlab-mr-h100-dev: every test goes to the unit-test bucket
  tests/unit_tests/data/), which streams the records into the store in batches.

Each prints its wall and CPU time and its peak resident memory (ru_maxrss) above
what the process held before (Python, matrixgen imported; for ingest, the
recipes generated too). Figures are medians of --repeat runs. The ingest's
peak does not grow with the report: it is the parser's chunk, one batch of
records and SQLite's page cache.

On the 2-core machine of docs/benchmarks.md (shared with other work, so
wall times vary), 100 MB (1,031,826 testcases): read +376 MB peak, 10.4 s of
CPU; before the reader streamed and folded records as read, +744 MB and 18.2 s.
See docs/results-store.md for the ingest's figures.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

RECIPES = Path(__file__).resolve().parents[1] / "recipes"
_READ = """
import resource, sys, time
from pathlib import Path
from matrixgen.results.junit import read_report
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start, cpu = time.perf_counter(), time.process_time()
report = read_report(Path(sys.argv[1]))
wall, cpu = time.perf_counter() - start, time.process_time() - cpu
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(wall, cpu, (peak - before) / 1024, len(report.testcases))
"""
_INGEST = """
import resource, sys, time
from pathlib import Path
from matrixgen.cli.results import _stream_ingest
from matrixgen.results.mapping import Mapper
from matrixgen.results.queries import counts
from matrixgen.results.store import RunInfo, open_store
from matrixgen.pipeline import generate
mapper = Mapper(generate(Path(sys.argv[3])), target="gitlab-mr-h100-dev", tag="latest")
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start, cpu = time.perf_counter(), time.process_time()
info = RunInfo(run_id="1", commit=None, finished_at=None)
report, _ = _stream_ingest(sys.argv[2], info, [Path(sys.argv[1])], mapper)
wall, cpu = time.perf_counter() - start, time.process_time() - cpu
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
store = open_store(sys.argv[2], write=False)
assert counts(store)["results"] == report.rows
print(wall, cpu, (peak - before) / 1024, report.rows)
"""


def write_report(path: Path, megabytes: float) -> int:
    """A pytest-shaped report of about `megabytes` MB; the number of testcases."""
    limit = int(megabytes * 1024 * 1024)
    written = 0
    count = 0
    with path.open("w", encoding="utf-8") as out:
        head = (
            '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" '
            'errors="0" failures="0" skipped="0" tests="0" time="3600.0" '
            'timestamp="2026-11-30T10:00:00+00:00" hostname="ci">\n'
        )
        out.write(head)
        written += len(head)
        while written < limit:
            classname = f"tests.unit_tests.data.test_m{count // 500:05d}"
            body = '<failure message="assert 1 == 2"/>' if count % 20 == 0 else ""
            line = (
                f'<testcase classname="{classname}" name="test_{count}" '
                f'time="0.{count % 1000:03d}">{body}</testcase>\n'
            )
            out.write(line)
            written += len(line)
            count += 1
        out.write("</testsuite></testsuites>\n")
    return count


def _measure(child: str, args: list[str], repeat: int, count: int) -> tuple[float, ...]:
    walls, cpus, peaks = [], [], []
    for _ in range(repeat):
        done = subprocess.run([sys.executable, "-c", child, *args], capture_output=True, text=True)
        if done.returncode != 0:
            print(done.stderr.strip().splitlines()[-1])
            sys.exit(1)
        wall, cpu, peak, read = done.stdout.split()
        assert int(read) == count, (read, count)
        walls.append(float(wall))
        cpus.append(float(cpu))
        peaks.append(float(peak))
        if len(args) > 1:
            Path(args[1]).unlink()  # the store: each ingest starts from none
    return tuple(statistics.median(v) for v in (walls, cpus, peaks))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--megabytes", type=float, nargs="+", default=[10.0, 100.0, 200.0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", choices=["read", "ingest"], help="Measure only one of them.")
    args = parser.parse_args()
    for megabytes in args.megabytes:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "report.xml"
            count = write_report(path, megabytes)
            size = path.stat().st_size / 1024 / 1024
            kinds = {
                "read": (_READ, [str(path)]),
                "ingest": (_INGEST, [str(path), str(Path(tmp) / "results.db"), str(RECIPES)]),
            }
            for kind, (child, child_args) in kinds.items():
                if args.only not in (None, kind):
                    continue
                wall, cpu, peak = _measure(child, child_args, args.repeat, count)
                print(
                    f"{kind}, {size:.0f} MB, {count:,} testcases: "
                    f"{wall:.2f} s (CPU {cpu:.2f} s), peak memory +{peak:.0f} MB",
                    flush=True,
                )


if __name__ == "__main__":
    main()
