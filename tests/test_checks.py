"""engine/checks.py: the checks of the loaded tree itself, called directly (not
through the CLI): typos in a tree without a vocabulary, values outside a declared
vocabulary, spec fields that reach no job, and script placeholders."""

from __future__ import annotations

import textwrap

from hypothesis import given
from hypothesis import strategies as st

from matrixgen.engine.checks import check_tree, typo_platforms, typos
from matrixgen.engine.context import ValidationContext
from matrixgen.model.errors import Finding, Severity
from matrixgen.pipeline import Generation, generate_from_files

CONFIG = """
    format_version: 2
    vocabulary:
      platforms: [dgx_h100, dgx_gb200]
      environments: [dev]
      scopes: {github: [L1], gitlab: [mr]}
"""
BUILD = "type: build\nformat_version: {v}\nspec: {{name: img}}\n"


def recipe(version: int, rows: str, spec_extra: str = "") -> str:
    return (
        f"type: basic\nformat_version: {version}\n"
        f'spec:\n  name: "{{test_case}}_{{platforms}}"\n  model: gpt\n  build: img\n'
        f"  platforms: dgx_h100\n{spec_extra}products:\n{rows}"
    )


def generation(files: dict[str, str]) -> Generation:
    return generate_from_files({k: textwrap.dedent(v).encode() for k, v in files.items()})


def checked(files: dict[str, str]) -> list[Finding]:
    gen = generation(files)
    context = ValidationContext(generation=gen, targets=gen.checked_targets())
    return list(check_tree(context, schema=False))


def row(case: str, platform: str, scope: str = "mr") -> str:
    return (
        f"  - test_case: [{case}]\n    products:\n"
        f"      - {{environment: [dev], scope: [{scope}], platforms: [{platform}]}}\n"
    )


def test_a_rare_value_one_typo_from_a_common_one_is_a_warning_at_its_row() -> None:
    """A tree without a vocabulary (format_version 1): dgx_H100, once, beside
    dgx_h100 on three rows."""
    rows = "".join(row(f"c{i}", "dgx_h100") for i in range(3)) + row("odd", "dgx_H100")
    files = {"_build.yaml": BUILD.format(v=1), "gpt.yaml": recipe(1, rows)}
    (finding,) = [f for f in checked(files) if f.code != "template"]
    assert finding.location.file == "gpt.yaml"
    text = files["gpt.yaml"].splitlines()
    assert finding.location.line == 1 + next(i for i, t in enumerate(text) if "dgx_H100" in t)
    assert text[finding.location.line - 1][finding.location.column - 1 :].startswith("dgx_H100")
    assert "dgx_H100" in finding.message and "dgx_h100" in finding.message
    assert typo_platforms(generation(files).tree) == frozenset({"dgx_H100"})


def test_a_value_outside_the_declared_vocabulary_is_an_error_with_a_suggestion() -> None:
    files = {
        "matrixgen.yaml": CONFIG,
        "_build.yaml": BUILD.format(v=2),
        "gpt.yaml": recipe(2, row("a", "dgx_h100") + row("b", "dgx_gb20")),
    }
    (finding,) = [f for f in checked(files) if f.code == "vocabulary"]
    assert finding.severity is Severity.ERROR
    assert finding.message.startswith('unknown platform "dgx_gb20" (did you mean "dgx_gb200"?)')
    assert "declared in matrixgen.yaml: dgx_gb200, dgx_h100" in finding.message


def test_a_v2_spec_script_reaches_no_job_and_says_so_at_the_key() -> None:
    files = {
        "matrixgen.yaml": CONFIG,
        "_build.yaml": BUILD.format(v=2),
        "gpt.yaml": recipe(2, row("a", "dgx_h100"), spec_extra="  script: run {test_case}\n"),
    }
    (finding,) = [f for f in checked(files) if f.code == "unused-field"]
    assert finding.severity is Severity.WARNING
    assert (finding.location.line, finding.location.column) == (8, 3)  # spec's script key
    assert finding.message.startswith('spec "script" reaches no emitted job')


def test_a_script_placeholder_no_field_fills_is_reported_once_per_row() -> None:
    """format_version 1: Megatron-LM's launcher reads the script, so a
    placeholder it cannot fill is a warning there."""
    script = "  script: run {test_case} {nope} {n_repeat}\n"
    rows = row("a", "dgx_h100") + row("b", "dgx_h100", scope="L1")
    files = {"_build.yaml": BUILD.format(v=1), "gpt.yaml": recipe(1, rows, spec_extra=script)}
    found = [f for f in checked(files) if f.code == "template"]
    assert [f.message for f in found] == [
        "spec script: placeholder {nope} does not resolve to a field of the job "
        "(write {{ and }} for literal braces)"
    ] * 2
    assert {f.location.line for f in found} == {12, 15}  # each row (line 8: the script)
    assert all(f.severity is Severity.WARNING for f in found)


def test_typos_pick_the_most_used_value_three_times_as_common() -> None:
    assert typos({"dgx_h100": 9, "dgx_h10": 1}) == {"dgx_h10": "dgx_h100"}
    assert typos({"dgx_h100": 2, "dgx_h10": 1}) == {}  # not common enough
    assert typos({"Nightly": 1, "nightly": 5}) == {"Nightly": "nightly"}  # case
    assert typos({"abc": 1, "abcd": 9}) == {}  # too short to judge a dropped letter
    assert typos({"lst": 1, "lts": 9}) == {}  # a swap in too short a value
    assert typos({"mroe": 1, "more": 9}) == {"mroe": "more"}  # two letters swapped


@given(st.dictionaries(st.text("ab_1", min_size=1, max_size=6), st.integers(1, 20), max_size=6))
def test_a_typo_points_to_a_value_at_least_three_times_as_common(counts: dict[str, int]) -> None:
    for rare, common in typos(counts).items():
        assert rare != common and counts[common] >= 3 * counts[rare]
