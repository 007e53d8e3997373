"""Expansion rules (docs/megatron-format.md), each on a small tree written here, and the
properties expansion keeps on any tree (no job lost or duplicated, order-free)."""

from __future__ import annotations

import itertools
import json
import math
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from matrixgen.documents.config import ProjectConfig
from matrixgen.documents.recipe import RecipeFile
from matrixgen.model.errors import Severity
from matrixgen.pipeline import Generation, generate, generate_from_files
from matrixgen.util.values import json_value
from tests.tree_fixtures import v1_tree, v2_tree


def jobs_of(tree: Callable, files: dict[str, str]):
    generation = generate(tree(files))
    return generation.jobs, generation.findings


def test_cartesian_product_of_every_key_but_cadence(tree: Callable[..., Path]) -> None:
    jobs, findings = jobs_of(
        tree,
        v1_tree("""
  - test_case: [tc]
    products:
      - environment: [dev, lts]
        scope: [mr, nightly]
        platforms: [dgx_h100, dgx_gb200]
        cadence: [pr]
"""),
    )
    assert not findings
    assert len(jobs) == 8
    combos = {(j.environment, j.scope, j.platform) for j in jobs}
    assert len(combos) == 8
    assert all(j.cadence == ("pr",) for j in jobs)


def test_row_values_override_spec_and_spec_is_the_default(tree: Callable[..., Path]) -> None:
    jobs, _ = jobs_of(
        tree,
        v1_tree("""
  - test_case: [with_platform]
    products:
      - environment: [dev]
        scope: [mr]
        platforms: [dgx_h100]
        n_repeat: [1]
  - test_case: [default_platform]
    products:
      - environment: [dev]
        scope: [mr]
"""),
    )
    by_case = {j.test_case: j for j in jobs}
    assert by_case["with_platform"].platform == "dgx_h100"
    assert by_case["with_platform"].n_repeat == 1
    assert by_case["default_platform"].platform == "dgx_a100"
    assert by_case["default_platform"].n_repeat == 5
    assert by_case["with_platform"].name == "with_platform_dev_dgx_h100"
    assert by_case["default_platform"].build == "mcore-pyt-dev"


def test_cadence_resolution_and_scope_aliases(tree: Callable[..., Path]) -> None:
    jobs, findings = jobs_of(
        tree,
        v1_tree("""
  - test_case: [default]
    products:
      - {environment: [dev], scope: [mr]}
  - test_case: [alias_nightly]
    products:
      - {environment: [dev], scope: [nightly]}
  - test_case: [alias_weekly]
    products:
      - {environment: [dev], scope: [weekly]}
  - test_case: [block_cadence]
    cadence: [weekly]
    products:
      - {environment: [dev], scope: [nightly]}
  - test_case: [row_beats_block]
    cadence: [weekly]
    products:
      - {environment: [dev], scope: [nightly], cadence: [pr]}
  - test_case: [mixed_scopes]
    products:
      - {environment: [dev], scope: [mr, nightly, mr-github, mr-github-slim, mr-broken]}
"""),
    )
    assert not findings
    got = {(j.test_case, j.scope): j.cadence for j in jobs}
    default = ("pr", "nightly", "mergegroup")
    assert got[("default", "mr")] == default
    assert got[("alias_nightly", "L2")] == ("nightly",)
    assert got[("alias_weekly", "L3")] == ("weekly",)
    # An explicit cadence always wins over the alias's.
    assert got[("block_cadence", "L2")] == ("weekly",)
    assert got[("row_beats_block", "L2")] == ("pr",)
    # Aliases apply per expanded row; other scopes pass through verbatim.
    assert got[("mixed_scopes", "mr")] == default
    assert got[("mixed_scopes", "L2")] == ("nightly",)
    assert got[("mixed_scopes", "L1")] == default
    assert got[("mixed_scopes", "L0")] == default
    assert got[("mixed_scopes", "mr-broken")] == default


