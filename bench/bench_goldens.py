"""The golden-values review's share of `matrixgen diff` on real refresh commits.

    python bench/bench_goldens.py [--goldens DIR] [--recipes DIR] [--repeat N]

For each refresh commit of Megatron-LM's golden-values changes (`--goldens`,
default `$MATRIXGEN_MEGATRON_GOLDENS`, else `../shared/megatron-goldens`), the
script builds a checkout laid out as Megatron-LM's in a temporary directory
(the recipe tree of `--recipes`, default `$MATRIXGEN_MEGATRON_RECIPES`, else
`../shared/megatron-recipes`, at `tests/test_utils/recipes`; the commit's
before files as one commit and its after files as the next) and times
`matrixgen diff HEAD~1 HEAD`, output thrown away:

- with the golden-values review (what the command does);
- without it (the review switched off: the same command otherwise).

Two ways, each printed:

- the command as CI runs it: a fresh Python process each run (interpreter
  start, imports, the diff, exit), which is what a pipeline waits for; the
  goal is judged here;
- the diff alone, called again and again in this process (imports and caches
  warm, interpreter start left out): the review's own share, shown larger.

Runs alternate, each from a fresh repository object and cache, so machine
noise hits both alike; figures are medians of wall time and of CPU time (the
processes and their git children). The ratio is with / without; the goal is
at most 1.2 (the exit status says whether the wall-time ratio of the command,
for every commit, meets it).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from matrixgen.cli.main import main as matrixgen
from matrixgen.diff import golden_review

GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@matrixgen.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@matrixgen.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}
SHARED = Path(__file__).resolve().parents[2] / "shared"
GOAL = 1.2


def git(top: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=top, check=True, env={**os.environ, **GIT_ENV})


def lay_over(side: Path, top: Path) -> None:
    """A side's files over the checkout, with new times (git sees every change)."""
    if side.is_dir():
        shutil.copytree(side, top, dirs_exist_ok=True, copy_function=shutil.copy)
    for path in [top, *top.rglob("*")]:
        if ".git" not in path.parts:
            path.chmod(path.stat().st_mode | 0o200)


def build(top: Path, recipes: Path, commit: Path) -> None:
    git(top, "init", "-q", "-b", "main")
    shutil.copytree(recipes, top / "tests" / "test_utils" / "recipes", copy_function=shutil.copy)
    lay_over(commit / "before", top)
    git(top, "add", "-A")
    git(top, "commit", "-q", "-m", "before")
    before = {p.relative_to(commit / "before") for p in (commit / "before").rglob("*.json")}
    after = {p.relative_to(commit / "after") for p in (commit / "after").rglob("*.json")}
    for rel in before - after:
        (top / rel).unlink()
    lay_over(commit / "after", top)
    git(top, "add", "-A")
    git(top, "commit", "-q", "-m", "after")


@contextlib.contextmanager
def review_off() -> Iterator[None]:
    """The diff without its golden-values review."""
    real = golden_review.golden_template
    golden_review.golden_template = lambda configs: None  # type: ignore[assignment]
    try:
        yield
    finally:
        golden_review.golden_template = real


def run_diff(top: Path, fmt: str) -> None:
    cwd = os.getcwd()
    os.chdir(top)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = matrixgen(["diff", "HEAD~1", "HEAD", "--format", fmt])
    finally:
        os.chdir(cwd)
    if code != 0:
        raise SystemExit(f"matrixgen diff exited with {code} in {top}")


# One run of the command in a fresh interpreter, as its console script runs
# it; "without" switches the review off first (both import the review's module
# before the command, so both start alike).
PROCESS = """
import sys
from matrixgen.diff import golden_review
if sys.argv[1] == "without":
    golden_review.golden_template = lambda configs: None
from matrixgen.cli.main import main
raise SystemExit(main(["diff", "HEAD~1", "HEAD", "--format", sys.argv[2]]))
"""


def run_process(top: Path, fmt: str, name: str) -> None:
    code = subprocess.run(
        [sys.executable, "-c", PROCESS, name, fmt],
        cwd=top,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    ).returncode
    if code != 0:
        raise SystemExit(f"matrixgen diff exited with {code} in {top}")


