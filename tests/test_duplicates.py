"""Duplicate job definitions: one job per identity and target, the same answer in
validate, list, stats, the emitters and the diff."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matrixgen.emit.generate import generate_all
from matrixgen.engine.targets import resolve_targets
from matrixgen.model.errors import Severity
from matrixgen.model.jobs import Selector
from matrixgen.validate import validate
from matrixgen.views.stats import compute_stats
from tests.diff_fixtures import GPT, block, by_name, diff, gen, v2_tree


def files_of(tree: dict[str, Any]) -> dict[str, str]:
    generation = gen(tree)
    targets = resolve_targets(generation.tree.config, generation.jobs)
    return {o.file: o.text for o in generate_all(generation, targets)}


def findings_of(tree: dict[str, Any]) -> list[Any]:
    generation = gen(tree)
    return validate(generation.tree, generation.expansion, schema=False)


def codes(findings: list[Any]) -> list[str]:
    return sorted(f.code for f in findings)


def across_files(case: str = "gpt_c", **row: Any) -> dict[str, Any]:
    """The tree with `case` defined again, in a second file (gpt-copy.yaml)."""
    copied = copy.deepcopy(GPT)
    copied["products"] = [block(case, scope=["mr"], **row)]
    return v2_tree(**{"h100/gpt-copy.yaml": copied})


def test_agreeing_copies_across_files_are_one_job_and_a_warning() -> None:
    tree = across_files()
    found = [f for f in findings_of(tree) if f.code == "duplicate-job"]
    (finding,) = found
    assert finding.severity is Severity.WARNING
    places = re.findall(r"recipes/h100/gpt(?:-copy)?\.yaml:\d+:\d+", finding.message)
    assert len(places) == 2 and places[0] != places[1]  # every location, each once
    assert "gitlab-mr-h100" in finding.message
    assert files_of(tree) == files_of(v2_tree())
    # list (a selection) and stats count it once.
    generation = gen(tree)
    mr = generation.selection(Selector(scope="mr", platform="dgx_h100", environment="dev"))
    assert [j.test_case for j in mr.jobs].count("gpt_c") == 1
    assert len(mr.jobs[-1].definitions) == 2
    plain = gen(v2_tree())
    targets = list(plain.tree.config.targets)
    assert compute_stats(generation, targets).report == compute_stats(plain, targets).report


def test_agreeing_copies_within_one_file_megatron_style(tree) -> None:  # type: ignore[no-untyped-def]
    """A row `{environment: [dev, lts], scope: [nightly]}` then one adding
    platforms that cover the default platform again (format_version 1)."""
    from matrixgen.pipeline import generate

    root = tree(
        {
            "_build.yaml": "type: build\nformat_version: 1\nspec: {name: b}\n",
            "gpt.yaml": """
                type: basic
                format_version: 1
                spec: {name: "{test_case}_{environment}_{platforms}", model: gpt,
                       build: b, platforms: dgx_a100}
                products:
                  - test_case: [gpt_case]
                    products:
                      - {environment: [dev, lts], scope: [nightly]}
                      - {environment: [dev], scope: [nightly], platforms: [dgx_a100, dgx_h100]}
            """,
        }
    )
    generation = generate(root)
    assert len(generation.jobs) == 4  # expansion keeps both copies ...
    found = [f for f in validate(generation.tree, generation.expansion) if "duplicate" in f.code]
    (finding,) = found
    assert finding.code == "duplicate-job" and finding.severity is Severity.WARNING
    assert "gpt/gpt_case on dgx_a100/dev in scope L2" in finding.message
    lines = [int(n) for n in re.findall(r"gpt\.yaml:(\d+):\d+", finding.message)]
    assert len(lines) == 2 and lines[0] + 1 == lines[1]  # both rows, each once
    selector = Selector(scope="nightly", platform="dgx_a100", environment="dev")
    (job,) = generation.selection(selector).jobs  # ... a target gets one
    assert job.source.line == lines[1]  # the last definition


def test_differing_copies_are_an_error_naming_the_fields() -> None:
    tree = across_files(n_repeat=[2], time_limit=[5400])
    (finding,) = [f for f in findings_of(tree) if "duplicate" in f.code]
    assert finding.code == "duplicate-conflict" and finding.severity is Severity.ERROR
    # The emitted fields that differ (GitLab's timeout and launcher line), each
    # with its value at each location.
    assert "timeout: " in finding.message and "script: " in finding.message
    assert '"3h 45m" at recipes/h100/gpt.yaml:' in finding.message  # 5 x 45 min
    assert '"3h" at recipes/h100/gpt-copy.yaml:' in finding.message  # 2 x 90 min
    assert "generate uses the last, at recipes/h100/gpt.yaml:" in finding.message
    # What it would use: the last definition in file order (gpt.yaml > gpt-copy.yaml).
    mr = files_of(tree)["gitlab-mr-h100.yml"]
    assert mr == files_of(v2_tree())["gitlab-mr-h100.yml"]


def test_differing_copies_in_a_v1_tree_are_a_warning(tree) -> None:  # type: ignore[no-untyped-def]
    from matrixgen.pipeline import generate

    root = tree(
        {
            "a.yaml": """
                type: basic
                format_version: 1
                spec: {name: "{test_case}", model: gpt, platforms: p}
                products:
                  - test_case: [x]
                    products:
                      - {environment: [dev], scope: [mr]}
                      - {environment: [dev], scope: [mr], n_repeat: [1]}
            """,
        }
    )
    generation = generate(root)
    (finding,) = [f for f in validate(generation.tree, generation.expansion) if "dup" in f.code]
    assert finding.code == "duplicate-conflict" and finding.severity is Severity.WARNING


def test_a_diff_of_trees_that_differ_only_in_a_copy_is_a_note() -> None:
    added = by_name(diff(v2_tree(), across_files()))["gitlab-mr-h100"]
    assert added.unchanged
    (note,) = added.duplicates
    assert note.change == "added" and note.job.test_case == "gpt_c"
    assert [str(w).split(":")[0] for w in note.locations] == ["recipes/h100/gpt-copy.yaml"]
    removed = by_name(diff(across_files(), v2_tree()))["gitlab-mr-h100"]
    assert removed.unchanged and [d.change for d in removed.duplicates] == ["removed"]


def test_removing_the_copy_that_won_is_a_change() -> None:
    """gpt.yaml's copy is the last; a differing copy in zz.yaml sorts after it and
    wins; removing it changes the emitted job back."""
    copied = copy.deepcopy(GPT)
    copied["products"] = [block("gpt_c", scope=["mr"], n_repeat=[2])]
    with_copy = v2_tree(**{"h100/zz.yaml": copied})
    mr = by_name(diff(with_copy, v2_tree()))["gitlab-mr-h100"]
    assert mr.added == mr.removed == ()
    (change,) = mr.changed
    assert change.head.test_case == "gpt_c" and list(change.fields) == ["timeout", "script"]
    old, new = change.fields["script"]
    assert "--n-repeat 2" in old[0] and "--n-repeat 5" in new[0]
    assert [d.change for d in mr.duplicates] == ["removed"]


ROWS = [(bi, ri) for bi, b in enumerate(GPT["products"]) for ri in range(len(b["products"]))]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(where=st.sampled_from(ROWS), elsewhere=st.booleans())
def test_duplicating_any_row_never_changes_the_emitted_files(
    where: tuple[int, int], elsewhere: bool
) -> None:
    bi, ri = where
    tree = v2_tree()
    gpt = tree["h100/gpt.yaml"]
    blk = gpt["products"][bi]
    row = copy.deepcopy(blk["products"][ri])
    if elsewhere:
        other = copy.deepcopy(GPT)
        other["products"] = [{"test_case": blk["test_case"], "products": [row]}]
        del other["spec"]["script"]  # unused (its own warning): not what is tested here
        tree["h100/gpt-again.yaml"] = other
    else:
        blk["products"].insert(ri + 1, row)
    assert files_of(tree) == files_of(v2_tree())
    before, after = findings_of(v2_tree()), findings_of(tree)
    new = [f for f in after if f not in before]
    assert new and {f.code for f in new} == {"duplicate-job"}
    assert all(f.severity is Severity.WARNING for f in new)


def test_duplicating_a_row_of_the_shipped_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same on the shipped recipes: a second copy of an L1 row. Each tree is
    generated from the folder above it, as CI does from the top of a checkout:
    a job that hands the quarantine file to the test process names it relative
    to that folder, the same `recipes/quarantine.yaml` for both."""
    import shutil

    from matrixgen.pipeline import generate

    shipped = Path(__file__).parents[1] / "recipes"
    root = tmp_path / "recipes"
    shutil.copytree(shipped, root)
    gpt = root / "h100" / "gpt.yaml"
    text = gpt.read_text()
    line = "      - {environment: [dev], scope: [mr, nightly, L1]}\n"
    assert line in text
    gpt.write_text(text.replace(line, line + line, 1))

    def outputs(where: Path) -> dict[str, str]:
        monkeypatch.chdir(where.parent)
        generation = generate(Path(where.name))
        targets = resolve_targets(generation.tree.config, generation.jobs)
        return {o.file: o.text for o in generate_all(generation, targets)}

    assert outputs(root) == outputs(shipped)
    generation = generate(root)
    found = [f for f in validate(generation.tree, generation.expansion) if "dup" in f.code]
    assert found and all(f.code == "duplicate-job" for f in found)