def test_only_first_test_case_is_read_and_extra_is_reported(tree: Callable[..., Path]) -> None:
    jobs, findings = jobs_of(
        tree,
        v1_tree("""
  - test_case: [first, second]
    products:
      - {environment: [dev], scope: [mr]}
"""),
    )
    assert [j.test_case for j in jobs] == ["first"]
    assert len(findings) == 1
    finding = findings[0]
    assert finding.severity is Severity.WARNING
    assert "second" in finding.message
    assert finding.location.line == 14


def test_block_without_products_yields_nothing(tree: Callable[..., Path]) -> None:
    jobs, findings = jobs_of(
        tree,
        v1_tree("""
  - test_case: [nothing]
  - test_case: [something]
    products:
      - {environment: [dev], scope: [mr]}
"""),
    )
    assert [j.test_case for j in jobs] == ["something"]
    assert [f.code for f in findings] == ["block-no-products"]


def test_bad_cadence_is_an_error_even_in_v1(tree: Callable[..., Path]) -> None:
    _, findings = jobs_of(
        tree,
        v1_tree("""
  - test_case: [tc]
    products:
      - {environment: [dev], scope: [mr], cadence: [nighty]}
"""),
    )
    assert [f.severity for f in findings] == [Severity.ERROR]
    assert 'did you mean "nightly"' in findings[0].message


def test_missing_build_and_unresolved_template(tree: Callable[..., Path]) -> None:
    files = v1_tree(
        """
  - test_case: [tc]
    products:
      - {environment: [weird], scope: [mr]}
""",
        spec_extra="  tag: null",
    )
    files["h100/gpt.yaml"] = files["h100/gpt.yaml"].replace(
        '"{test_case}_{environment}_{platforms}"', '"{test_case}_{flavour}"'
    )
    jobs, findings = jobs_of(tree, files)
    codes = sorted(f.code for f in findings)
    assert codes == ["build-missing", "template"]
    assert all(f.severity is Severity.WARNING for f in findings)  # v1: upstream tolerates
    assert any("{flavour}" in f.message for f in findings)
    assert len(jobs) == 1


def test_duplicate_jobs_carry_every_definition(tree: Callable[..., Path]) -> None:
    """Expansion keeps both copies (selection keeps one per target, validate
    reports them) and gives each the locations of all of them."""
    jobs, findings = jobs_of(
        tree,
        v1_tree("""
  - test_case: [tc]
    products:
      - {environment: [dev], scope: [mr], platforms: [dgx_h100]}
      - {environment: [dev], scope: [mr], platforms: [dgx_h100]}
      - {environment: [dev], scope: [nightly], platforms: [dgx_h100]}
"""),
    )
    assert not findings
    doubled = [j for j in jobs if j.scope == "mr"]
    assert len(doubled) == 2
    lines = sorted(w.line for w in doubled[0].definitions)
    assert len(lines) == 2 and lines[0] < lines[1]
    assert doubled[0].definitions == doubled[1].definitions
    (single,) = [j for j in jobs if j.scope == "L2"]
    assert single.definitions == () and single.locations == (single.source,)


def test_axis_that_is_not_a_list_is_an_error(tree: Callable[..., Path]) -> None:
    jobs, findings = jobs_of(
        tree,
        v1_tree("""
  - test_case: [tc]
    products:
      - {environment: dev, scope: [mr]}
"""),
    )
    assert not jobs
    assert [f.code for f in findings] == ["axis-type"]
    assert findings[0].severity is Severity.ERROR
    assert "environment: [dev]" in findings[0].message


def test_products_not_a_list_and_empty_lists(tree: Callable[..., Path]) -> None:
    files = v1_tree("  nope: 1")
    _, findings = jobs_of(tree, files)
    assert [f.code for f in findings] == ["products-type"]
    _, findings = jobs_of(
        tree,
        v1_tree("""
  - test_case: [tc]
    products:
      - {environment: [], scope: [mr]}
"""),
    )
    assert [f.code for f in findings] == ["axis-empty"]


