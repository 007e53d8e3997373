"""`matrixgen report` on the shipped tree with a 100,000-result store.

    python bench/bench_report.py [--runs 100] [--keys 1000] [--repeat 3]

Fills a SQLite store in a temporary directory through the store's own ingest
(`bench_results.fill_store`: RUNS runs x KEYS tests of the shipped tree's
unit-test buckets in gitlab-mr-h100-dev, 2% flaky, 1% broken from a run on),
then times the site for the shipped tree with it: gather, render and write in
this process (the tree loaded once before), and the whole command in a new
process; then the same with `--run` (the Triage page of the last run, against
the one before it: the runs are main's scheduled runs). Prints each page's
size; the flake grid is KEYS tests x RUNS runs.
Goals: the command at most 2 s; the flake grid under 5 MB of HTML.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_results import RECIPES, Clock, fill_store

from matrixgen.cli.features import report_contributions
from matrixgen.pipeline import generate
from matrixgen.quarantine.policy import current_day
from matrixgen.report.pages import render_site
from matrixgen.report.site import gather, write_site
from matrixgen.results.site import TriageQuery

TODAY = "2026-11-10"  # the filled runs finish from 2026-11-01 on


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    os.environ["MATRIXGEN_TODAY"] = TODAY
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "results.db")
        rows = fill_store(db, args.runs, args.keys, ref="main")
        print(f"store: {rows:,} results ({args.runs} runs x {args.keys} tests)")
        generation = generate(RECIPES)
        last = str(10000 + args.runs - 1)
        timings: dict[str, tuple[list[Clock], list[Clock]]] = {}
        sites: dict[str, dict[str, str]] = {}
        for case, query, extra in (
            ("no --run", None, []),
            (f"--run {last}", TriageQuery(run_id=last), ["--run", last]),
        ):
            in_process: list[Clock] = []
            for _ in range(args.repeat):
                with Clock() as clock:
                    data = gather(
                        generation,
                        since_days=30,
                        today=current_day(),
                        contributions=report_contributions(),
                        options={"db": db, "triage": query},
                    )
                    sites[case] = render_site(data)
                    write_site(Path(tmp) / "site", sites[case])
                in_process.append(clock)
            command: list[Clock] = []
            for _ in range(args.repeat):
                with Clock() as clock:
                    subprocess.run(
                        [sys.executable, "-m", "matrixgen", "report", "--recipes", str(RECIPES),
                         "--output-dir", str(Path(tmp) / "cmd"), "--db", db, *extra],
                        check=True, capture_output=True,
                    )  # fmt: skip
                command.append(clock)
            timings[case] = (in_process, command)

    def median(clocks: list[Clock]) -> str:
        wall = statistics.median(c.wall for c in clocks)
        cpu = statistics.median(c.cpu for c in clocks)
        return f"{wall:.2f} s (CPU {cpu:.2f} s)"

    for case, (in_process, command) in timings.items():
        print(f"{case}:")
        print(f"  gather + render + write, tree loaded: {median(in_process)}")
        print(f"  matrixgen report, a new process:      {median(command)}")
    site = sites["no --run"]
    total = 0
    for name, page in site.items():
        size = len(page.encode("utf-8"))
        total += size
        print(f"  {name:16} {size:>12,} bytes")
    print(f"  {'site':16} {total:>12,} bytes")
    triage = sites[f"--run {last}"]["triage.html"]
    print(f"  {'triage.html':16} {len(triage.encode('utf-8')):>12,} bytes with --run {last}")
    grid = len(site["flakes.html"].encode("utf-8"))
    print(f"flake grid ({args.keys} tests x {args.runs} runs): {grid / 1e6:.2f} MB (goal < 5 MB)")


if __name__ == "__main__":
    main()
