"""`matrixgen validate`: every problem, located, in one run; exit codes."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.tree_fixtures import findings_of, v1_tree, v2_tree


def test_clean_v2_tree_exits_zero(tree: Callable[..., Path], cli: Callable) -> None:
    root = tree(
        v2_tree("""
  - test_case: [tc]
    products:
      - {environment: [dev], scope: [mr, L1], platforms: [dgx_h100, dgx_gb200]}
""")
    )
    run = cli("validate", "--recipes", root)
    assert run.code == 0, run
    assert "4 job(s): 0 error(s), 0 warning(s)" in run.err


def test_all_problems_in_one_run_with_locations(tree: Callable[..., Path], cli: Callable) -> None:
    files = v2_tree("""
  - test_case: [tc]
    products:
      - {environment: [dve], scope: [mr], platforms: [dgx_h10]}
      - {environment: [dev], scope: [mr-slimm], cadence: [nightly, hourly]}
  - test_case: [tc]
    products:
      - {environment: [lts], scope: [mr], tag: [lastest]}
""")
    files["broken.yaml"] = "type: basic\nspec: [\n"
    root = tree(files)
    run = cli("validate", "--recipes", root)
    assert run.code == 1, run
    found = findings_of(run.err)
    text = run.err
    assert 'unknown environment "dve" (did you mean "dev"?)' in text
    assert 'unknown platform "dgx_h10" (did you mean "dgx_h100"?)' in text
    assert 'unknown scope "mr-slimm" (did you mean "mr-slim"?)' in text
    assert 'unknown tag "lastest" (did you mean "latest"?)' in text
    assert 'unknown cadence "hourly"' in text
    assert "already has a block" in text
    assert "broken.yaml:" in text and "yaml-syntax" in text
    # Exact positions: the value "dve" sits on line 15, column 24 of gpt.yaml.
    env = next(m for m in found if "unknown environment" in m.string)
    assert (env["line"], env["col"]) == ("15", "24")
    assert len(found) >= 7


def test_v1_tree_warnings_and_strict(tree: Callable[..., Path], cli: Callable) -> None:
    rows = "\n".join(
        f"""
  - test_case: [tc{i}]
    products:
      - {{environment: [dev], scope: [mr], platforms: [dgx_h100]}}"""
        for i in range(6)
    )
    rows += """
  - test_case: [typo]
    products:
      - {environment: [dev], scope: [mr], platforms: [dgx_ h100]}
"""
    root = tree(v1_tree(rows))
    run = cli("validate", "--recipes", root)
    assert run.code == 0, run
    assert 'platform "dgx_ h100"' in run.err and 'did you mean "dgx_h100"' in run.err
    assert ": warning: " in run.err
    strict = cli("validate", "--recipes", root, "--strict")
    assert strict.code == 1
    # A warning never changes what is selected.
    listed = cli("list", "--recipes", root, "--platform", "dgx_ h100", "--format", "json")
    assert listed.code == 0 and '"typo"' in listed.out


def test_github_annotations(tree: Callable[..., Path], cli: Callable, monkeypatch) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    root = tree(
        v2_tree("""
  - test_case: [tc]
    products:
      - {environment: [dve], scope: [mr]}
""")
    )
    run = cli("validate", "--recipes", root)
    assert run.code == 1
    annotations = [line for line in run.err.splitlines() if line.startswith("::error ")]
    pattern = r"::error file=.+gpt\.yaml,line=15,col=24::unknown environment \"dve\""
    assert any(re.match(pattern, a) for a in annotations), annotations


def test_schema_catches_wrong_types(tree: Callable[..., Path], cli: Callable) -> None:
    files = v2_tree(
        """
  - test_case: [tc]
    products:
      - {environment: [dev], scope: [mr], n_repeat: ["five"]}