def test_expansion_cap_stops_with_an_error(tree: Callable[..., Path]) -> None:
    values = ", ".join(f"v{i}" for i in range(60))
    files = v1_tree(f"""
  - test_case: [tc]
    products:
      - {{environment: [{values}], scope: [{values}], tag: [{values}]}}
""")
    files["matrixgen.yaml"] = """
format_version: 2
vocabulary:
  platforms: [dgx_a100]
  environments: [dev]
  scopes: {gitlab: [mr]}
defaults:
  max_jobs: 1000
"""
    jobs, findings = jobs_of(tree, files)
    assert not jobs
    assert "expansion-cap" in [f.code for f in findings]
    assert any("1,000" in f.message for f in findings)


def test_v2_env_and_args_and_defaults(tree: Callable[..., Path]) -> None:
    jobs, findings = jobs_of(
        tree,
        v2_tree("""
  - test_case: [tc]
    products:
      - environment: [dev]
        scope: [mr]
        env: {SHARED: row, EXTRA: "1"}
        args: ["--seed", "7"]
      - environment: [dev]
        scope: [L1]
        time_limit: [5400]
"""),
    )
    assert not findings
    by_scope = {j.scope: j for j in jobs}
    mr = by_scope["mr"]
    assert dict(mr.env) == {"NVTE_FLASH_ATTN_V4": "0", "SHARED": "row", "EXTRA": "1"}
    assert mr.args == ("--flash-attention-version", "2", "--seed", "7")
    assert (mr.time_limit, mr.n_repeat) == (2700, 5)
    assert by_scope["L1"].time_limit == 5400
    assert dict(by_scope["L1"].env) == {"NVTE_FLASH_ATTN_V4": "0", "SHARED": "spec"}


def test_v2_unknown_keys_are_errors_with_suggestions(tree: Callable[..., Path]) -> None:
    _, findings = jobs_of(
        tree,
        v2_tree(
            """
  - test_case: [tc]
    products:
      - {environment: [dev], scope: [mr], platfroms: [dgx_h100]}
""",
            spec_extra="  scirpt: echo",
        ),
    )
    messages = sorted(f.message for f in findings)
    assert all(f.severity is Severity.ERROR for f in findings)
    assert any('"platfroms"' in m and 'did you mean "platforms"' in m for m in messages)
    assert any('"scirpt"' in m and 'did you mean "script"' in m for m in messages)


def test_v2_missing_build_is_an_error(tree: Callable[..., Path]) -> None:
    _, findings = jobs_of(
        tree,
        v2_tree("""
  - test_case: [tc]
    products:
      - {environment: [lts], scope: [mr]}
"""),
    )
    assert [(f.code, f.severity) for f in findings] == [("build-missing", Severity.ERROR)]
    assert '"img-lts"' in findings[0].message and findings[0].location.line == 15


def test_template_cannot_reach_python_attributes(tree: Callable[..., Path]) -> None:
    files = v2_tree("""
  - test_case: [tc]
    products:
      - {environment: [dev], scope: [mr]}
""")
    files["gpt.yaml"] = files["gpt.yaml"].replace(
        '"{test_case}_{environment}_{platforms}"', '"{test_case.__class__}"'
    )
    jobs, findings = jobs_of(tree, files)
    assert [f.code for f in findings] == ["template"]
    assert "plain field name" in findings[0].message
    assert "class" not in jobs[0].name or jobs[0].name == "tc"


def test_job_order_does_not_depend_on_file_order(tree: Callable[..., Path]) -> None:
    rows = """
  - test_case: [b]
    products:
      - {environment: [dev, lts], scope: [mr]}
  - test_case: [a]
    products:
      - {environment: [dev], scope: [mr, nightly]}
"""
    first = generate(tree(v1_tree(rows)))
    files = v1_tree(rows)
    files["z/copy.yaml"] = files.pop("h100/gpt.yaml").replace("model: gpt", "model: aaa")
    second = generate(tree(files))
    assert [j.test_case for j in first.jobs] == ["a", "a", "b", "b"]
    assert [j.model for j in second.jobs] == ["aaa"] * 4
    assert [j.test_case for j in second.jobs] == [j.test_case for j in first.jobs]


# --- properties -----------------------------------------------------------------


