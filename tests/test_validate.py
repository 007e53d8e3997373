"""`matrixgen validate`: every problem, located, in one run; exit codes."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.test_expand import v1_tree, v2_tree

LOCATED = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning): ")


def findings_of(err: str) -> list[re.Match]:
    return [m for line in err.splitlines() if (m := LOCATED.match(line))]


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
    run = cli("validate", "--recipes", tree(files))
    assert run.code == 1
    assert "spec/nodes: 'many' is not of type 'integer'" in run.err
    assert "n_repeat" in run.err


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
        b"type: basic\nformat_version: 1\nspec: {1: x}\nproducts: []\n",
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