""",
        spec_extra="  nodes: many",
    )
    files["gpt.yaml"] = files["gpt.yaml"].replace(
        "format_version: 2\n", "format_version: 2\nmaintainers: [3]\n", 1
    )
    run = cli("validate", "--recipes", tree(files))
    assert run.code == 1
    # Only the schema knows maintainers; expansion, which list and generate run
    # too, reports wrong job fields at the value, once (the schema's is dropped).
    assert "maintainers/0: 3 is not of type 'string' [schema]" in run.err
    found = {(m["line"], m["col"], m.string.split("error: ")[1]) for m in findings_of(run.err)}
    assert (
        "11",
        "10",
        '"nodes" must be a whole number of at least 1, not "many" [field-type]',
    ) in found
    assert (
        "16",
        "54",
        '"n_repeat" must be a whole number of at least 1, not "five" [field-type]',
    ) in found
    assert len(found) == 3, found


def test_schema_findings_are_left_out_by_keyword_not_by_their_text(
    tree: Callable[..., Path], cli: Callable
) -> None:
    """An unknown key is expansion's to report (once, with a "did you mean"); a
    schema finding whose message quotes a value of the file's is kept, whatever
    the value says."""
    files = v2_tree(
        """
  - test_case: [tc]
    products:
      - {environment: [dev], scope: [mr]}
"""
    )
    files["gpt.yaml"] = files["gpt.yaml"].replace(
        "format_version: 2\n",
        "format_version: 2\nmaintainers: [{Additional properties: are not allowed}]\n"
        "maintainer: [me]\n",
        1,
    )
    run = cli("validate", "--recipes", tree(files))
    assert run.code == 1
    assert (
        "maintainers/0: {'Additional properties': 'are not allowed'} is not of type 'string'"
        " [schema]" in run.err
    )
    assert 'unknown top-level key "maintainer" (did you mean "maintainers"?)' in run.err
    assert "Additional properties are not allowed" not in run.err


def test_script_placeholders(tree: Callable[..., Path], cli: Callable) -> None:
    files = v2_tree(
        """
  - test_case: [tc]
    products:
      - {environment: [dev], scope: [mr]}
""",
        spec_extra='  script: "run {test_case} {assets_dir} {n_repeat} ${{HOME}} {oops}"',
    )
    run = cli("validate", "--recipes", tree(files))
    assert run.code == 1
    assert "placeholder {oops} does not resolve" in run.err
    assert "{assets_dir}" not in run.err and "{n_repeat}" not in run.err


def test_bad_project_config_exit_code(tree: Callable[..., Path], cli: Callable) -> None:
    files = v2_tree("  []")
    files["matrixgen.yaml"] = files["matrixgen.yaml"].replace("environments", "environmnets")
    run = cli("validate", "--recipes", tree(files))
    assert run.code == 3
    assert "matrixgen.yaml:" in run.err and "environments" in run.err


def test_real_tree_reports_what_it_finds(megatron_dir: Path, cli: Callable) -> None:
    run = cli("validate", "--recipes", megatron_dir)
    assert run.code == 0, run
    assert "49 recipe file(s)" in run.err
    assert 'platform "dg  x_h100"' in run.err
    assert "mamba-static-inference.yaml:" in run.err
    assert "only the first test case (gpt_583m_perf) is read" in run.err
    strict = cli("validate", "--recipes", megatron_dir, "--strict")
    assert strict.code == 1


@pytest.mark.parametrize(
    "args",
    [
        ("list", "--scope", "mr-slim"),
        ("generate", "--format", "json"),
        ("github", "--target", "github-L1-dgx_h100-dev"),
        ("gitlab", "--target", "gitlab-nightly-dgx_h100-dev"),
        ("stats",),
    ],
)
def test_only_validate_prints_the_tree_warnings(
    megatron_dir: Path, cli: Callable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple
) -> None:
    # The Megatron-LM tree has 3 warnings: validate prints (and annotates) each
    # once; every other command says how many there are, once, and repeats none.
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    shown = cli("validate", "--recipes", megatron_dir)
    assert shown.err.count(": warning: ") == 3 and shown.err.count("::warning ") == 3
    extra = ("--out", tmp_path / "out") if args[0] == "generate" else ()
    run = cli(*args, "--recipes", megatron_dir, *extra)
    assert run.code == 0, run
    assert ": warning: " not in run.err and "::warning" not in run.err + run.out
    note = (
        f"matrixgen: note: 3 warning(s) in {megatron_dir} (`matrixgen validate --recipes "
        f"{megatron_dir}` shows them; MATRIXGEN_QUIET=1 leaves this note out)"
    )
    assert run.err.count(note) == 1, run.err


@pytest.mark.parametrize(
    "content",
    [
        b"\x00\x01\x02binary",
        b"",
        b"- just\n- a list\n",
        b"type: basic\nformat_version: 1\nspec: {name: x, model: m, build: b}\nproducts: 3\n",
        b"type: basic\nformat_version: 7\nspec: {}\n",
        b"!!python/object/apply:os.system ['echo pwned']\n",
        b"type: basic\nformat_version: 1\nspec: {name: x, model: m, build: b}\n"
        b"products:\n  - test_case: tc\n    products: [{scope: mr}]\n",
        b"type: basic\nformat_version: 1\nspec: {name: x, model: m, build: b}\n"
        b"products:\n  - test_case: [tc]\n    products: [[1, 2]]\n",
        b"type: basic\nformat_version: 1\nspec: {name: x, model: m, build: b}\n"
        b"products:\n  - test_case: [tc]\n    products: [{scope: [[mr]]}]\n",
        # A key YAML reads as a number: Megatron-LM takes it (test_load: a
        # warning there), but in format_version 2 it is an error.
        b"type: basic\nformat_version: 2\nspec: {1: x}\nproducts: []\n",
        # A number Python will not read: Megatron-LM's parser would crash on it.
        b"type: basic\nformat_version: 1\nspec: {n_repeat: " + b"9" * 5000 + b"}\n",
    ],
)
def test_bad_files_never_traceback(tree: Callable[..., Path], cli: Callable, content: bytes):
    root = tree({"bad.yaml": content})
    for command in ("validate", "list"):
        run = cli(command, "--recipes", root)
        assert run.code == 1, run
        assert "Traceback" not in run.err
        assert "bad.yaml" in run.err


def test_v2_row_env_and_args_pass_the_schema(tree: Callable[..., Path], cli: Callable) -> None:
    root = tree(
        v2_tree("""
  - test_case: [tc]
    products:
      - environment: [dev]
        scope: [mr]
        env: {EXTRA: "1"}
        args: ["--seed", "7"]
