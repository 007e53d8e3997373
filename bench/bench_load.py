"""Load + expand a recipe tree, as a ratio against a plain C-loader parse of the same files.

    python bench/bench_load.py [--recipes DIR] [--repeat N]

Both sides read the same bytes from memory (file reading is left out of both),
alternating runs so machine noise hits both alike; the figure is the ratio of
medians: how much more than parsing loading and expanding costs. `validate`
(with its JSON Schema pass) is timed afterwards on its own, so its allocations
do not disturb the other two.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from matrixgen.engine.load import read_directory
from matrixgen.pipeline import generate_from_files
from matrixgen.validate import validate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = Path(__file__).resolve().parents[2] / "shared" / "megatron-recipes"
    parser.add_argument("--recipes", type=Path, default=default)
    parser.add_argument("--repeat", type=int, default=30)
    options = parser.parse_args()
    files = read_directory(options.recipes)
    loader = getattr(yaml, "CSafeLoader", None)
    if loader is None:
        print("PyYAML has no libyaml C loader here; the baseline would be the slow one")
        return 1

    def baseline() -> None:
        for raw in files.values():
            yaml.load(raw, Loader=loader)  # CSafeLoader: the safe loader on libyaml

    def ours() -> None:
        generate_from_files(files, root=str(options.recipes))

    def ours_validated() -> None:
        generation = generate_from_files(files, root=str(options.recipes))
        validate(generation.tree, generation.expansion)

    timings: dict[str, list[float]] = {"parse": [], "load+expand": [], "validate": []}

    def run(name: str, fn: Callable[[], None]) -> None:
        start = time.perf_counter()
        fn()
        timings[name].append(time.perf_counter() - start)

    for _ in range(3):  # warm caches and imports
        baseline(), ours()
    for _ in range(options.repeat):
        run("parse", baseline)
        run("load+expand", ours)
    ours_validated()  # imports jsonschema: only after the figures above are taken
    for _ in range(options.repeat):
        run("validate", ours_validated)
    med = {k: statistics.median(v) for k, v in timings.items()}
    jobs = len(generate_from_files(files).jobs)
    print(f"tree: {options.recipes} ({len(files)} files, {jobs} jobs), {options.repeat} runs each")
    print(f"C-loader parse      {med['parse'] * 1000:8.1f} ms")
    print(
        f"load + expand       {med['load+expand'] * 1000:8.1f} ms   "
        f"ratio {med['load+expand'] / med['parse']:.2f}x"
    )
    print(
        f"load+expand+validate{med['validate'] * 1000:8.1f} ms   "
        f"ratio {med['validate'] / med['parse']:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