AXES = {
    "environment": ["dev", "lts"],
    "scope": ["mr", "mr-slim", "nightly", "mr-github", "L0", "weekly"],
    "platforms": ["dgx_h100", "dgx_gb200"],
    "tag": ["latest", "legacy"],
}
ALIAS = {"mr-github-slim": "L0", "mr-github": "L1", "nightly": "L2", "weekly": "L3"}

row_strategy = st.fixed_dictionaries(
    {},
    optional={
        key: st.lists(st.sampled_from(values), min_size=1, max_size=len(values), unique=True)
        for key, values in AXES.items()
    }
    | {
        "cadence": st.lists(
            st.sampled_from(["pr", "nightly", "mergegroup", "weekly"]),
            min_size=1,
            max_size=2,
            unique=True,
        )
    },
)
block_strategy = st.fixed_dictionaries(
    {"rows": st.lists(row_strategy, min_size=1, max_size=3)},
    optional={"cadence": st.lists(st.sampled_from(["pr", "weekly"]), min_size=1, max_size=1)},
)
tree_strategy = st.lists(st.lists(block_strategy, min_size=1, max_size=4), min_size=1, max_size=4)


def render_tree(files_blocks: list[list[dict]]) -> dict[str, bytes]:
    files = {
        "_build.yaml": yaml.safe_dump(
            {"type": "build", "format_version": 1, "spec": {"name": "img"}}
        ).encode()
    }
    for fi, blocks in enumerate(files_blocks):
        products = []
        for bi, block in enumerate(blocks):
            entry: dict = {
                "test_case": [f"case_{fi}_{bi}"],
                "products": [dict(r) for r in block["rows"]],
            }
            if "cadence" in block:
                entry["cadence"] = block["cadence"]
            products.append(entry)
        doc = {
            "type": "basic",
            "format_version": 1,
            "spec": {
                "name": "{test_case}",
                "model": f"m{fi % 2}",
                "build": "img",
                "platforms": "dgx_h100",
                "environment": "dev",
                "scope": "mr",
            },
            "products": products,
        }
        files[f"dir{fi % 2}/file{fi}.yaml"] = yaml.safe_dump(doc).encode()
    return files


def expected_jobs(files_blocks: list[list[dict]]) -> Counter:
    expected: Counter = Counter()
    for fi, blocks in enumerate(files_blocks):
        for bi, block in enumerate(blocks):
            for row in block["rows"]:
                keys = [k for k in AXES if k in row]
                for combo in itertools.product(*(row[k] for k in keys)):
                    values = dict(zip(keys, combo, strict=True))
                    scope = values.get("scope")
                    expected[
                        (
                            f"case_{fi}_{bi}",
                            values.get("environment", "dev"),
                            ALIAS.get(scope, scope) if scope else "mr",
                            values.get("platforms", "dgx_h100"),
                            values.get("tag"),
                        )
                    ] += 1
    return expected


@settings(max_examples=60, deadline=None)
@given(tree_strategy)
def test_no_job_is_lost_or_duplicated(files_blocks: list[list[dict]]) -> None:
    generation = generate_from_files(render_tree(files_blocks))
    rows = sum(
        math.prod(len(row[k]) for k in AXES if k in row)
        for blocks in files_blocks
        for block in blocks
        for row in block["rows"]
    )
    assert len(generation.jobs) == rows
    got = Counter((j.test_case, j.environment, j.scope, j.platform, j.tag) for j in generation.jobs)
    assert got == expected_jobs(files_blocks)


@settings(max_examples=30, deadline=None)
@given(tree_strategy, st.randoms(use_true_random=False))
def test_output_does_not_depend_on_file_order(files_blocks, rnd: random.Random) -> None:
    files = render_tree(files_blocks)
    shuffled_keys = list(files)
    rnd.shuffle(shuffled_keys)
    a = generate_from_files(files)
    b = generate_from_files({k: files[k] for k in shuffled_keys})
    dump = lambda g: json.dumps([json_value(j) for j in g.jobs])  # noqa: E731
    assert dump(a) == dump(b)


