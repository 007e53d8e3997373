"""bench/bench_goldens.py runs on the real refresh commits: for each, a checkout
whose last commit changes exactly the commit's golden-values files, timed both
ways (the command in fresh processes, the diff alone in the bench's process).
Its figures are timings, so only what does not depend on the clock is checked:
the files each commit changes, counted here from the shared data itself, and
that both ways were timed with and without the review.

Skips when the golden-values changes or the recipe tree are absent (fails under
MATRIXGEN_REQUIRE_MEGATRON=1, as `.ci/run` sets it).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require_megatron, require_megatron_goldens

pytestmark = pytest.mark.slow  # three checkouts built, the command run as processes

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_goldens.py"


def changed_json(commit: Path) -> int:
    """The golden-values files a commit adds, removes or changes."""
    before = {p.relative_to(commit / "before"): p for p in (commit / "before").rglob("*.json")}
    after = {p.relative_to(commit / "after"): p for p in (commit / "after").rglob("*.json")}
    return sum(
        rel not in before or rel not in after or before[rel].read_bytes() != after[rel].read_bytes()
        for rel in before.keys() | after.keys()
    )


def test_each_commit_is_timed_both_ways_on_the_files_it_changes() -> None:
    goldens, recipes = require_megatron_goldens(), require_megatron()
    commits = sorted(p for p in goldens.iterdir() if (p / "after").is_dir())
    run = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--goldens",
            str(goldens),
            "--recipes",
            str(recipes),
            "--repeat=1",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode in (0, 1), run.stderr  # 1: a ratio over the goal, on this machine
    counted = dict(re.findall(r"^(\w+): (\d+) golden-values files changed$", run.stdout, re.M))
    assert counted == {c.name: str(changed_json(c)) for c in commits}
    timed = re.findall(
        r"^  (the command|the diff alone)[^:]*: wall +[\d.]+ -> +[\d.]+ ms", run.stdout, re.M
    )
    assert timed == ["the command", "the diff alone"] * len(commits)
    assert re.search(r"^largest ratio of the command [\d.]+ \(goal <= 1\.2\)", run.stdout, re.M)
