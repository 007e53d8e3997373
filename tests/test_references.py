"""model.references: templates, opt-outs, one listing of a reference tree, the
nearest-file hint, fitting listed files back to a template."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from matrixgen.model.references import (
    OptOut,
    ReferenceListing,
    ReferenceSettings,
    ReferenceTemplate,
    TemplateMatcher,
    is_variant,
    list_directory,
    listing_from_paths,
    parse_opt_out,
    root_problem,
    template_problem,
    used_by_dir,
)

GOLDEN = "t/{model}/{test_case}/golden_values_{environment}_{platforms}.json"


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        (GOLDEN, None),
        ("/etc/{model}", "relative to the reference root"),
        ("a/../{model}", '".."'),
        ("a//{model}", "empty"),
        ("a\\{model}", "/ separators"),
        ("a/{model.__class__}", "plain field name"),
        ("a/{model", "malformed"),
    ],
)
def test_template_problems(template: str, problem: str | None) -> None:
    found = template_problem(template)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


def test_root_problems() -> None:
    assert root_problem("") is None
    assert root_problem("refs/golden") is None
    assert root_problem("../elsewhere") is not None
    assert root_problem("/abs") is not None


def test_prefix_is_the_directory_every_template_starts_in() -> None:
    settings = ReferenceSettings(
        templates=(
            ReferenceTemplate("golden", "tests/functional_tests/test_cases/{model}/g.json"),
            ReferenceTemplate("config", "tests/functional_tests/test_cases/{model}/c.yaml"),
            ReferenceTemplate("extra", "tests/functional_tests/other/{model}.json"),
        )
    )
    assert settings.prefix == "tests/functional_tests"
    one = ReferenceSettings(templates=(ReferenceTemplate("g", "{model}/x.json"),))
    assert one.prefix == ""
    fixed = ReferenceSettings(templates=(ReferenceTemplate("g", "a/b/fixed.json"),))
    assert fixed.prefix == "a/b"


def test_gating_takes_names_and_globs() -> None:
    settings = ReferenceSettings(templates=(), gating=("github-*", "gitlab-mr-h100-dev"))
    assert settings.is_gating("github-l0-h100-pr")
    assert settings.is_gating("gitlab-mr-h100-dev")
    assert not settings.is_gating("gitlab-mr-h100-lts")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"skip": "all", "reason": "perf case"}, OptOut(None, "perf case")),
        (
            {"skip": ["golden"], "reason": " no goldens "},
            OptOut(frozenset({"golden"}), "no goldens"),
        ),
        ({"skip": "all"}, "needs a reason"),
        ({"skip": "all", "reason": "  "}, "needs a reason"),
        ({"skip": "none", "reason": "x"}, '"all" or a list'),
        ({"skip": [], "reason": "x"}, '"all" or a list'),
        ({"skip": ["a", "a"], "reason": "x"}, '"all" or a list'),
        ({"skip": "all", "reason": "x", "why": 1}, "unknown key(s) why"),
        ("none", 'not the string "none"'),
    ],
)
def test_opt_outs_need_a_reason_and_a_shape(value: object, expected: OptOut | str) -> None:
    parsed = parse_opt_out(value)
    if isinstance(expected, OptOut):
        assert parsed == expected
    else:
        assert isinstance(parsed, str) and expected in parsed


def test_nearest_file_prefers_the_same_folder_then_the_same_name_elsewhere() -> None:
    listing = listing_from_paths(
        [
            "gpt/case/golden_values_dev_dgx_h100.json",
            "gpt/case/golden_values_dev_dgx_h100_2nd.json",
            "gpt/case/model_config.yaml",
            "moe/moved/golden_values_dev_dgx_gb200.json",
        ]
    )
    # Another platform's file, or the variant, in the case's folder.
    assert listing.nearest("gpt/case/golden_values_dev_dgx_gb200.json") == (
        "gpt/case/golden_values_dev_dgx_h100.json"
    )
    assert listing.nearest("gpt/case/golden_values_lts_dgx_h100_2nd.json") == (
        "gpt/case/golden_values_dev_dgx_h100_2nd.json"
    )
    # A case moved to another model's folder.
    assert listing.nearest("gpt/moved/golden_values_dev_dgx_gb200.json") == (
        "moe/moved/golden_values_dev_dgx_gb200.json"
    )
    assert listing.nearest("gpt/nothing/golden_values_dev_dgx_gb200.json") is None


def test_shown_paths_join_the_root() -> None:
    listing = ReferenceListing(shown_root="refs", files=frozenset({"a/b.json"}))
    assert listing.shown("a/b.json") == "refs/a/b.json"
    assert "a/b.json" in listing.files and "refs/a/b.json" not in listing.files


def test_listing_from_paths_keeps_the_prefix_only() -> None:
    listing = listing_from_paths(["t/a.json", "u/b.json", "tt/c.json"], prefix="t")
    assert listing.files == {"t/a.json"}
    assert not listing_from_paths(["u/b.json"], prefix="t").present


def test_directory_listing_is_one_walk_without_entering_linked_folders(tmp_path: Path) -> None:
    base = tmp_path / "refs"
    (base / "t" / "gpt" / "case").mkdir(parents=True)
    (base / "t" / "gpt" / "case" / "g.json").write_text("{}")
    (base / "outside.json").write_text("{}")
    (base / "t" / "loop").symlink_to(base, target_is_directory=True)
    (base / "t" / "gpt" / "link.json").symlink_to(base / "outside.json")
    listing = list_directory(base, "t", shown_root="refs")
    assert listing.files == {"t/gpt/case/g.json", "t/gpt/link.json"}
    assert listing.present
    absent = list_directory(base, "nope", shown_root="refs")
    assert not absent.present and not absent.files


def test_matcher_reads_known_values_first() -> None:
    template = ReferenceTemplate("golden", GOLDEN)
    known = {"environment": ["dev", "lts"], "platforms": ["dgx_gb200", "dgx_gb200_1node"]}
    matcher = TemplateMatcher.build(template, known)
    assert matcher.fit("t/gpt/c/golden_values_dev_dgx_gb200_1node.json") == {
        "model": "gpt",
        "test_case": "c",
        "environment": "dev",
        "platforms": "dgx_gb200_1node",
    }
    # A value no job uses is still read: the platform after the first "_".
    assert matcher.fit("t/gpt/c/golden_values_lts_dgx_a100.json")["platforms"] == "dgx_a100"
    assert matcher.fit("t/gpt/c/golden_values_lts.json") is None
    assert matcher.fit("t/gpt/c/model_config.yaml") is None
    assert matcher.fit("t/gpt/c/d/golden_values_dev_x.json") is None


def test_a_repeated_placeholder_must_repeat_its_value() -> None:
    matcher = TemplateMatcher.build(ReferenceTemplate("g", "{model}/{model}_ref.json"), {})
    assert matcher.fit("gpt/gpt_ref.json") == {"model": "gpt"}
    assert matcher.fit("gpt/moe_ref.json") is None


def test_variants_of_a_used_file_are_used() -> None:
    used = used_by_dir(["c/golden_values_dev_dgx_h100.json"])
    assert is_variant("c/golden_values_dev_dgx_h100_2nd.json", used)
    assert not is_variant("c/golden_values_dev_dgx_h100.yaml", used)
    assert not is_variant("c/golden_values_dev_dgx.json", used)
    assert not is_variant("d/golden_values_dev_dgx_h100_2nd.json", used)


_words = st.text(
    alphabet=st.characters(blacklist_characters="/{}\\", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=12,
)


@given(
    model=_words,
    case=_words,
    environment=st.sampled_from(["dev", "lts"]),
    platform=st.sampled_from(["dgx_h100", "dgx_gb200", "dgx_gb200_1node", "dgx_a100_x"]),
)
def test_a_rendered_path_fits_back_to_its_values(
    model: str, case: str, environment: str, platform: str
) -> None:
    template = ReferenceTemplate("golden", GOLDEN)
    known = {
        "environment": ["dev", "lts"],
        "platforms": ["dgx_h100", "dgx_gb200", "dgx_gb200_1node"],
    }
    matcher = TemplateMatcher.build(template, known)
    values = {"model": model, "test_case": case, "environment": environment, "platforms": platform}
    path = GOLDEN.format(**values)
    assert matcher.fit(path) == values


def test_many_known_values_fall_back_to_the_plain_split() -> None:
    known = {"test_case": [f"case{i}" for i in range(1000)], "environment": ["dev"]}
    matcher = TemplateMatcher.build(ReferenceTemplate("golden", GOLDEN), known)
    assert "case999" not in matcher.pattern.pattern
    assert matcher.fit("t/gpt/case7/golden_values_dev_dgx_h100.json") == {
        "model": "gpt",
        "test_case": "case7",
        "environment": "dev",
        "platforms": "dgx_h100",
    }


def test_a_crowded_folder_still_gives_a_near_hint() -> None:
    names = [f"c/golden_values_dev_p{i:04d}.json" for i in range(2000)]
    listing = listing_from_paths(names)
    assert listing.nearest("c/golden_values_dev_p1234x.json") == "c/golden_values_dev_p1234.json"
