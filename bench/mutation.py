"""Mutation testing with cosmic-ray, module by module (not run in CI: too slow).

    pip install -e '.[mutation]'
    python bench/mutation.py                      # every core module, 20 mutants each
    python bench/mutation.py --sample 0           # every mutant (hours on 2 cores)
    python bench/mutation.py --module select --module diff --report survivors.txt
    python bench/mutation.py --all --sample 0 --work /tmp/mutation   # the whole package
    python bench/mutation.py --all --sample 0 --work /tmp/m1 --shard 1/2   # half, per core
    python bench/mutation.py --module matrixgen/views/cost.py --sample 0

cosmic-ray writes each mutant into the source file and runs the test command, so
the run happens in a copy of the checkout's tracked files in a temporary
directory; the checkout itself is never touched. Per module, the mutants are a
seeded sample (the same sample for the same source and seed), and each runs the
module's tests only, in the fast tier (`-m fast`: no browser, server, real
validator, external generator or real pytest run), with the derandomised
Hypothesis profile. The Megatron-LM tree is used when
MATRIXGEN_MEGATRON_RECIPES points at it.

A module's tests: for the core modules (CORE), the test files named there; for
every other module of the package (`--all`, or `--module PATH`), the test files
a coverage map chooses. The map is made once per work directory: the fast tier
runs under coverage with a context per test, and each module gets the fewest
test files whose tests run every line of it that some test runs (greedy set
cover), and its mirrored file (`tests/test_<name>.py`) when there is one.

Mutants inside type annotations are left out before sampling: the modules
import `annotations` from __future__, so annotations are never evaluated and
such a mutant is equivalent to the original.

The score of a module is killed / (killed + survived) over the sampled mutants
that ran; mutants that make the module fail to import count as killed (the
tests noticed), timeouts too. Each surviving mutant is listed with its diff, in
--report when given, and the time per module is printed (mutants per minute).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Core:
    name: str
    module: str
    tests: tuple[str, ...]


CORE = (
    Core("expand", "matrixgen/engine/expand.py", ("tests/test_expand.py", "tests/test_compat.py")),
    Core("select", "matrixgen/engine/select.py", ("tests/test_select.py",)),
    Core("quarantine", "matrixgen/quarantine/apply.py", ("tests/test_quarantine.py",)),
    Core("quarantine-edit", "matrixgen/quarantine/edit.py", ("tests/test_quarantine_edit.py",)),
    Core("diff", "matrixgen/diff/compare.py", ("tests/test_diff.py",)),
    Core(
        "emit-common",
        "matrixgen/emit/common.py",
        ("tests/test_emit_common.py", "tests/test_emit_github.py", "tests/test_emit_gitlab.py"),
    ),
    Core("emit-github", "matrixgen/systems/github/emitter.py", ("tests/test_emit_github.py",)),
    Core("emit-gitlab", "matrixgen/systems/gitlab/emitter.py", ("tests/test_emit_gitlab.py",)),
)


def package_modules() -> list[str]:
    """Every module of the package that holds code (not only a docstring)."""
    found = []
    for path in sorted((REPO / "matrixgen").rglob("*.py")):
        body = ast.parse(path.read_text(encoding="utf-8")).body
        if any(not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)) for n in body):
            found.append(str(path.relative_to(REPO)))
    return found


def mirrored_tests(module: str) -> list[str]:
    """tests/test_<name>.py and tests/test_<package>_<name>.py, where they exist."""
    path = Path(module)
    names = [f"test_{path.stem}.py", f"test_{path.parent.name}_{path.stem}.py"]
    return [f"tests/{n}" for n in dict.fromkeys(names) if (REPO / "tests" / n).exists()]


MAP_FILE = ".mutation-map.json"
# A pytest plugin for the map's run: each test's lines under its node id (its
# fixtures' set-up included). Coverage's own per-test contexts name the function
# that runs a Hypothesis test's examples, not the test.
CONTEXT_PLUGIN = """
import coverage, pytest

@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    current = coverage.Coverage.current()
    if current is not None:
        current.switch_context(item.nodeid)
    try:
        return (yield)
    finally:
        if current is not None:
            current.switch_context("")