""")
    )
    run = cli("validate", "--recipes", root)
    assert run.code == 0, run


def test_github_annotations_name_files_from_the_workspace(
    tree: Callable[..., Path], cli: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GitHub shows an annotation on a pull request's file only when its path is
    # the one from the top of the checkout: not absolute, not "./"-prefixed.
    root = tree(
        v2_tree("""
  - test_case: [tc]
    products:
      - {environment: [dve], scope: [mr]}
""")
    )
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(root.parent))
    for recipes in (root, Path("./") / root.name):
        monkeypatch.chdir(root.parent)
        run = cli("validate", "--recipes", recipes)
        wanted = f"::error file={root.name}/gpt.yaml,line=15,col=24::unknown environment"
        assert any(x.startswith(wanted) for x in run.err.splitlines()), run.err
    # Outside the workspace the path is left as given; "," and ":" are escaped.
    odd = tree({"a,b:c/x.yaml": "a: [\n"})
    monkeypatch.setenv("GITHUB_WORKSPACE", str(root))
    run = cli("validate", "--recipes", odd)
    (annotation,) = [x for x in run.err.splitlines() if x.startswith("::error ")]
    assert annotation.startswith(f"::error file={odd}/a%2Cb%3Ac/x.yaml,line=2,col=1::")


@pytest.mark.parametrize(
    "typed,meant",
    [
        ("H100", "dgx_h100"),  # case and a missing prefix
        ("GB200", "dgx_gb200"),
        ("DGX_H100", "dgx_h100"),
        ("gb200-1node", "dgx_gb200_1node"),
        ("Nightly", "nightly"),
        ("mr_slim", "mr-slim"),
        ("l1", "L1"),
    ],
)
def test_did_you_mean_reads_past_case(typed: str, meant: str) -> None:
    from matrixgen.model.errors import did_you_mean

    known = ["dgx_h100", "dgx_gb200", "dgx_gb200_1node", "mr", "mr-slim", "nightly", "L0", "L1"]
    assert did_you_mean(typed, known) == f' (did you mean "{meant}"?)'
    assert did_you_mean("zzzz", known) == ""


def _typos_pairwise(counter: dict[str, int]) -> dict[str, str]:
    """The rule of the typo check, comparing every pair (slow, obviously right)."""
    from matrixgen.engine.checks import _looks_like_typo

    by_use = sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))
    found = {}
    for value, n in counter.items():
        for other, m in by_use:
            if other != value and m >= 3 * n and _looks_like_typo(value, other):
                found[value] = other
                break
    return found


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.text(alphabet="ab_x-H1", min_size=1, max_size=6), st.integers(1, 9), max_size=25
    )
)
def test_typo_check_finds_what_comparing_every_pair_finds(counter: dict[str, int]) -> None:
    from matrixgen.engine.checks import typos

    assert typos(counter) == _typos_pairwise(counter)


def test_typo_check_of_many_distinct_values_is_fast() -> None:
    import time

    from matrixgen.engine.checks import typos

    counter = {f"platform_{i:05d}": 1 for i in range(20_000)}
    counter["dgx_h100"] = 500
    counter["dgx_h10"] = 1
    start = time.process_time()  # CPU time: the machine may be busy
    found = typos(counter)
    assert time.process_time() - start < 5  # every pair: minutes
    assert found == {"dgx_h10": "dgx_h100"}


def test_cadences_must_be_declared(tree: Callable[..., Path], cli: Callable) -> None:
    files = v2_tree("""
  - test_case: [tc]
    cadence: [weekly]
    products:
      - {environment: [dev], scope: [mr], cadence: [pr, nightly]}
