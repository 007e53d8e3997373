"""Mutation testing of the core modules with cosmic-ray (not run in CI: too slow).

    pip install -e '.[mutation]'
    python bench/mutation.py                      # every core module, 20 mutants each
    python bench/mutation.py --sample 0           # every mutant (hours on 2 cores)
    python bench/mutation.py --module select --module diff --report survivors.txt

cosmic-ray writes each mutant into the source file and runs the test command, so
the run happens in a copy of the checkout's tracked files in a temporary
directory; the checkout itself is never touched. Per module, the mutants are a
seeded sample (the same sample for the same source and seed), and each runs the
test files of that module only, with the derandomised Hypothesis profile, and
without the real validators (their tests skip: they check emitted files, which
the emitter tests already cover). The Megatron-LM tree is used when
MATRIXGEN_MEGATRON_RECIPES points at it.

Mutants inside type annotations are left out before sampling: the modules
import `annotations` from __future__, so annotations are never evaluated and
such a mutant is equivalent to the original.

The score of a module is killed / (killed + survived) over the sampled mutants
that ran; mutants that make the module fail to import count as killed (the
tests noticed), timeouts too. Each surviving mutant is listed with its diff, in
--report when given.
"""

from __future__ import annotations

import argparse
import ast
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
    Core("emit-github", "matrixgen/emit/github.py", ("tests/test_emit_github.py",)),
    Core("emit-gitlab", "matrixgen/emit/gitlab.py", ("tests/test_emit_gitlab.py",)),
)


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
    command = f"{sys.executable} -m pytest -x -q -p no:cacheprovider {tests}"
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
    slug = core.name
    config = work / f".mutation-{slug}.toml"
    session = work / f".mutation-{slug}.sqlite"
    config.write_text(config_text(core, timeout))
    started = time.perf_counter()
    # The unmutated tests must pass, or every mutant would look killed.
    baseline = subprocess.run(
        [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *core.tests],
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
    parser.add_argument("--module", action="append", choices=[c.name for c in CORE])
    parser.add_argument("--sample", type=int, default=20, help="mutants per module (0: all)")
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per mutant")
    parser.add_argument("--report", type=Path, help="write every surviving mutant here")
    parser.add_argument("--work", type=Path, help="run in this (new) directory and keep it")
    args = parser.parse_args(argv)
    if shutil.which("cosmic-ray") is None:
        print("cosmic-ray is not installed: pip install -e '.[mutation]'", file=sys.stderr)
        return 2
    chosen = [c for c in CORE if not args.module or c.name in args.module]
    scores = []
    with tempfile.TemporaryDirectory(prefix="matrixgen-mutation-") as tmp:
        work = args.work.resolve() if args.work else Path(tmp)
        copy_checkout(work)
        for core in chosen:
            score = run_core(core, work, args.sample, args.seed, args.timeout)
            scores.append(score)
            print(
                f"{core.name:16} {score.score:6.1%}  killed {score.killed:3} "
                f"survived {score.survived:3}  (sample {score.sampled} of {score.total}; "
                f"{score.equivalent} in annotations left out, "
                f"{score.incompetent} not run, {score.seconds:.0f} s)",
                flush=True,
            )
    killed = sum(s.killed for s in scores)
    ran = killed + sum(s.survived for s in scores)
    print(f"{'all':16} {killed / ran if ran else 0:6.1%}  killed {killed} of {ran}")
    if args.report:
        args.report.write_text(
            "\n".join(f"== {s.core.name}\n" + "\n".join(s.survivors) for s in scores)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