"""


def test_map(work: Path, env: dict[str, str]) -> dict[str, list[str]]:
    """{module: test files} from one run of the fast tier under coverage, a
    context per test (kept in the work directory for the next modules)."""
    cached = work / MAP_FILE
    if cached.exists():
        return json.loads(cached.read_text())
    rc = work / ".mutation-coveragerc"
    rc.write_text("[run]\nsource = matrixgen\ndata_file = .mutation-coverage\n")
    (work / "mutation_contexts.py").write_text(CONTEXT_PLUGIN)
    subprocess.run(
        [sys.executable, "-m", "coverage", "run", f"--rcfile={rc}", "-m", "pytest", "-q",
         "-p", "no:cacheprovider", "-p", "mutation_contexts", "-m", "fast"],
        cwd=work, env=env, stdout=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    from coverage import CoverageData

    data = CoverageData(basename=str(work / ".mutation-coverage"))
    data.read()
    chosen: dict[str, list[str]] = {}
    for filename in sorted(data.measured_files()):
        module = str(Path(filename).resolve().relative_to(work.resolve()))
        lines: dict[str, set[int]] = {}
        for line, contexts in (data.contexts_by_lineno(filename) or {}).items():
            for context in contexts:
                test_file = context.split("::", 1)[0]
                if test_file.startswith("tests/test_"):  # "": at import, by no test
                    lines.setdefault(test_file, set()).add(line)
        chosen[module] = _cover(lines)
    cached.write_text(json.dumps(chosen, indent=1, sort_keys=True))
    return chosen


def _cover(lines: dict[str, set[int]]) -> list[str]:
    """The fewest test files (greedy) whose lines together are all of `lines`'."""
    left = set().union(*lines.values()) if lines else set()
    picked: list[str] = []
    while left:
        best = max(sorted(lines), key=lambda f: len(lines[f] & left))
        picked.append(best)
        left -= lines[best]
    return sorted(picked)


def module_core(module: str, mapped: dict[str, list[str]]) -> Core:
    """A module of the package as a Core: its coverage-chosen and mirrored tests."""
    tests = sorted({*mapped.get(module, []), *mirrored_tests(module)})
    name = module.removeprefix("matrixgen/").removesuffix(".py").replace("/", ".")
    return Core(name, module, tuple(tests))


def copy_checkout(dest: Path) -> None:
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.split(b"\0")
    for raw in files:
        if not raw:
            continue
        rel = raw.decode()
        source, target = REPO / rel, dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            os.symlink(os.readlink(source), target)
        elif source.is_file():
            shutil.copy2(source, target)


def environment(work: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MATRIXGEN_REQUIRE", "PYTEST_")) and k != "MATRIXGEN_TOOLS_DIR"
    }
    env["MATRIXGEN_TOOLS_DIR"] = str(work / ".no-validators")
    env["MATRIXGEN_HYPOTHESIS_PROFILE"] = "ci"
    env["PYTHONPATH"] = str(work)  # the mutated copy, not the installed checkout
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def config_text(core: Core, timeout: float) -> str:
    tests = " ".join(core.tests)
    command = f"{sys.executable} -m pytest -x -q -p no:cacheprovider -m fast {tests}"
    return (
        "[cosmic-ray]\n"
        f'module-path = "{core.module}"\n'
        f"timeout = {timeout}\n"
        "excluded-modules = []\n"
        f'test-command = "{command}"\n\n'
        '[cosmic-ray.distributor]\nname = "local"\n'
    )


def annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Where the type annotations are. The modules import `annotations` from
    __future__, so an annotation is never evaluated and a mutant inside one is
    equivalent to the original: no test can kill it."""
    spans = []
    for node in ast.walk(ast.parse(source)):
        found = []
        if isinstance(node, ast.arg | ast.AnnAssign) and node.annotation is not None:
            found.append(node.annotation)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None:
            found.append(node.returns)
        for ann in found:
            spans.append(((ann.lineno, ann.col_offset), (ann.end_lineno, ann.end_col_offset)))
    return spans


def sample_session(session: Path, source: str, size: int, seed: int) -> tuple[int, int, int]:
    """Leave out the mutants inside annotations, then keep a seeded sample of
    `size` work items (all when size is 0). Returns (mutants, equivalent, kept)."""
    from cosmic_ray.work_db import WorkDB, use_db

    spans = annotation_spans(source)

    def in_annotation(item) -> bool:
        start = tuple(item.mutations[0].start_pos)
        return any(first <= start < last for first, last in spans)

    with use_db(str(session), WorkDB.Mode.open) as db:
        items = list(db.work_items)
        total = len(items)
        # Sorted by position, so the same source and seed give the same sample.
        items = sorted(
            (w for w in items if not in_annotation(w)),
            key=lambda w: (tuple(w.mutations[0].start_pos), w.mutations[0].operator_name),
        )
        equivalent = total - len(items)
        if size and size < len(items):
            items = random.Random(seed).sample(items, size)
        db.clear()
        db.add_work_items(items)
        return total, equivalent, len(items)


@dataclass
class Score:
    core: Core
    total: int
    sampled: int
    killed: int
    survived: int
    incompetent: int
    seconds: float
    survivors: list[str]
    equivalent: int = 0

    @property
    def score(self) -> float:
        ran = self.killed + self.survived
        return self.killed / ran if ran else 0.0


def read_results(core: Core, session: Path, total: int, sampled: int, seconds: float) -> Score:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    killed = survived = incompetent = 0
    survivors = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
            if result.worker_outcome in (WorkerOutcome.ABNORMAL, WorkerOutcome.EXCEPTION):
                incompetent += 1
            elif result.test_outcome is TestOutcome.SURVIVED:
                survived += 1
                spec = item.mutations[0]
                survivors.append(
                    f"{core.module}:{spec.start_pos[0]} {spec.operator_name}\n{result.diff or ''}"
                )
            elif result.test_outcome is TestOutcome.INCOMPETENT:
                killed += 1  # the mutant broke the import: the tests noticed
            else:
                killed += 1
    return Score(core, total, sampled, killed, survived, incompetent, seconds, survivors)


def run_core(core: Core, work: Path, size: int, seed: int, timeout: float) -> Score:
    env = environment(work)
    if not core.tests:
        return Score(core, 0, 0, 0, 0, 0, 0.0, ["no test of the fast tier runs this module"])
    slug = core.name
    config = work / f".mutation-{slug}.toml"
    session = work / f".mutation-{slug}.sqlite"
    config.write_text(config_text(core, timeout))
    started = time.perf_counter()
    # The unmutated tests must pass, or every mutant would look killed.
    baseline = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-x",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "fast",
            *core.tests,
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    if baseline.returncode != 0:
        tail = baseline.stdout[-2000:]
        raise SystemExit(f"{core.name}: the tests fail without a mutant:\n{tail}")
    subprocess.run(["cosmic-ray", "init", str(config), str(session)], cwd=work, env=env, check=True)
    total, equivalent, sampled = sample_session(
        session, (work / core.module).read_text(), size, seed
    )
    subprocess.run(
        ["cosmic-ray", "exec", str(config), str(session)],
        cwd=work,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    score = read_results(core, session, total, sampled, time.perf_counter() - started)
    score.equivalent = equivalent
    return score


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--module", action="append", help="a core name (CORE) or a module path (matrixgen/...)"
    )
    parser.add_argument("--all", action="store_true", help="every module of the package")
    parser.add_argument(
        "--shard", help="K/N: every Nth of the chosen modules from the Kth (a run per core)"
    )
    parser.add_argument("--sample", type=int, default=20, help="mutants per module (0: all)")
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per mutant")
    parser.add_argument("--report", type=Path, help="write every surviving mutant here")
    parser.add_argument("--work", type=Path, help="run in this directory and keep it (and its map)")
    args = parser.parse_args(argv)
    if shutil.which("cosmic-ray") is None:
        print("cosmic-ray is not installed: pip install -e '.[mutation]'", file=sys.stderr)
        return 2
    names = {c.name for c in CORE}
    paths = [m for m in args.module or [] if m not in names]
    unknown = [m for m in paths if m not in package_modules()]
    if unknown:
        parser.error(f"unknown module(s): {', '.join(unknown)} (a CORE name or matrixgen/...py)")
    scores = []
    with tempfile.TemporaryDirectory(prefix="matrixgen-mutation-") as tmp:
        work = args.work.resolve() if args.work else Path(tmp)
        if not (work / "pyproject.toml").exists():
            copy_checkout(work)
        if args.all or paths:
            mapped = test_map(work, environment(work))
            by_module = {c.module: c for c in CORE}
            chosen = [
                by_module.get(m) or module_core(m, mapped)
                for m in (package_modules() if args.all else paths)
            ]
        else:
            chosen = [c for c in CORE if not args.module or c.name in args.module]
        if args.shard:
            k, n = (int(x) for x in args.shard.split("/"))
            chosen = chosen[k - 1 :: n]
        for core in chosen:
            score = run_core(core, work, args.sample, args.seed, args.timeout)
            scores.append(score)
            ran = score.killed + score.survived + score.incompetent
            rate = ran / (score.seconds / 60) if score.seconds else 0.0
            print(
                f"{core.name:24} {score.score:6.1%}  killed {score.killed:3} "
                f"survived {score.survived:3}  (sample {score.sampled} of {score.total}; "
                f"{score.equivalent} in annotations left out, "
                f"{score.incompetent} not run, {score.seconds:.0f} s, "
                f"{rate:.1f} mutants/min, {len(core.tests)} test file(s))",
                flush=True,
            )
    killed = sum(s.killed for s in scores)
    ran = killed + sum(s.survived for s in scores)
    print(f"{'all':24} {killed / ran if ran else 0:6.1%}  killed {killed} of {ran}")
    if args.report:
        args.report.write_text(
            "\n".join(f"== {s.core.name}\n" + "\n".join(s.survivors) for s in scores)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
