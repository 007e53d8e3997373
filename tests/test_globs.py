"""Repository-path globs (`engine.globs`): what they match, agreed with a slow
reference matcher, in time linear in the path whatever the glob, and bounded by
validate."""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from matrixgen.engine import globs
from matrixgen.engine.globs import (
    MAX_GLOB_LENGTH,
    MAX_GLOB_WILDCARDS,
    glob_problem,
    matches,
    tokens,
    wildcards,
)
from tests.tree_fixtures import findings_of, v2_tree


def reference(glob: str, path: str) -> bool:
    """The rule as written, matched by trying every split (small inputs only):
    `**/` nothing or anything ending in `/`, `**` anything, `*` a run without `/`,
    `?` one character but `/`, the rest literal; a glob ending in `/` is the
    glob with `**` after it."""
    if glob.endswith("/"):
        glob += "**"

    @cache
    def at(i: int, j: int) -> bool:
        if i == len(glob):
            return j == len(path)
        if glob.startswith("**/", i):
            ends = [j] + [k for k in range(j + 1, len(path) + 1) if path[k - 1] == "/"]
            return any(at(i + 3, k) for k in ends)
        if glob.startswith("**", i):
            return any(at(i + 2, k) for k in range(j, len(path) + 1))
        if glob[i] == "*":
            k = j
            while True:
                if at(i + 1, k):
                    return True
                if k == len(path) or path[k] == "/":
                    return False
                k += 1
        if j == len(path):
            return False
        if glob[i] == "?":
            return path[j] != "/" and at(i + 1, j + 1)
        return path[j] == glob[i] and at(i + 1, j + 1)

    return at(0, 0)


def backtracking(glob: str, path: str) -> bool:
    """The regular expression globs were once translated to (for the figures)."""
    if glob.endswith("/"):
        glob += "**"
    out, i = [], 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        else:
            out.append({"*": "[^/]*", "?": "[^/]"}.get(glob[i], re.escape(glob[i])))
            i += 1
    return re.compile("".join(out) + r"\Z").match(path) is not None


# Globs from the pieces that make matching hard, and paths from the same letters.
PIECES = ["**", "*", "?", "/", "[a-]", "a", "b", "**/", "."]
globs_st = st.lists(st.sampled_from(PIECES), min_size=1, max_size=10).map("".join)
paths_st = st.text(alphabet="ab/[-].", max_size=14)
_NAME = st.text(alphabet="ab[-].", max_size=3)  # within one folder: no `/`


@st.composite
def glob_and_path(draw: st.DrawFn) -> tuple[str, str]:
    """A glob and a path that it matches, a near miss of one (a character
    changed, added or taken away), or any path: random paths alone meet a
    random glob's match one time in ten."""
    pieces = draw(st.lists(st.sampled_from(PIECES), min_size=1, max_size=10))
    glob = "".join(pieces)
    kind = draw(st.sampled_from(["match", "near", "any"]))
    if kind == "any":
        return glob, draw(paths_st)
    made = []
    for piece in pieces:
        if piece == "**":
            made.append(draw(st.text(alphabet="ab/.", max_size=4)))
        elif piece == "*":
            made.append(draw(_NAME))
        elif piece == "?":
            made.append(draw(st.sampled_from("ab[-].")))
        elif piece == "**/":
            made.append("".join(f"{f}/" for f in draw(st.lists(_NAME, max_size=2))))
        else:
            made.append(piece)
    path = "".join(made)
    if glob.endswith("/"):
        path += draw(st.text(alphabet="ab/.", min_size=1, max_size=3))
    if kind == "near":
        at = draw(st.integers(0, len(path)))
        change = draw(st.sampled_from(["add", "drop", "swap"]))
        letter = draw(st.sampled_from("ab/[-]."))
        if change == "add":
            path = path[:at] + letter + path[at:]
        elif path:
            at = min(at, len(path) - 1)
            path = path[:at] + (letter if change == "swap" else "") + path[at + 1 :]
    return glob, path