def test_a_missing_build_is_reported_once_per_row_and_for_every_row(
    tree: Callable[..., Path],
) -> None:
    # Row a makes two jobs (two scopes) that need the missing img-lts: one finding;
    # rows b and c, after it, each get their own.
    _, findings = jobs_of(
        tree,
        v2_tree("""
  - test_case: [a]
    products:
      - {environment: [lts], scope: [mr, L1]}
  - test_case: [b]
    products:
      - {environment: [lts], scope: [mr]}
  - test_case: [c]
    products:
      - {environment: [lts], scope: [L1]}
"""),
    )
    missing = 'no build recipe is named "img-lts" (needed by {})'
    assert [(f.code, f.location.line, f.message) for f in findings] == [
        ("build-missing", 15, missing.format("a")),
        ("build-missing", 18, missing.format("b")),
        ("build-missing", 21, missing.format("c")),
    ]


def test_v2_values_list_would_pass_on_are_errors_where_they_are_written(
    tree: Callable[..., Path], cli: Callable
) -> None:
    # Values of the wrong kind for a format_version 2 field: each is an error at
    # the value itself, so `list` and `generate` (which skip the JSON Schema pass)
    # refuse them just as `validate` does, instead of emitting a job in scope "1"
    # that no target selects, a zero time limit or an env var named "bad name".
    rows = """
  - test_case: [tc]
    products:
      - environment: [dev]
        scope: [1]
        tag: [7]
        n_repeat: [0]
        time_limit: [0]
        allow_failure: ["yes"]
        env: {"bad name": x, "1x": y, OK_1: z}
"""
    files = v2_tree(rows, spec_extra="  launcher: [run.sh]\n  needs: warm")
    root = tree(files)
    run = cli("list", "--recipes", root)
    assert run.code == 1 and run.out == "", run
    found = {
        (f.location.line, f.location.column, f.code)
        for f in generate(root).findings
        if f.severity is Severity.ERROR
    }
    assert found == {
        (10, 13, "spec-type"),  # launcher: a list
        (11, 10, "spec-type"),  # needs: a string
        (17, 17, "field-type"),  # scope 1
        (18, 15, "field-type"),  # tag 7
        (19, 20, "field-type"),  # n_repeat 0
        (20, 22, "field-type"),  # time_limit 0
        (21, 25, "field-type"),  # allow_failure "yes"
        (22, 15, "env-type"),  # "bad name"
        (22, 30, "env-type"),  # "1x"
    }, found
    # validate says each once, at the same place (its schema pass agrees).
    checked = cli("validate", "--recipes", root)
    assert checked.code == 1
    assert checked.err.count("[env-type]") == 2 and "[schema]" not in checked.err, checked.err


def test_v1_tree_keeps_what_megatron_keeps(tree: Callable[..., Path]) -> None:
    # The same values in a format_version 1 tree: Megatron-LM's parser takes them
    # (a numeric scope simply matches no scope asked for), so they select as there.
    jobs, findings = jobs_of(
        tree,
        v1_tree("""
  - test_case: [tc]
    products:
      - {environment: [dev], scope: [1], tag: [7], n_repeat: [0], platforms: [dgx_h100]}
"""),
    )
    assert [(j.scope, j.tag, j.n_repeat) for j in jobs] == [("1", "7", 0)]
    assert not [f for f in findings if f.severity is Severity.ERROR]


def test_env_and_args_in_a_v1_row_are_axes(tree: Callable[..., Path]) -> None:
    # format_version 1 knows no env or args attributes: in a row they multiply
    # out like any key, as Megatron-LM's parser reads them.
    jobs, findings = jobs_of(
        tree,
        v1_tree("""
  - test_case: [tc]
    products:
      - {environment: [dev], scope: [mr], platforms: [dgx_h100], env: [a, b], args: [x]}
"""),
    )
    assert sorted((j.spec["env"], j.spec["args"]) for j in jobs) == [("a", "x"), ("b", "x")]
    assert all(j.env == () and j.args == () for j in jobs)
    assert not [f for f in findings if f.severity is Severity.ERROR]


