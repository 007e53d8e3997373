"""Reading one large JUnit XML report: time and peak memory.

    python bench/bench_junit.py [--megabytes 100] [--repeat 3]

Writes one report of about MEGABYTES MB in pytest's shape (one suite,
testcases with classname, name and time, one in twenty failed), then reads it with
`evidence.junit.read_report` in a new process each time, which prints its
wall and CPU time and its peak resident memory (ru_maxrss) above what the process
held before reading (Python, matrixgen imported). Figures are medians of
--repeat runs.

On the 2-core machine of docs/benchmarks.md, 100 MB (1,031,826
testcases): +376 MB peak, 10.4 s of CPU (wall 20 to 30 s while the machine was
shared); before the reader streamed and folded records as read, +744 MB and
18.2 s of CPU.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

_CHILD = """
import resource, sys, time
from pathlib import Path
from matrixgen.evidence.junit import read_report
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start, cpu = time.perf_counter(), time.process_time()
report = read_report(Path(sys.argv[1]))
wall, cpu = time.perf_counter() - start, time.process_time() - cpu
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(wall, cpu, (peak - before) / 1024, len(report.testcases))
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--megabytes", type=float, default=100.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "report.xml"
        count = write_report(path, args.megabytes)
        size = path.stat().st_size / 1024 / 1024
        walls, cpus, peaks = [], [], []
        for _ in range(args.repeat):
            done = subprocess.run(
                [sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True
            )
            if done.returncode != 0:
                print(done.stderr.strip().splitlines()[-1])
                sys.exit(1)
            wall, cpu, peak, read = done.stdout.split()
            assert int(read) == count
            walls.append(float(wall))
            cpus.append(float(cpu))
            peaks.append(float(peak))
        wall, cpu, peak = (statistics.median(v) for v in (walls, cpus, peaks))
        print(
            f"read_report, {size:.0f} MB, {count:,} testcases: "
            f"{wall:.2f} s (CPU {cpu:.2f} s), peak memory +{peak:.0f} MB"
        )


if __name__ == "__main__":
    main()
