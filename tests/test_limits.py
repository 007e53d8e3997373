"""Bounded cost on hostile input: long values, the job ceiling, nesting depth.

A pull request controls the recipe tree and the quarantine file; none of these
may make a command take gigabytes, minutes, or end in a traceback."""

from __future__ import annotations

import random
import resource
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matrixgen.documents.yamlio import MAX_NESTING_DEPTH, parse_yaml
from matrixgen.engine import expand as expand_module
from matrixgen.model.errors import SUGGEST_MAX_LENGTH, Findings, did_you_mean
from tests.tree_fixtures import v1_tree, v2_tree

ROOT = Path(__file__).resolve().parents[1]


def _noise(n: int, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice("abcdefghij_-") for _ in range(n))


def _long_value_tree(n: int = 40_000) -> dict[str, str]:
    """A 60 KB file: one row's scope and platform are tens of KB of noise (every
    letter deleted or swapped is another distinct string)."""
    return v1_tree(
        f"""
  - test_case: [a]
    products:
      - environment: [dev]
        scope: [mr]
  - test_case: [b]
    products:
      - environment: [dev]
        scope: [{_noise(n, 1)}]
        platforms: [{_noise(n // 2, 2)}]
"""
    )


def _bounded(fn: Callable[[], object]) -> tuple[float, int]:
    """CPU seconds and peak traced bytes of fn()."""
    tracemalloc.start()
    start = time.process_time()
    try:
        fn()
        return time.process_time() - start, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("command", ["validate", "list"])
def test_a_long_value_costs_what_reading_it_costs(
    tree: Callable, cli: Callable, command: str
) -> None:
    root = tree(_long_value_tree())
    assert sum(p.stat().st_size for p in root.rglob("*.yaml")) > 60_000
    seconds, peak = _bounded(lambda: cli(command, "--recipes", root))
    # A quadratic did-you-mean took 7 s and 2.8 GB here.
    assert peak < 40 * 2**20, f"{peak / 2**20:.0f} MB"
    assert seconds < 5, f"{seconds:.1f} s"


def test_a_long_unknown_name_in_a_vocabulary_tree_gets_no_suggestion(
    tree: Callable, cli: Callable
) -> None:
    value = _noise(40_000, 3)
    root = tree(
        v2_tree(
            f"""
  - test_case: [a]
    products:
      - environment: [dev]
        scope: [mr]
        platforms: [{value}]
"""
        )
    )
    seconds, peak = _bounded(lambda: cli("validate", "--recipes", root))
    assert peak < 40 * 2**20 and seconds < 5
    run = cli("validate", "--recipes", root)
    assert run.code == 1
    line = next(x for x in run.err.splitlines() if "unknown platform" in x)
    assert "did you mean" not in line


def test_listing_a_long_value_tree_fits_in_a_small_address_space(tmp_path: Path) -> None:
    """The same in a fresh process held to 1 GB of address space and 60 s of CPU."""
    root = tmp_path / "recipes"
    for rel, text in _long_value_tree().items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30))
        resource.setrlimit(resource.RLIMIT_CPU, (60, 60))

    done = subprocess.run(
        [sys.executable, "-m", "matrixgen", "list", "--recipes", str(root)],
        capture_output=True,
        text=True,
        preexec_fn=limits,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def test_did_you_mean_is_for_short_values_only() -> None:
    assert did_you_mean("dgx_h10", ["dgx_h100"]) == ' (did you mean "dgx_h100"?)'
    assert did_you_mean("d" * (SUGGEST_MAX_LENGTH + 1), ["d" * SUGGEST_MAX_LENGTH]) == ""


def _typos_pairwise(counter: dict[str, int]) -> dict[str, str]:
    """The rule of the typo check, every pair compared, long values left out."""
    from matrixgen.engine.checks import _looks_like_typo

    short = {v: n for v, n in counter.items() if len(v) <= SUGGEST_MAX_LENGTH}
    by_use = sorted(short.items(), key=lambda kv: (-kv[1], kv[0]))
    found = {}
    for value, n in short.items():
        for other, m in by_use:
            if other != value and m >= 3 * n and _looks_like_typo(value, other):
                found[value] = other
                break
    return found


_NAMES = st.text(alphabet="ab_-H1. ", min_size=1, max_size=6)
_LONG = st.text(alphabet="ab_", min_size=SUGGEST_MAX_LENGTH - 1, max_size=SUGGEST_MAX_LENGTH + 2)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_NAMES | _LONG, st.integers(1, 12), max_size=30))
def test_typo_check_is_the_pairwise_rule_on_short_values(counter: dict[str, int]) -> None:
    from matrixgen.engine.checks import typos

    assert typos(counter) == _typos_pairwise(counter)


def test_many_spellings_of_one_name_cost_no_more_than_one() -> None:
    """Values that squash alike (case, punctuation) all look like typos of each
    other; 20,000 of them must not be compared pair by pair."""
    from matrixgen.engine.checks import typos

    rng = random.Random(4)
    counter: dict[str, int] = {}
    while len(counter) < 20_000:
        spelled = "".join(ch.upper() if rng.random() < 0.5 else ch for ch in "dgxhundredplatform")
        spelled = "".join(ch + ("_" if rng.random() < 0.2 else "") for ch in spelled)
        counter[spelled] = 1
    counter["dgx_hundred_platform"] = 100_000
    start = time.process_time()
    found = typos(counter)
    assert time.process_time() - start < 10
    assert set(found.values()) == {"dgx_hundred_platform"}
    assert len(found) == len(counter) - 1