""")
    files["matrixgen.yaml"] = files["matrixgen.yaml"].replace(
        "  tags: [latest, legacy]\n", "  tags: [latest, legacy]\n  cadences: [pr, mergegroup]\n"
    )
    run = cli("validate", "--recipes", tree(files))
    assert run.code == 1, run
    assert 'cadence "nightly" is not declared' in run.err
    assert 'cadence "weekly" is not declared' in run.err
    assert 'cadence "pr"' not in run.err


_AXIS_VALUE = st.one_of(
    st.sampled_from(["dgx_h100", "dgx_h10", "dev", "mr", "a", "1"]),
    st.sampled_from([1, True, None, 1.5, {"x": "mr"}, ["mr"]]),
)
_AXIS_LIST = st.one_of(st.lists(_AXIS_VALUE, max_size=4), _AXIS_VALUE)
_ROW = st.one_of(
    st.dictionaries(
        st.sampled_from(["platforms", "environment", "scope", "tag", "test_case"]),
        _AXIS_LIST,
        max_size=4,
    ),
    st.just("not a row"),
)
_RECIPE = st.fixed_dictionaries(
    {
        "type": st.just("basic"),
        "spec": st.dictionaries(
            st.sampled_from(["platforms", "environment", "scope", "tag", "model"]),
            _AXIS_VALUE,
            max_size=3,
        ),
        "products": st.lists(
            st.one_of(
                st.fixed_dictionaries({"test_case": st.just(["tc"]), "products": st.lists(_ROW)}),
                st.just("not a block"),
            ),
            max_size=3,
        ),
    }
)


def _loaded_tree(recipes: list[dict]) -> object:
    import yaml

    from matrixgen.engine.load import load_tree

    files = {f"r{i}.yaml": yaml.safe_dump(r).encode() for i, r in enumerate(recipes)}
    return load_tree(files, root="t")


@given(st.lists(_RECIPE, max_size=4), st.data())
def test_axis_usage_counts_and_finds_what_each_value_gives(recipes: list, data: st.DataObject):
    """_AxisUsage (lists of values counted once per recipe, places looked up only
    in the recipes that use a value) against the value-by-value walk."""
    from collections import Counter

    from matrixgen.engine.checks import _AxisUsage, _recipe_axis_values

    tree = _loaded_tree(recipes)
    each = [
        (what, value, place.recipe.path, place.keys)
        for recipe in tree.tests
        for what, value, place in _recipe_axis_values(recipe)
    ]
    usage = _AxisUsage(tree.tests)
    counted: dict[str, Counter] = {}
    for what, value, _, _ in each:
        counted.setdefault(what, Counter())[value] += 1
    assert usage.counts == counted
    used = sorted({(what, value) for what, value, _, _ in each})
    wanted = data.draw(st.sets(st.sampled_from([*used, ("platform", "none such")])))
    found = [(w, v, p.recipe.path, p.keys) for w, v, p in usage.occurrences(wanted)]
    assert found == [e for e in each if (e[0], e[1]) in wanted]


def _script_findings_job_by_job(tree, expansion) -> set:
    """The rule of the script check, template by template for each job."""
    from matrixgen.engine.checks import JOB_FIELDS
    from matrixgen.model.errors import Finding, Severity
    from matrixgen.model.templates import TemplateError, placeholders
    from matrixgen.model.vocab import RUNTIME_PLACEHOLDERS

    found = set()
    lenient = Severity.ERROR if tree.format_version == 2 else Severity.WARNING
    for job in expansion.jobs:
        for key in ("script", "script_setup"):
            script = job.spec.get(key)
            if not isinstance(script, str):
                continue
            try:
                names = placeholders(script)
            except TemplateError as exc:
                problem = str(exc)
            else:
                missing = [
                    n
                    for n in names
                    if n not in job.spec and n not in RUNTIME_PLACEHOLDERS and n not in JOB_FIELDS
                ]
                if not missing:
                    continue
                shown = ", ".join(f"{{{m}}}" for m in missing)
                problem = (
                    f"placeholder {shown} does not resolve to a field of the job "
                    "(write {{ and }} for literal braces)"
                )
            message = f"spec {key}: {problem}"
            found.add(
                Finding(location=job.source, severity=lenient, code="template", message=message)
            )
    return found


@pytest.mark.parametrize(
    ("script", "setup"),
    [
        ("run {test_case} {mode} {oops} {assets_dir} {n_repeat}", "cd {artifacts_dir}"),
        ("run {mode}", "echo {nope} {mode} {also_nope}"),
        ("run {test_case", "echo {{literal}} {mode!r:>4}"),
        ("{}", "plain"),
        (["run {oops}"], {"a": "{oops}"}),
        ("run {mode} {oops}", ["{nope}"]),
    ],
)
def test_script_check_is_the_rule_job_by_job(tree: Callable, script: object, setup: object) -> None:
    """Jobs of one script differ in their fields (`mode` only in some rows)."""
    from matrixgen.engine.checks import _script_findings
    from matrixgen.pipeline import generate

    files = v1_tree(
        """
  - test_case: [a, b]
    products:
      - {environment: [dev], scope: [mr], mode: [x, y]}
      - {environment: [lts], scope: [mr, nightly]}
  - test_case: [c]
    products:
      - {environment: [dev], scope: [nightly]}
""",
        spec_extra=f"  script: {json.dumps(script)}\n  script_setup: {json.dumps(setup)}",
    )
    # A second file with the scripts swapped: one key, several scripts.
    swapped = v1_tree(
        "  - test_case: [d]\n    products:\n      - {environment: [dev], scope: [mr]}\n",
        spec_extra=f"  script: {json.dumps(setup)}\n  script_setup: {json.dumps(script)}",
    )
    files["h100/swapped.yaml"] = swapped["h100/gpt.yaml"]
    generation = generate(tree(files))
    expected = _script_findings_job_by_job(generation.tree, generation.expansion)
    found = list(_script_findings(generation.tree, generation.expansion))
    assert set(found) == expected
    assert len(found) == len(expected)
    if isinstance(script, str) and ("{oops}" in script or "{test_case" in script):
        assert expected  # the case does test something


def test_script_check_on_the_real_tree_is_the_rule_job_by_job(megatron_dir: Path) -> None:
    from matrixgen.engine.checks import _script_findings
    from matrixgen.pipeline import generate

    generation = generate(megatron_dir)
    found = list(_script_findings(generation.tree, generation.expansion))
    assert set(found) == _script_findings_job_by_job(generation.tree, generation.expansion)