def test_the_strategy_draws_matches_and_misses() -> None:
    from hypothesis import HealthCheck, Phase

    seen: list[bool] = []

    @settings(max_examples=200, derandomize=True, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(glob_and_path())
    def draw(pair: tuple[str, str]) -> None:
        seen.append(matches(*pair))

    draw()
    assert 0.3 < sum(seen) / len(seen) < 0.8


@example(("**/**/", "a/b/"))
@example(("*/", "a/b/c"))
@example(("*b**/b", "abb"))  # `**/` matching nothing right after a `*`
@example(("a**b", "a/x/b"))
@example(("**/*", ""))
@example(("**/*.a", "b/.a"))
@example(("[a-]", "[a-]"))
@example(("*?*", "a"))
@given(glob_and_path())
def test_globs_match_what_the_rule_says(pair: tuple[str, str]) -> None:
    glob, path = pair
    assert matches(glob, path) is reference(glob, path)
    assert matches(glob, path) is backtracking(glob, path)


@given(glob_and_path())
def test_forgetting_states_changes_nothing(pair: tuple[str, str]) -> None:
    glob, path = pair
    # The automaton forgets its states past MAX_STATES: with room for two it
    # rebuilds almost every step, and must match the same.
    small = globs.Glob(glob)
    saved = globs.MAX_STATES
    globs.MAX_STATES = 2
    try:
        assert small.matches(path) is reference(glob, path)
        assert small.matches(path) is reference(glob, path)  # from the tables left
    finally:
        globs.MAX_STATES = saved


# A match costs microseconds; this is far beyond any linear run on these paths
# and far below what backtracking takes (seconds to hours).
CPU_BOUND = 0.25  # seconds of CPU for one match

DEEP_PATH = "/".join(["a"] * 40) + "/y"
# Wildcards mostly, and literals that the deep paths' folders hold, so that a
# match goes deep before it fails: what makes a backtracking matcher slow (one
# generated glob in seven takes it past the bound).
DEEP_PIECES = ["**/", "*", "*/", "a/", "?", "**", "a*", "[a-]/", "*a"]


def deep_paths() -> st.SearchStrategy[str]:
    folder = st.sampled_from(["a", "b", "ab", "a-", "[a-]", "aaaaaaaa"])
    return st.builds(
        lambda parts, name: "/".join([*parts, name]),
        st.lists(folder, min_size=40, max_size=300),
        st.sampled_from(["y", "a", "ab.b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaay"]),
    )


@example("**/" * 8 + "x", DEEP_PATH)  # C(48, 8): 15 s as a regular expression
@example("**/" * 10 + "x", DEEP_PATH)
@example("**/a/" * 8 + "**/x", DEEP_PATH)  # separated by literals: no merging helps
@example("*a" * 12 + "*b", "a" * 5000)  # within one name
@example("*?" * 12 + "*/x", "a" * 5000 + "/y")
@given(st.lists(st.sampled_from(DEEP_PIECES), min_size=4, max_size=30).map("".join), deep_paths())
@settings(max_examples=100, deadline=None)
def test_a_match_costs_time_linear_in_the_path_whatever_the_glob(glob: str, path: str) -> None:
    compiled = globs.Glob(glob)  # fresh: the first match builds the states
    with cpu_bound(CPU_BOUND * 4):  # a backtracking match is stopped, not waited for
        start = time.process_time()
        compiled.matches(path)
        compiled.matches(path + "/" + path)  # twice as deep
        spent = time.process_time() - start
    assert spent < CPU_BOUND, (glob, len(path), spent)


@contextmanager
def cpu_bound(seconds: float) -> Iterator[None]:
    """Stop the block with an error once the process has spent `seconds` of CPU
    (the regular expression engine looks at signals while it backtracks)."""

    def stop(signum: int, frame: object) -> None:
        raise AssertionError(f"over {seconds} s of CPU")

    previous = signal.signal(signal.SIGPROF, stop)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def test_runs_of_wildcards_become_one() -> None:
    assert tokens("**/" * 8 + "x") == tokens("**/x")
    assert tokens("a/**/**") == tokens("a/**") == tokens("a/")
    assert tokens("***") == tokens("**") == tokens("**/*") == tokens("**/**/*")
    assert len(tokens("*?*")) == 3  # `?` is one character: nothing to merge


@pytest.mark.parametrize(
    ("glob", "count"),
    [("a/b.py", 0), ("a/**", 1), ("**/*.md", 2), ("**/**/**", 3), ("?*?", 3), ("a/", 0)],
)
def test_wildcards_are_counted_as_written(glob: str, count: int) -> None:
    assert wildcards(glob) == count


def test_the_limits_name_what_is_wrong() -> None:
    assert glob_problem("megatron/core/**") is None
    assert glob_problem("x" * MAX_GLOB_LENGTH) is None
    long = glob_problem("x" * (MAX_GLOB_LENGTH + 1))
    assert long is not None and f"at most {MAX_GLOB_LENGTH}" in long
    assert glob_problem("*/" * MAX_GLOB_WILDCARDS) is None
    many = glob_problem("*/" * (MAX_GLOB_WILDCARDS + 1))
    assert many is not None and f"{MAX_GLOB_WILDCARDS + 1} wildcards" in many


def test_validate_refuses_a_glob_past_the_limits_where_it_is_written(
    tree: Callable[..., Path], cli: Callable
) -> None:
    many = "**/" * (MAX_GLOB_WILDCARDS + 1) + "x"
    long = "y" * (MAX_GLOB_LENGTH + 1)
    row = '      - {environment: [dev], scope: [mr], paths: ["ok/**", "' + many + '"]}'
    files = v2_tree(f"  - test_case: [tc]\n    products:\n{row}\n", f'  paths: ["{long}"]')
    files["matrixgen.yaml"] += f'changes:\n  ignore: ["docs/**", "{many}"]\n'
    root = tree(files)
    run = cli("validate", "--recipes", root)
    assert run.code == 1, run
    found = [m for m in findings_of(run.err) if "[path-glob]" in m.string]
    where = sorted((Path(m["file"]).name, int(m["line"]), int(m["col"])) for m in found)
    config = (root / "matrixgen.yaml").read_text().splitlines()
    recipe = (root / "gpt.yaml").read_text().splitlines()
    spec_line = next(i for i, line in enumerate(recipe, 1) if "  paths:" in line)
    row_line = next(i for i, line in enumerate(recipe, 1) if "ok/**" in line)
    ignore_line = len(config)
    assert where == [
        ("gpt.yaml", spec_line, recipe[spec_line - 1].index('"y') + 1),
        ("gpt.yaml", row_line, recipe[row_line - 1].index('"**/') + 1),
        ("matrixgen.yaml", ignore_line, config[-1].index('"**/') + 1),
    ]
    assert any("wildcards (*, **, ?); a glob has at most" in m.string for m in found)
    assert any("characters long; a glob has at most" in m.string for m in found)
    # The emitters refuse the tree too.
    assert cli("generate", "--recipes", root, "--out", root.parent / "out").code == 1