# --------------------------------------------------------------------------- job ceiling


def test_the_config_cannot_lift_the_job_cap_past_the_ceiling(tree: Callable, cli: Callable):
    files = v2_tree(
        """
  - test_case: [a]
    products:
      - environment: [dev]
        scope: [mr]
"""
    )
    files["matrixgen.yaml"] = files["matrixgen.yaml"].replace(
        "  n_repeat: 5\n", "  n_repeat: 5\n  max_jobs: 100000000\n"
    )
    run = cli("validate", "--recipes", tree(files))
    assert run.code == 3, run
    assert "max_jobs" in run.err and "500000" in run.err
    assert "Traceback" not in run.err


def test_the_ceiling_holds_even_for_a_config_that_skipped_the_schema(
    tree: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cap expansion applies is min(defaults.max_jobs, the ceiling)."""
    from msgspec.structs import replace

    from matrixgen.engine.expand import expand_tree
    from matrixgen.engine.load import load_tree, read_directory

    monkeypatch.setattr(expand_module, "MAX_JOBS_CEILING", 10)
    rows = "\n".join(
        f"  - test_case: [c{i}]\n    products:\n      - environment: [dev]\n        scope: [mr]"
        for i in range(12)
    )
    root = tree(v2_tree(rows))
    loaded = load_tree(read_directory(root), root=str(root))
    lifted = replace(loaded, config=replace(loaded.config, max_jobs=10**9))
    expansion = expand_tree(lifted)
    caps = [f for f in expansion.findings if f.code == "expansion-cap"]
    assert caps and "cap of 10 jobs" in caps[0].message
    assert len(expansion.jobs) <= 10


# --------------------------------------------------------------------------- nesting


def _nested(depth: int, *, flow: bool, leaf: str = "1") -> str:
    """A YAML value of `depth` levels of lists (flow) or mappings (block)."""
    if flow:
        return "[" * depth + leaf + "]" * depth
    return "".join(f"\n{'  ' * (i + 2)}k{i}:" for i in range(depth)) + f" {leaf}"


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 2 * MAX_NESTING_DEPTH), st.booleans())
def test_documents_are_read_up_to_the_nesting_limit(extra: int, flow: bool) -> None:
    """Root mapping, then `extra` levels: read iff within the limit; refused
    with the line of the first level past it otherwise."""
    text = "spec:\n  x: " + _nested(extra, flow=flow) + "\n"
    findings = Findings()
    document = parse_yaml(text.encode(), "deep.yaml", findings)
    depth = 2 + extra  # the root mapping, spec's mapping, then the levels
    if depth <= MAX_NESTING_DEPTH:
        assert document is not None and not findings.items
    else:
        assert document is None
        (finding,) = findings.items
        assert finding.code == "yaml-too-deep"
        lines = text.splitlines()
        line, column = finding.location.line, finding.location.column
        assert 1 <= line <= len(lines) and column >= 1
        if not flow:  # the mapping past the limit starts at its first key
            assert lines[line - 1].strip().startswith(f"k{MAX_NESTING_DEPTH - 2}:")


def _deep_shipped_tree(tmp_path: Path, recipe_extra: int, quarantine_extra: int) -> Path:
    import shutil

    root = tmp_path / "recipes"
    shutil.copytree(ROOT / "recipes", root)
    gpt = root / "h100" / "gpt.yaml"
    text = gpt.read_text()
    gpt.write_text(
        text.replace("spec:\n", f"spec:\n  x-deep: {_nested(recipe_extra, flow=True)}\n", 1)
    )
    quarantine = root / "quarantine.yaml"
    text = quarantine.read_text()
    assert "      model: unit-tests\n" in text
    quarantine.write_text(
        text.replace(
            "      model: unit-tests\n",
            f"      model: {_nested(quarantine_extra, flow=True)}\n",
            1,
        )
    )
    return root


@pytest.mark.parametrize(
    "command", [["validate"], ["list"], ["generate", "--out", "{out}"], ["quarantine", "list"]]
)
def test_a_deeply_nested_recipe_or_quarantine_entry_is_a_located_error(
    tmp_path: Path, cli: Callable, pinned_today: object, command: list[str]
) -> None:
    root = _deep_shipped_tree(tmp_path, 900, 900)
    args = [a.replace("{out}", str(tmp_path / "out")) for a in command]
    run = cli(*args, "--recipes", root)
    assert run.code == (7 if command[0] == "quarantine" else 1), run  # the documented codes
    assert "Traceback" not in run.err and "RecursionError" not in run.err
    assert "quarantine.yaml:13:" in run.err and "[yaml-too-deep]" in run.err
    if command[0] != "quarantine":
        assert "gpt.yaml:" in run.err


@pytest.mark.parametrize(
    "command", [["validate"], ["list", "--format", "json"], ["graph"], ["quarantine", "audit"]]
)
def test_nesting_at_the_limit_is_read_by_every_stage(
    tmp_path: Path, cli: Callable, pinned_today: object, command: list[str]
) -> None:
    """At the limit, no later stage (schema checks, quarantine, JSON) recurses too deep."""
    root = _deep_shipped_tree(tmp_path, MAX_NESTING_DEPTH - 2, MAX_NESTING_DEPTH - 4)
    run = cli(*command, "--recipes", root)
    assert "Traceback" not in run.err and "RecursionError" not in run.err
    assert "[yaml-too-deep]" not in run.err
    assert run.code in (0, 1), run  # the quarantine's model must be a name: a finding