def test_each_job_points_at_the_line_and_column_of_its_row(tree: Callable[..., Path]) -> None:
    # Rows on odd and even lines, at two indentations: a job's source is where
    # its row starts (duplicate-job findings and migrate quote it).
    products = """
  - test_case: [a]
    products:
      - {environment: [dev], scope: [mr]}
      - environment: [lts]
        scope: [mr]

  - test_case: [b]
    products:
        - {environment: [dev], scope: [mr, nightly]}
"""
    root = tree(v1_tree(products))
    lines = (root / "h100" / "gpt.yaml").read_text().splitlines()
    rows = [
        (n + 1, line.index("-") + 3)  # the row mapping, after "- "
        for n, line in enumerate(lines)
        if line.lstrip().startswith("- environment") or line.lstrip().startswith("- {environment")
    ]
    assert len(rows) == 3 and len({n % 2 for n, _ in rows}) == 2
    generation = generate(root)
    found = sorted({(j.source.line, j.source.column) for j in generation.jobs})
    assert found == rows


def test_the_expansion_s_errors_are_its_error_findings_only(tree: Callable[..., Path]) -> None:
    # A v1 tree: the second test case of a block is a warning (Megatron-LM
    # ignores it), a bad cadence an error.
    generation = generate(
        tree(
            v1_tree("""
  - test_case: [tc, ignored]
    products:
      - {environment: [dev], scope: [mr], cadence: [nighty]}
""")
        )
    )
    severities = sorted(f.severity.value for f in generation.expansion.findings)
    assert severities == ["error", "warning"]
    assert [f.severity for f in generation.expansion.errors] == [Severity.ERROR]
    assert "nighty" in generation.expansion.errors[0].message


# --- the job cap, and the expansions a cache keeps ---------------------------------


def counted_recipe(test_case: str, rows: list[int]) -> bytes:
    """A recipe file of one block whose rows make `rows[i]` jobs each."""
    values = [", ".join(f"r{r}e{i}" for i in range(n)) for r, n in enumerate(rows)]
    products = "".join(f"      - {{environment: [{v}]}}\n" for v in values)
    return (
        "type: basic\nformat_version: 1\nspec:\n  name: '{test_case}_{environment}'\n"
        f"  model: gpt\n  platforms: dgx_a100\n  scope: mr\nproducts:\n"
        f"  - test_case: [{test_case}]\n    products:\n{products}"
    ).encode()


def counted_tree(files: list[list[int]], cap: int, n_repeat: int) -> dict[str, bytes]:
    tree = {f"f{i}.yaml": counted_recipe(f"t{i}", rows) for i, rows in enumerate(files)}
    tree["matrixgen.yaml"] = f"defaults:\n  max_jobs: {cap}\n  n_repeat: {n_repeat}\n".encode()
    return tree


def expansion_dump(generation: Generation) -> str:
    findings = [(f.code, str(f.location), f.message) for f in generation.findings]
    return json.dumps([[json_value(j) for j in generation.jobs], findings])


REVISION = st.tuples(
    st.lists(st.lists(st.integers(1, 4), min_size=1, max_size=2), min_size=1, max_size=3),
    st.integers(1, 10),
    st.integers(1, 3),
)


@settings(max_examples=40, deadline=None)
@given(st.lists(REVISION, min_size=1, max_size=3), st.booleans())
# A file the cache keeps, met again after a changed file that fills the cap.
@example([([[2], [4, 2]], 10, 1), ([[4, 2], [4, 2]], 10, 1)], True)
# A file the cap cuts short, expanded again.
@example([([[3, 4], [1]], 5, 1)], True)
# Exactly the cap; a config without content id that changes the defaults.
@example([([[4, 1]], 5, 1), ([[4, 1]], 5, 2)], False)
def test_the_cap_stops_at_the_row_that_passes_it_and_a_cache_changes_nothing(
    revisions: list[tuple[list[list[int]], int, int]], config_id: bool
) -> None:
    from matrixgen.diff.gitsource import blob_id
    from matrixgen.pipeline import PipelineCache

    cache = PipelineCache()
    for files, cap, n_repeat in revisions * 2:  # each revision met again, all cached
        tree = counted_tree(files, cap, n_repeat)
        ids = {rel: blob_id(data) for rel, data in tree.items()}
        if not config_id:
            del ids["matrixgen.yaml"]
        fresh = generate_from_files(tree)
        assert expansion_dump(generate_from_files(tree, blob_ids=ids, cache=cache)) == (
            expansion_dump(fresh)
        )
        # The rows before the one that passes the cap, in file order, give jobs;
        # that row is the only error.
        counts = [n for rows in files for n in rows]
        kept = 0
        for n in counts:
            if kept + n > cap:
                break
            kept += n
        passed = sum(counts) > cap
        assert len(fresh.jobs) == kept
        assert [f.code for f in fresh.findings] == ["expansion-cap"] * passed
        assert all(j.n_repeat == n_repeat for j in fresh.jobs)


