"""pipeline.py and the refusal policy (validate.require_usable): a Generation
makes each target's selection once and owns that cache (a generation with other
jobs starts afresh), files seen before are neither parsed nor expanded again
when they come with content ids (and never kept without one), the recipe tree
is found from the checkout, and each command's needs decide what refuses a tree."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import matrixgen.engine.expand as expand_module
import matrixgen.pipeline as pipeline_module
from matrixgen.model.errors import RecipeError
from matrixgen.model.jobs import Selector, Target
from matrixgen.model.vocab import System
from matrixgen.pipeline import PipelineCache, default_recipes_dir, generate_from_files
from matrixgen.util.checkout import RECIPES_VARIABLE
from matrixgen.validate import Needs, require_usable

CONFIG = b"""format_version: 2
vocabulary:
  platforms: [dgx_h100, dgx_gb200]
  environments: [dev]
  scopes: {github: [L1], gitlab: [mr]}
"""
BUILD = b"type: build\nformat_version: 2\nspec: {name: img}\n"


def recipe(platform: str = "dgx_h100", extra: str = "") -> bytes:
    return (
        'type: basic\nformat_version: 2\nspec:\n  name: "{test_case}_{platforms}"\n'
        "  model: gpt\n  build: img\n  platforms: dgx_h100\nproducts:\n"
        + "".join(
            f"  - test_case: [{case}]\n    products:\n"
            f"      - {{environment: [dev], scope: [mr, L1], platforms: [{platform}]{extra}}}\n"
            for case in ("a", "b")
        )
    ).encode()


def files(**changes: bytes) -> dict[str, bytes]:
    return {"matrixgen.yaml": CONFIG, "_build.yaml": BUILD, "gpt.yaml": recipe(), **changes}


TARGET = Target(name="t", system=System.GITLAB, selector=Selector(scope="mr"))


def test_a_target_is_selected_once_per_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = pipeline_module.quarantine_selection

    def counting(jobs, entries, target, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(target.name)
        return real(jobs, entries, target, **kwargs)

    monkeypatch.setattr(pipeline_module, "quarantine_selection", counting)
    generation = generate_from_files(files())
    first = generation.selection(TARGET)
    assert generation.selection(TARGET) is first
    assert [j.test_case for j in first.jobs] == ["a", "b"]
    assert calls == ["t"]
    # Another generation of the same files, and one with other jobs, select afresh.
    assert generate_from_files(files()).selection(TARGET) == first
    assert generation.with_jobs(first.jobs[:1]).selection(TARGET).jobs == first.jobs[:1]
    assert calls == ["t", "t", "t"]


def test_the_checked_targets_are_resolved_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = pipeline_module.resolve_targets
    monkeypatch.setattr(
        pipeline_module, "resolve_targets", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    generation = generate_from_files(files())
    targets = generation.checked_targets()
    assert generation.checked_targets() is targets and len(calls) == 1
    assert {t.system for t in targets} == {System.GITHUB, System.GITLAB}


def test_files_with_content_ids_are_expanded_once_and_without_none_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    expanded: list[str] = []
    real = expand_module.expand_file

    def counting(recipe, config, **kwargs):  # type: ignore[no-untyped-def]
        expanded.append(recipe.rel)
        return real(recipe, config, **kwargs)

    monkeypatch.setattr(expand_module, "expand_file", counting)
    ids = {"matrixgen.yaml": "c1", "_build.yaml": "b1", "gpt.yaml": "g1"}
    cache = PipelineCache()
    one = generate_from_files(files(), blob_ids=ids, cache=cache)
    two = generate_from_files(files(), blob_ids=ids, cache=cache)
    assert one.jobs == two.jobs and expanded.count("gpt.yaml") == 1
    # Without content ids nothing is looked up or kept: an object's id() is no key.
    bare = PipelineCache()
    generate_from_files(files(), cache=bare)
    generate_from_files(files(), cache=bare)
    assert bare.expanded == {} and expanded.count("gpt.yaml") == 3


def test_a_broken_quarantine_file_is_among_the_generation_s_findings() -> None:
    generation = generate_from_files(files(**{"quarantine.yaml": b"entries: 3\n"}))
    assert generation.expansion.errors == []
    assert [f.location.file for f in generation.findings] == ["quarantine.yaml"]


def test_what_each_need_refuses() -> None:
    # A value outside the vocabulary: expansion reads the row, validate refuses it.
    typo = generate_from_files(files(**{"gpt.yaml": recipe("dgx_gb20")}))
    assert require_usable(typo, Needs.JOBS) == []
    assert require_usable(typo, Needs.SELECTION) == []
    with pytest.raises(RecipeError) as caught:
        require_usable(typo, Needs.VALID)
    assert caught.value.message == (
        "2 error(s) in .; nothing was generated (run `matrixgen validate` for every finding)"
    )
    assert [f.code for f in caught.value.findings] == ["vocabulary", "vocabulary"]
    # A broken quarantine file: the jobs are sound, their selections are not.
    broken = generate_from_files(files(**{"quarantine.yaml": b"entries: 3\n"}))
    require_usable(broken, Needs.JOBS)
    for needs in (Needs.SELECTION, Needs.VALID):
        with pytest.raises(RecipeError) as caught:
            require_usable(broken, needs)
        assert caught.value.message.startswith("1 error(s) in .; nothing was generated")
        assert [f.code for f in caught.value.findings] == ["quarantine-type"]
    # A row that does not expand refuses every command.
    bad = generate_from_files(files(**{"gpt.yaml": recipe(extra=", n_repeat: often")}))
    with pytest.raises(RecipeError) as caught:
        require_usable(bad, Needs.JOBS)
    assert caught.value.message == "2 error(s) in .; fix them first (run `matrixgen validate`)"
    for needs in (Needs.SELECTION, Needs.VALID):
        with pytest.raises(RecipeError):
            require_usable(bad, needs)


def test_the_recipe_tree_is_found_from_the_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(RECIPES_VARIABLE, raising=False)
    checkout = tmp_path / "checkout"
    (checkout / "tests/test_utils/recipes").mkdir(parents=True)
    (checkout / "deep/er").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    monkeypatch.chdir(checkout / "deep/er")
    # Megatron-LM's layout (no recipes/ at the top); shown from where we are.
    assert default_recipes_dir() == checkout / "tests/test_utils/recipes"
    (checkout / "recipes").mkdir()
    monkeypatch.chdir(checkout)
    assert default_recipes_dir() == Path("recipes")
    outside = tmp_path / "outside"
    outside.mkdir()
    monkeypatch.chdir(outside)
    if subprocess.run(["git", "rev-parse"], cwd=outside, capture_output=True).returncode != 0:
        assert default_recipes_dir() == outside / "recipes"
    monkeypatch.setenv(RECIPES_VARIABLE, "elsewhere/tree")
    assert default_recipes_dir() == Path("elsewhere/tree")