def run_in_process(top: Path, fmt: str, name: str) -> None:
    if name == "with":
        run_diff(top, fmt)
    else:
        with review_off():
            run_diff(top, fmt)


def measure(
    run: Callable[[Path, str, str], None], top: Path, fmt: str, repeat: int
) -> tuple[dict[tuple[str, str], float], dict[str, float]]:
    """Median milliseconds by (wall or cpu, with or without), and the ratios."""
    wall: dict[str, list[float]] = {"with": [], "without": []}
    cpu: dict[str, list[float]] = {"with": [], "without": []}
    for _ in range(repeat):
        for name in wall:
            start, used = time.perf_counter(), cpu_seconds()
            run(top, fmt, name)
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(cpu_seconds() - used)
    figures = {
        (kind, name): statistics.median(runs[name]) * 1000
        for kind, runs in (("wall", wall), ("cpu", cpu))
        for name in runs
    }
    ratios = {
        kind: figures[(kind, "with")] / figures[(kind, "without")] for kind in ("wall", "cpu")
    }
    return figures, ratios


def show(label: str, figures: dict[tuple[str, str], float], ratios: dict[str, float]) -> None:
    print(
        f"  {label}: wall {figures[('wall', 'without')]:6.1f} -> "
        f"{figures[('wall', 'with')]:6.1f} ms (x{ratios['wall']:.3f}); CPU, git included "
        f"{figures[('cpu', 'without')]:6.1f} -> {figures[('cpu', 'with')]:6.1f} ms "
        f"(x{ratios['cpu']:.3f})"
    )


def cpu_seconds() -> float:
    """CPU time of this process and of its finished children (git, and the
    command's processes with theirs)."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def golden_files(top: Path) -> int:
    out = subprocess.run(
        ["git", "diff-tree", "-r", "--name-only", "HEAD~1", "HEAD", "--", "tests/functional_tests"],
        cwd=top,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return sum(line.endswith(".json") for line in out.splitlines())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    env_goldens = os.environ.get("MATRIXGEN_MEGATRON_GOLDENS")
    env_recipes = os.environ.get("MATRIXGEN_MEGATRON_RECIPES")
    parser.add_argument(
        "--goldens", type=Path, default=Path(env_goldens or SHARED / "megatron-goldens")
    )
    parser.add_argument(
        "--recipes", type=Path, default=Path(env_recipes or SHARED / "megatron-recipes")
    )
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument(
        "--format", dest="fmt", default="text", choices=["text", "json", "markdown"]
    )
    options = parser.parse_args()
    commits = sorted(p for p in options.goldens.iterdir() if (p / "after").is_dir())
    if not commits or not options.recipes.is_dir():
        raise SystemExit(
            f"need {options.goldens}/<commit>/after and the recipe tree {options.recipes}"
        )
    print(
        f"matrixgen diff HEAD~1 HEAD --format {options.fmt}, {options.repeat} runs each (medians)"
    )
    worst = warm = 0.0
    with tempfile.TemporaryDirectory(prefix="matrixgen-bench-goldens-") as tmp:
        for commit in commits:
            top = Path(tmp) / commit.name
            top.mkdir()
            build(top, options.recipes, commit)
            run_diff(top, options.fmt)  # warm imports and the OS file cache
            print(f"{commit.name}: {golden_files(top)} golden-values files changed")
            figures, ratios = measure(run_process, top, options.fmt, options.repeat)
            show("the command, a fresh process each run", figures, ratios)
            worst = max(worst, ratios["wall"])
            figures, ratios = measure(run_in_process, top, options.fmt, options.repeat)
            show("the diff alone, in this process (warm)", figures, ratios)
            warm = max(warm, ratios["wall"])
    print(
        f"largest ratio of the command {worst:.3f} (goal <= {GOAL}); of the diff alone {warm:.3f}"
    )
    return 0 if worst <= GOAL else 1


if __name__ == "__main__":
    raise SystemExit(main())