def test_a_revision_expands_again_only_the_files_that_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from matrixgen.diff.gitsource import blob_id
    from matrixgen.engine import expand
    from matrixgen.pipeline import PipelineCache

    expanded: list[str] = []
    real = expand.expand_file

    def counting(recipe: RecipeFile, config: ProjectConfig, *, budget: Any) -> expand.FileExpansion:
        expanded.append(recipe.rel)
        return real(recipe, config, budget=budget)

    monkeypatch.setattr(expand, "expand_file", counting)
    cache = PipelineCache()
    for tree in (  # a tree without a project config
        {"a.yaml": counted_recipe("a", [2]), "b.yaml": counted_recipe("b", [3])},
        {"a.yaml": counted_recipe("a", [1, 1]), "b.yaml": counted_recipe("b", [3])},
    ):
        ids = {rel: blob_id(data) for rel, data in tree.items()}
        assert len(generate_from_files(tree, blob_ids=ids, cache=cache).jobs) == 5
    assert expanded == ["a.yaml", "b.yaml", "a.yaml"]


def test_a_field_s_finding_points_at_its_value_in_the_row_or_the_spec() -> None:
    recipe = b"""type: basic
format_version: 1
spec:
  name: "{test_case}_{n_repeat}"
  model: gpt
  platforms: dgx_a100
  time_limit: soon
products:
  - test_case: [tc]
    products:
      - {n_repeat: [1.5, 2.5], environment: [dev]}
"""
    found = [(f.code, str(f.location)) for f in generate_from_files({"a.yaml": recipe}).findings]
    # Each value of the row's list at its own place; the spec's key at the spec.
    assert found == [
        ("field-type", "a.yaml:7:15"),
        ("field-type", "a.yaml:11:21"),
        ("field-type", "a.yaml:11:26"),
    ]


def test_a_name_field_given_a_number_is_its_text_and_a_finding() -> None:
    files = v1_tree("""
  - test_case: [tc]
    products:
      - {environment: [dev], scope: [mr], model: [5]}
""")
    generation = generate_from_files({k: v.encode() for k, v in files.items()})
    assert [j.model for j in generation.jobs] == ["5"]
    assert [(f.code, str(f.location), f.message) for f in generation.findings] == [
        ("field-type", "h100/gpt.yaml:17:51", '"model" must be a single name, not 5')
    ]


def test_a_v2_row_s_paths_and_references_reach_its_jobs_only() -> None:
    files = v2_tree("""
  - test_case: [tc]
    products:
      - {environment: [dev], scope: [mr], paths: ["megatron/core/**"], references: [a/b.json]}
      - {environment: [dev], scope: [nightly]}
""")
    generation = generate_from_files({k: v.encode() for k, v in files.items()})
    assert not generation.findings, generation.findings
    specs = {j.scope: j.spec for j in generation.jobs}
    assert specs["mr"]["paths"] == ["megatron/core/**"]
    assert specs["mr"]["references"] == ["a/b.json"]
    assert "paths" not in specs["L2"] and "references" not in specs["L2"]


def test_an_expansion_cannot_be_changed() -> None:
    # A generation hands the same expansion to every reader, a cache to every revision.
    files = v2_tree("  - test_case: [tc]\n    products:\n      - {environment: [dev]}\n")
    expansion = generate_from_files({k: v.encode() for k, v in files.items()}).expansion
    with pytest.raises(AttributeError):
        expansion.jobs = ()  # type: ignore[misc]
