"""Whole `matrixgen` processes, as ratios against the parse floor.

    python bench/bench_process.py [--megatron DIR] [--repeat N] [--wall | --instructions]

The floor is a process that only does `import yaml` and parses the same files
with `yaml.CSafeLoader`: nothing can do less and still read the tree. Every
command runs as the installed console script does (interpreter start-up,
imports, work, exit), output to /dev/null.

Trees: the Megatron-LM tree, and synthetic 10x and 50x trees made from copies
of it, written into a temporary directory (never into the checkout): each copy
sits in its own folder with every test case renamed, so that no job of one
copy is a duplicate of another's; the build recipes are shared. The 50x tree
is committed to a temporary git repository and one file is edited in the
working tree, for the one-file diff.

Runs alternate so that machine noise hits every side alike; figures are the
medians of N runs. Both CPU time (user + system, of the process and its
children: what it costs) and wall time (what one waits, noisier on a shared
machine) are shown; the goals are checked on CPU time.

--instructions counts what each process executes instead (valgrind's callgrind, one
run each, the process itself and not its children such as git): the same count for
the same code and input whatever else the machine runs, so two versions of the
package can be compared within a per cent on a shared machine, where times move by a
quarter. Give another checkout's package with PYTHONPATH=DIR to measure it.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

FLOOR = """
import os, sys
import yaml
for top, dirs, files in os.walk(sys.argv[1]):
    dirs[:] = sorted(d for d in dirs if not d.startswith("."))
    for name in sorted(files):
        if name.endswith((".yaml", ".yml")):
            with open(os.path.join(top, name), "rb") as handle:
                yaml.load(handle.read(), Loader=yaml.CSafeLoader)
