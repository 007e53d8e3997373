"""`generate` over every target of a recipe tree, as ratios against one C-loader
parse of the tree and against the naive way (reload the tree once per target).

    python bench/bench_generate.py [--megatron DIR] [--repeat N]

The targets are the ones a tree without config implies: every scope x platform
x environment its jobs use, GitHub tiers included. Every side reads the same
bytes from memory (file reading and writing are left out), runs alternate so
machine noise hits all alike, and figures are ratios of medians.

- parse:    yaml.load with the libyaml CSafeLoader, once per file;
- load:     load + expand + the checks generating commands run (to tell emitting
            from loading);
- generate: load + expand + validate once, then emit every target (what
            `matrixgen generate` does);
- naive:    for each target, load + expand + validate + emit that target (what
            running `matrixgen gitlab`/`github` once per target does).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import yaml

from matrixgen.emit.generate import emit_target, generate_all
from matrixgen.engine.load import read_directory
from matrixgen.engine.targets import discover_targets
from matrixgen.pipeline import Generation, generate_from_files
from matrixgen.validate import Needs, require_usable


def default_tree() -> Path:
    env = os.environ.get("MATRIXGEN_MEGATRON_RECIPES")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "shared" / "megatron-recipes"


def load(files: Mapping[str, bytes], root: str) -> Generation:
    """What every generating command does first: load, expand, check (as the CLI)."""
    generation = generate_from_files(files, root=root)
    require_usable(generation, Needs.VALID)
    return generation


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megatron", type=Path, default=default_tree(), help="recipe tree")
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    if not options.megatron.is_dir():
        print(f"no recipe tree at {options.megatron} (give --megatron DIR)", file=sys.stderr)
        return 2
    loader = getattr(yaml, "CSafeLoader", None)
    if loader is None:
        print("PyYAML has no libyaml C loader here; the baseline would be the slow one")
        return 1
    root = str(options.megatron)
    files = read_directory(options.megatron)
    first = load(files, root)
    targets = discover_targets(first.jobs)

    def parse() -> None:
        for raw in files.values():
            yaml.load(raw, Loader=loader)  # CSafeLoader: the safe loader

    def generate() -> None:
        generate_all(load(files, root), targets)

    def naive() -> None:
        for target in targets:
            emit_target(load(files, root), target)

    def load_only() -> None:
        load(files, root)

    sides: dict[str, Callable[[], None]] = {
        "parse": parse,
        "load": load_only,
        "generate": generate,
        "naive": naive,
    }
    timings: dict[str, list[float]] = {name: [] for name in sides}
    for fn in sides.values():  # warm caches and imports
        fn()
    for _ in range(options.repeat):
        for name, fn in sides.items():
            start = time.perf_counter()
            fn()
            timings[name].append(time.perf_counter() - start)
    med = {k: statistics.median(v) for k, v in timings.items()}
    jobs = sum(o.jobs for o in generate_all(first, targets))
    systems = sorted({t.system.value for t in targets})
    print(
        f"tree: {options.megatron} ({len(files)} files, {len(first.jobs)} jobs); "
        f"{len(targets)} targets ({', '.join(systems)}) holding {jobs} jobs; "
        f"{options.repeat} runs each"
    )
    print(f"C-loader parse           {med['parse'] * 1000:8.1f} ms")
    print(
        f"generate, all targets    {med['generate'] * 1000:8.1f} ms   "
        f"{med['generate'] / med['parse']:.2f}x the C-loader parse"
    )
    emit = med["generate"] - med["load"]
    print(
        f"  of which load+expand+validate {med['load'] * 1000:.1f} ms, "
        f"emitting {len(targets)} files {emit * 1000:.1f} ms"
    )
    print(
        f"naive, reload per target {med['naive'] * 1000:8.1f} ms   "
        f"generate takes {med['generate'] / med['naive']:.3f}x of it "
        f"({med['naive'] / med['generate']:.1f}x faster)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
