"""`matrixgen jet-trigger` against Megatron-LM's own generator, whole processes.

    python bench/bench_jet.py [--ci DIR] [--megatron DIR] [--repeat N]

Both sides run as a Megatron-LM checkout runs them, on the same tree and the
same arguments (the functional-test call of `04.functional-tests.yml` for
mr / dgx_h100 / dev, error extraction on, warm-up off): the generator as
`python tests/test_utils/python_scripts/generate_jet_trigger_job.py` in a
temporary checkout (its files copied there from DIR, default
../shared/megatron-ci, with the tree at tests/test_utils/recipes; unchanged,
as CI runs it), and the installed `matrixgen jet-trigger`. Runs alternate;
figures are medians of N runs of CPU time (user + system) and wall time. The
goal: jet-trigger at most a third of the generator's CPU time.

Run it from an environment with matrixgen installed as CI images have it
(`pip install .` and `click`): an editable install (`pip install -e .`) adds a
path finder to every interpreter's start-up, about 30 ms that both sides pay.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_process
from bench_process import Timing, run_once

ARGS = [
    "--scope", "mr",
    "--environment", "dev",
    "--n-repeat", "5",
    "--time-limit", "2700",
    "--test-cases", "all",
    "--platform", "dgx_h100",
    "--cluster", "dgxh100_eos",
    "--container-image", "registry.example/mcore_utility",
    "--container-tag", "41872",
    "--dependent-job", "functional:configure",
    "--record-checkpoints", "false",
    "--slurm-account", "acct",
    "--no-enable-warmup",
    "--enable-error-extraction",
]  # fmt: skip
GOAL = 1 / 3


def main() -> int:
    shared = Path(__file__).resolve().parents[2] / "shared"
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ci", type=Path, default=shared / "megatron-ci")
    parser.add_argument("--megatron", type=Path, default=shared / "megatron-recipes")
    parser.add_argument("--repeat", type=int, default=7)
    options = parser.parse_args()
    matrixgen = shutil.which("matrixgen")
    if matrixgen is None:
        raise SystemExit("matrixgen is not installed in this environment (pip install -e .)")
    with tempfile.TemporaryDirectory(prefix="bench-jet-") as temp:
        top = Path(temp)
        scripts = top / "tests" / "test_utils" / "python_scripts"
        scripts.mkdir(parents=True)
        for name in ("recipe_parser.py", "generate_jet_trigger_job.py"):
            shutil.copyfile(
                options.ci / "tests" / "test_utils" / "python_scripts" / name, scripts / name
            )
        shutil.copytree(options.megatron, top / "tests" / "test_utils" / "recipes")
        sides = {
            "generate_jet_trigger_job.py": [
                sys.executable,
                "tests/test_utils/python_scripts/generate_jet_trigger_job.py",
                *ARGS,
                "--output-path",
                str(top / "upstream.yaml"),
            ],
            "matrixgen jet-trigger": [
                matrixgen,
                "jet-trigger",
                "--recipes",
                "tests/test_utils/recipes",
                *ARGS,
                "--output-path",
                str(top / "matrixgen.yaml"),
            ],
        }
        env_note = "PYTHONPATH=checkout (as its CI exports it)"
        bench_process.ENV["PYTHONPATH"] = str(top)
        timings = {name: Timing([], []) for name in sides}
        for argv in sides.values():  # warm: .pyc files and the page cache
            run_once(argv, top)
        for _ in range(options.repeat):
            for name, argv in sides.items():
                cpu, wall = run_once(argv, top)
                timings[name].cpu.append(cpu)
                timings[name].wall.append(wall)
    print(f"{options.repeat} alternating runs each, medians; {env_note}")
    for name, timing in timings.items():
        print(f"  {name:30} CPU {timing.median():6.3f} s   wall {timing.median(False):6.3f} s")
    ours = timings["matrixgen jet-trigger"].median()
    theirs = timings["generate_jet_trigger_job.py"].median()
    ratio = ours / theirs
    verdict = "met" if ratio <= GOAL else "MISSED"
    print(f"  ratio (CPU) {ratio:.2f}; goal <= {GOAL:.2f}: {verdict}")
    return 0 if ratio <= GOAL else 1


if __name__ == "__main__":
    raise SystemExit(main())
