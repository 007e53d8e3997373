"""Selection diff in a big tree where one file changed, as a ratio against one load.

    python bench/bench_diff.py [--files N] [--repeat N]

The script writes a synthetic format_version 2 tree of N recipe files (with a
project config and configured targets) into a temporary git repository,
commits it, edits one file in the working tree, then times:

- one load: read the working tree from disk, parse and expand it (`generate`);
- the diff: `matrixgen diff HEAD` as the command runs it (git reads the base
  with `ls-tree` and one `cat-file --batch`, both sides load and get validate's
  checks, every target is compared), the head reusing what the base parsed and
  expanded by blob id;
- the same diff without that reuse (both trees loaded in full), for reference.

Each run starts from an empty cache; runs alternate so machine noise hits all
alike; figures are medians. The ratio says what a diff costs next to one load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import yaml

from matrixgen.diff.compare import diff_generations
from matrixgen.diff.gitsource import Repository
from matrixgen.diff.revisions import diff_revisions
from matrixgen.pipeline import PipelineCache, generate, generate_from_files

PLATFORMS = ["dgx_h100", "dgx_gb200"]
ENVIRONMENTS = ["dev", "lts"]
SCOPES = {"github": ["L0", "L1"], "gitlab": ["mr", "mr-slim", "nightly"]}
GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@matrixgen.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@matrixgen.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


def config() -> dict:
    targets = {}
    for system, scopes in SCOPES.items():
        for scope in scopes:
            for platform in PLATFORMS:
                for env in ENVIRONMENTS:
                    targets[f"{system}-{scope}-{platform}-{env}"] = {
                        "system": system,
                        "scope": scope,
                        "platform": platform,
                        "environment": env,
                    }
    return {
        "format_version": 2,
        "vocabulary": {
            "platforms": PLATFORMS,
            "environments": ENVIRONMENTS,
            "scopes": SCOPES,
        },
        "targets": targets,
    }


def recipe(index: int, *, edited: bool = False) -> dict:
    """One file: 4 test cases, each a row over scopes x environments (x platforms)."""
    blocks = []
    for case in range(4):
        row = {
            "environment": ENVIRONMENTS,
            "scope": ["mr", "nightly", "L1"] if case % 2 else ["mr", "mr-slim", "L0"],
        }
        if case == 3:
            row["platforms"] = PLATFORMS
        if edited and case == 0:
            row["time_limit"] = [5400]
        blocks.append({"test_case": [f"case_{index:05d}_{case}"], "products": [row]})
    return {
        "type": "basic",
        "format_version": 2,
        "spec": {
            "name": "{test_case}_{environment}_{platforms}",
            "model": f"model{index % 10}",
            "build": "mcore-pyt-{environment}",
            "nodes": 1,
            "gpus": 8,
            "platforms": "dgx_h100",
            "env": {"NVTE_FLASH_ATTN_V4": "0"},
            "args": ["--flash-attention-version", "2"],
            "script": "bash run.sh {test_case} {environment} {platforms}",
        },
        "products": blocks,
    }


def write_tree(root: Path, files: int) -> None:
    dump = yaml.safe_dump
    (root / "matrixgen.yaml").write_text(dump(config(), sort_keys=False))
    for env in ENVIRONMENTS:
        build = {"type": "build", "format_version": 2, "spec": {"name": f"mcore-pyt-{env}"}}
        (root / f"_build-{env}.yaml").write_text(dump(build, sort_keys=False))
    for i in range(files):
        path = root / f"group{i % 50:02d}" / f"recipe{i:05d}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dump(recipe(i), sort_keys=False))


def git(top: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=top, check=True, env={**os.environ, **GIT_ENV})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="matrixgen-bench-diff-") as tmp:
        top = Path(tmp)
        recipes = top / "recipes"
        recipes.mkdir()
        write_tree(recipes, options.files)
        git(top, "init", "-q", "-b", "main")
        git(top, "add", "-A")
        git(top, "commit", "-q", "-m", "synthetic tree")
        changed = recipes / "group07" / "recipe00007.yaml"
        changed.write_text(yaml.safe_dump(recipe(7, edited=True), sort_keys=False))
        repo = Repository(top)

        def one_load() -> None:
            generate(recipes)

        def diff() -> None:
            diff_revisions(repo, "recipes", "HEAD", cache=PipelineCache())

        def diff_without_reuse() -> None:
            base = repo.read("HEAD", "recipes")
            head = repo.read(None, "recipes")
            diff_generations(
                generate_from_files(base.files, root="recipes"),
                generate_from_files(head.files, root="recipes"),
            )

        result, sides = diff_revisions(repo, "recipes", "HEAD")
        runs = {"one load": one_load, "diff": diff, "diff, no reuse": diff_without_reuse}
        timings: dict[str, list[float]] = {name: [] for name in runs}
        one_load(), diff()  # warm imports and the OS file cache
        for _ in range(options.repeat):
            for name, fn in runs.items():
                start = time.perf_counter()
                fn()
                timings[name].append(time.perf_counter() - start)
    med = {name: statistics.median(values) for name, values in timings.items()}
    jobs = len(sides[1].generation.jobs)
    changed_jobs = sum(len(t.changed) for t in result.targets)
    print(
        f"tree: {options.files} recipe files, {jobs} jobs, {len(result.targets)} targets; "
        f"1 file edited -> {changed_jobs} changed job(s) over the targets; "
        f"{options.repeat} runs each (medians)"
    )
    for name in runs:
        ratio = med[name] / med["one load"]
        print(f"{name:<16} {med[name] * 1000:8.1f} ms   ratio to one load {ratio:5.2f}")
    print(f"diff / one load: {med['diff'] / med['one load']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