"""

_CASES = re.compile(r"^(\s*-?\s*test_case: \[)([^\]]*)\]", re.MULTILINE)
GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@matrixgen.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@matrixgen.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


def default_tree() -> Path:
    env = os.environ.get("MATRIXGEN_MEGATRON_RECIPES")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "shared" / "megatron-recipes"


def copy_tree(source: Path, dest: Path, copies: int) -> None:
    """`copies` copies of the recipe files of `source` (test cases renamed per
    copy), sharing its build recipes."""
    for path in sorted(source.rglob("*.y*ml")):
        rel = path.relative_to(source)
        if rel.name.startswith("_build"):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest / rel)
            continue
        text = path.read_text(encoding="utf-8")
        for i in range(copies):
            out = dest / f"copy{i:02d}" / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            if i:
                text_i = _CASES.sub(
                    lambda m, i=i: (
                        m[1] + ", ".join(f"{c.strip()}_c{i:02d}" for c in m[2].split(",")) + "]"
                    ),
                    text,
                )
            else:
                text_i = text
            out.write_text(text_i, encoding="utf-8")


def git(top: Path, *args: str) -> None:
    subprocess.run(
        ["git", *args], cwd=top, check=True, env={**os.environ, **GIT_ENV}, capture_output=True
    )


@dataclass
class Timing:
    cpu: list[float]
    wall: list[float]

    def median(self, cpu: bool = True) -> float:
        return statistics.median(self.cpu if cpu else self.wall)


# As an installed tool runs: with its compiled .pyc files (written on the first,
# warming run if the environment asked Python not to).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run_once(argv: Sequence[str], cwd: Path) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one process; fails loudly on a non-zero exit."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False, env=ENV
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0,):
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr.decode()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


COLLECTED = re.compile(rb"Collected : (\d+)")


def count_once(argv: Sequence[str], cwd: Path) -> int:
    """Instructions one process executes (callgrind; git and other children not
    traced); fails loudly on a non-zero exit."""
    with tempfile.NamedTemporaryFile(prefix="matrixgen-callgrind-") as out:
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out.name}", *argv],
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            check=False,
            env={**ENV, "PYTHONHASHSEED": "0"},
        )
    found = COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr.decode()}")
    return int(found[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megatron", type=Path, default=default_tree(), help="recipe tree")
    parser.add_argument("--repeat", type=int, default=5)
    basis = parser.add_mutually_exclusive_group()
    basis.add_argument("--wall", action="store_true", help="check the goals on wall time")
    basis.add_argument(
        "--instructions", action="store_true", help="count instructions (callgrind), once each"
    )
    options = parser.parse_args()
    if options.instructions and shutil.which("valgrind") is None:
        print("--instructions needs valgrind on PATH", file=sys.stderr)
        return 2
    if not options.megatron.is_dir():
        print(f"no recipe tree at {options.megatron} (give --megatron DIR)", file=sys.stderr)
        return 2
    import yaml

    if not hasattr(yaml, "CSafeLoader"):
        print("PyYAML has no libyaml C loader here; the floor would be the slow one")
        return 1
    script = Path(sys.executable).with_name("matrixgen")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "matrixgen"]
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="matrixgen-bench-process-") as tmp:
        top = Path(tmp)
        megatron = options.megatron.resolve()
        x10, repo = top / "x10", top / "repo"
        x50 = repo / "recipes"
        copy_tree(megatron, x10, 10)
        copy_tree(megatron, x50, 50)
        git(repo, "init", "-q", "-b", "main")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "synthetic tree")
        edited = x50 / "copy07" / "h100" / "gpt.yaml"
        text = edited.read_text(encoding="utf-8")
        changed = text.replace("n_repeat: 5", "n_repeat: 4", 1)
        # The diff must see a real change: an edit that matched nothing compared
        # two identical trees (as an earlier `time_limit:` edit did).
        if changed == text:
            sys.exit(f"bench: {edited} holds no `n_repeat: 5` to edit")
        edited.write_text(changed, encoding="utf-8")
        out = top / "out"
        sides: dict[str, tuple[list[str], Path]] = {
            "floor megatron": ([python, "-c", FLOOR, str(megatron)], top),
            "generate megatron": (
                [*command, "generate", "--recipes", str(megatron), "--output-dir", str(out)],
                top,
            ),
            "floor 10x": ([python, "-c", FLOOR, str(x10)], top),
            "list 10x": ([*command, "list", "--recipes", str(x10)], top),
            "floor 50x": ([python, "-c", FLOOR, str(x50)], top),
            "list 50x": ([*command, "list", "--recipes", str(x50)], repo),
            "diff 50x": ([*command, "diff", "HEAD", "--recipes", "recipes"], repo),
        }
        timings = {name: Timing([], []) for name in sides}
        for argv, cwd in sides.values():  # warm the OS file cache and .pyc files
            run_once(argv, cwd)
        if options.instructions:
            counts = {name: count_once(argv, cwd) for name, (argv, cwd) in sides.items()}
        for _ in range(0 if options.instructions else options.repeat):
            for name, (argv, cwd) in sides.items():
                cpu, wall = run_once(argv, cwd)
                timings[name].cpu.append(cpu)
                timings[name].wall.append(wall)
        files = {
            name: sum(1 for _ in path.rglob("*.yaml"))
            for name, path in (("megatron", megatron), ("10x", x10), ("50x", x50))
        }
    print(f"trees: megatron {files['megatron']} files, 10x {files['10x']}, 50x {files['50x']}")
    if options.instructions:
        print(f"{'process':<20} {'instructions':>15}")
        for name, count in counts.items():
            print(f"{name:<20} {count:15,}")
        # One count per side: a median of one is the count itself.
        goals = report({n: Timing([c], [c]) for n, c in counts.items()}, basis="instructions")
        return 0 if all(goals) else 1
    print(f"medians of {options.repeat} runs each")
    print(f"{'process':<20} {'cpu ms':>9} {'wall ms':>9}")
    for name, t in timings.items():
        print(f"{name:<20} {t.median() * 1000:9.0f} {t.median(False) * 1000:9.0f}")
    goals = report(timings, basis="wall time" if options.wall else "CPU time")
    return 0 if all(goals) else 1


def report(timings: dict[str, Timing], *, basis: str) -> list[bool]:
    cpu = basis != "wall time"
    med: Callable[[str], float] = lambda name: timings[name].median(cpu)  # noqa: E731
    rows = [
        ("generate megatron / floor", med("generate megatron") / med("floor megatron"), 2.5),
        ("list 50x / floor", med("list 50x") / med("floor 50x"), 1.7),
        ("diff 50x / list 50x", med("diff 50x") / med("list 50x"), 1.5),
        ("list 50x / list 10x", med("list 50x") / med("list 10x"), 5.5),
    ]
    print(f"\n{'ratio (' + basis + ')':<28}  value   goal")
    results = []
    for label, value, goal in rows:
        ok = value <= goal
        results.append(ok)
        print(f"{label:<28} {value:6.2f}  <= {goal:<4} {'ok' if ok else 'MISSED'}")
    print(f"(floor 10x / floor 50x growth: {med('floor 50x') / med('floor 10x'):.2f})")
    return results


if __name__ == "__main__":
    sys.exit(main())
