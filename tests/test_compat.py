"""Megatron-LM compatibility: `list` selects what that project's parser selects.

Two kinds of evidence: small cases whose answers were worked out by hand from the
rules in docs/megatron-format.md, and, when the real tree is present, a comparison over every
scope x platform x environment x cadence against a deliberately naive reading of
those rules written here (plain dicts, no shared code with matrixgen).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from matrixgen.model.jobs import Selector
from matrixgen.pipeline import generate
from tests.conftest import write_tree
from tests.tree_fixtures import HAND_TREE


def selected(cli: Callable, root: Path, *args: str) -> set[str]:
    run = cli("list", "--recipes", root, "--format", "json", *args)
    assert run.code == 0, run
    return {job["test_case"] for job in json.loads(run.out)}


def test_hand_derived_selections(tree: Callable[..., Path], cli: Callable) -> None:
    root = tree(HAND_TREE)
    h100 = ("--platform", "dgx_h100", "--environment", "dev")
    # mr passes through verbatim; mr-github is tier L1.
    assert selected(cli, root, "--scope", "mr", *h100) == {"a_mr_and_github"}
    assert selected(cli, root, "--scope", "mr-github", *h100) == {"a_mr_and_github"}
    assert selected(cli, root, "--scope", "L1", *h100) == {"a_mr_and_github"}
    # nightly and L2 select the same rows; a row without platforms keeps the spec's.
    assert selected(cli, root, "--scope", "nightly", *h100) == {"f_l2_written_as_tier"}
    a100 = ("--platform", "dgx_a100", "--environment", "dev")
    assert selected(cli, root, "--scope", "nightly", *a100) == {"b_nightly_default_platform"}
    assert selected(cli, root, "--scope", "L2", *a100) == {"b_nightly_default_platform"}
    # weekly -> L3, but the block's explicit cadence [pr] wins over the alias's.
    assert selected(cli, root, "--scope", "weekly", *h100) == {"c_weekly_block_cadence"}
    assert selected(cli, root, "--scope", "L3", "--cadence", "weekly", *h100) == set()
    assert selected(cli, root, "--scope", "L3", "--cadence", "pr", *h100) == {
        "c_weekly_block_cadence"
    }
    # An aliased nightly row runs only nightly.
    assert selected(cli, root, "--scope", "L2", "--cadence", "pr", *a100) == set()
    assert selected(cli, root, "--scope", "L2", "--cadence", "nightly", *a100) == {
        "b_nightly_default_platform"
    }
    # mr-github-slim is L0; mr-slim passes through; renamed scopes are their own scope.
    assert selected(cli, root, "--scope", "L0", *h100) == {"d_slim"}
    assert selected(cli, root, "--scope", "mr-slim", *h100) == {"d_slim"}
    assert selected(cli, root, "--scope", "mr-broken", *h100) == {"e_broken"}
    # Default cadence is pr, nightly, mergegroup: a plain mr row runs on merge groups too.
    assert selected(cli, root, "--scope", "mr", "--cadence", "mergegroup", *h100) == {
        "a_mr_and_github"
    }
    assert selected(cli, root, "--scope", "mr", "--cadence", "weekly", *h100) == set()


def test_list_json_fields(tree: Callable[..., Path], cli: Callable) -> None:
    root = tree(HAND_TREE)
    run = cli(
        "list",
        "--recipes",
        root,
        "--scope",
        "nightly",
        "--platform",
        "dgx_a100",
        "--format",
        "json",
    )
    jobs = json.loads(run.out)
    assert {j["test_case"] for j in jobs} == {"b_nightly_default_platform"}
    job = jobs[0]
    required = {
        "model",
        "test_case",
        "tag",
        "environment",
        "platform",
        "scope",
        "cadence",
        "name",
        "n_repeat",
        "time_limit",
    }
    assert required <= job.keys()
    assert job["tag"] is None and job["scope"] == "L2" and job["cadence"] == ["nightly"]
    assert job["name"] == "b_nightly_default_platform_dev_dgx_a100"
    assert job["platform"] == "dgx_a100"


# --- the real tree, against a naive reading of the rules -------------------------------

ALIASES = {"mr-github-slim": "L0", "mr-github": "L1", "nightly": "L2", "weekly": "L3"}
ALIAS_CADENCE = {"nightly": ["nightly"], "weekly": ["weekly"]}


def naive_rows(root: Path) -> list[dict]:
    rows = []
    for path in sorted(root.glob("**/*.yaml")):
        doc = yaml.safe_load(path.read_text())
        for block in doc.get("products") or []:
            if "products" not in block:
                continue
            case = block["test_case"][0]
            for row in block["products"]:
                explicit = row.get("cadence", block.get("cadence"))
                keys = [k for k in row if k != "cadence"]
                for values in itertools.product(*(row[k] for k in keys)):
                    flat = dict(zip(keys, values, strict=True))
                    cadence = explicit if explicit is not None else ["pr", "nightly", "mergegroup"]
                    if "scope" in flat:
                        raw = flat["scope"]
                        flat["scope"] = ALIASES.get(raw, raw)
                        if explicit is None and raw in ALIAS_CADENCE:
                            cadence = ALIAS_CADENCE[raw]
                    job = {**doc["spec"], **flat, "test_case": case, "cadence": cadence}
                    rows.append(job)
    return rows


def naive_select(rows: list[dict], scope: str, platform: str, env: str, cadence: str | None):
    want = ALIASES.get(scope, scope)
    return {
        (r["model"], r["test_case"], r.get("tag"))
        for r in rows
        if r.get("scope") == want
        and r.get("environment") == env
        and r.get("platforms") == platform
        and (cadence is None or cadence in r["cadence"])
    }


def test_every_selection_of_the_real_tree_matches(megatron_dir: Path) -> None:
    rows = naive_rows(megatron_dir)
    generation = generate(megatron_dir)
    raw_scopes = {str(r["scope"]) for r in rows if r.get("scope")} | set(ALIASES)
    scopes = sorted(raw_scopes | set(ALIASES.values()) | {"nightly", "weekly"})
    platforms = sorted({r["platforms"] for r in rows if isinstance(r.get("platforms"), str)})
    environments = sorted({r["environment"] for r in rows if r.get("environment")})
    checked = nonempty = 0
    for scope, platform, env, cadence in itertools.product(
        scopes, platforms, environments, [None, "pr", "nightly", "mergegroup", "weekly"]
    ):
        expected = naive_select(rows, scope, platform, env, cadence)
        jobs = generation.select(
            Selector(scope=scope, platform=platform, environment=env, cadence=cadence)
        )
        got = {(j.model, j.test_case, j.tag) for j in jobs}
        assert got == expected, (scope, platform, env, cadence)
        assert len(jobs) == len(set(j.sort_key() for j in jobs))  # nothing twice
        checked += 1
        nonempty += bool(expected)
    assert checked > 500 and nonempty > 40


def test_real_tree_loads_without_errors(megatron_dir: Path) -> None:
    generation = generate(megatron_dir)
    assert not [f for f in generation.findings if f.severity == "error"]
    assert len(generation.tree.files) == 49
    assert len(generation.tree.builds) == 3
    # Every job of the tree is accounted for: rows times their axes.
    assert len(generation.jobs) == len(naive_rows(megatron_dir))


@pytest.mark.parametrize("legacy,tier", sorted(ALIASES.items()))
def test_legacy_scope_names_select_like_their_tier(megatron_dir: Path, legacy: str, tier: str):
    generation = generate(megatron_dir)
    for platform in ("dgx_h100", "dgx_gb200"):
        a = generation.select(Selector(scope=legacy, platform=platform, environment="dev"))
        b = generation.select(Selector(scope=tier, platform=platform, environment="dev"))
        assert a == b


def test_hand_derived_cases_on_the_real_tree(megatron_dir: Path, cli: Callable) -> None:
    """Rows of the real tree read by hand with the rules of docs/megatron-format.md."""

    def cases(*args: str) -> set[str]:
        return selected(cli, megatron_dir, *args)

    gb200 = ("--platform", "dgx_gb200", "--environment", "dev")
    # gb200/gpt.yaml: a row without platforms keeps the spec's dgx_gb200; its
    # scope nightly is L2 with cadence [nightly] (neither row nor block sets one).
    resume = "gpt3_mcore_tp1_pp2_resume_torch_dist"
    assert resume in cases("--scope", "nightly", *gb200)
    assert resume in cases("--scope", "L2", "--cadence", "nightly", *gb200)
    assert resume not in cases("--scope", "L2", "--cadence", "pr", *gb200)
    assert resume not in cases("--scope", "nightly", "--platform", "dgx_h100")
    # gb200/nemotron.yaml: a row written as the tier L2 with its own cadence
    # [nightly]: the legacy name nightly selects it too.
    nemotron = "nemotron3_5_lightning_nightly_tp1_pp1_cp1_ep8_dgx_gb200"
    assert nemotron in cases("--scope", "nightly", "--cadence", "nightly", *gb200)
    assert nemotron not in cases("--scope", "L2", "--cadence", "pr", *gb200)
    lts = ("--platform", "dgx_gb200", "--environment", "lts")
    assert nemotron not in cases("--scope", "L2", *lts)
    # h100/gpt.yaml: the two weekly rows are L3, run weekly only.
    h100 = ("--platform", "dgx_h100", "--environment", "dev")
    weekly = {
        "gpt3_weekly_mcore_tp2_pp2_current_scaling_native_fp8_tp_pp_sp_tp_overlap",
        "gpt3_weekly_mcore_tp4_cp2_current_scaling_native_fp8_tp_sp_cp_tp_overlap",
    }
    assert cases("--scope", "weekly", *h100) == weekly
    assert cases("--scope", "L3", "--cadence", "weekly", *h100) == weekly
    assert cases("--scope", "weekly", "--cadence", "nightly", *h100) == set()
    # h100/mimo.yaml: a renamed scope passes through verbatim, on the spec's platform.
    assert cases("--scope", "flaky", *h100) == {"mimo_vlm_pretrain_convergence_tp1_pp1_cp1_dp8"}
    # gb200/gpt-perf-dp4.yaml: the allow_failure axis, and a block with two test
    # cases, of which only the first is ever read.
    run = cli("list", "--recipes", megatron_dir, "--scope", "mr", *gb200, "--format", "json")
    jobs = {j["test_case"]: j for j in json.loads(run.out)}
    assert jobs["gpt_583m_perf_gb200_4gpu"]["allow_failure"] is True
    everything = cli("list", "--recipes", megatron_dir, "--format", "json").out
    assert "gpt_583m_perf_async_sched_gb200_4gpu" not in everything
    # h100/mamba-static-inference.yaml: the `dg  x_h100` typo is a platform of its
    # own there too; the case runs nowhere else.
    typo = "hybrid_static_inference_tp1_pp1_2B_cudagraphs"
    assert cases("--scope", "mr", "--platform", "dg  x_h100", "--environment", "dev") == {typo}
    assert typo not in cases("--scope", "mr", *h100)


# --- generated trees, against the same naive reading (no external files) -------------

SCOPES = (
    "mr",
    "mr-slim",
    "nightly",
    "weekly",
    "mr-github",
    "mr-github-slim",
    "L1",
    "L2",
    "mr-broken",
)
PLATFORMS = ("dgx_h100", "dgx_a100", "dgx_gb200")
CADENCES = ("pr", "nightly", "mergegroup", "weekly")


def _some(values: tuple[str, ...]) -> st.SearchStrategy[list[str]]:
    return st.lists(st.sampled_from(values), min_size=1, max_size=3, unique=True)


@st.composite
def v1_trees(draw: st.DrawFn) -> dict[str, str]:
    """A format_version 1 tree whose rows reach every rule of the selection: legacy
    scope names and tiers side by side, a row's cadence, a block's, or neither
    (where an aliased scope sets it), a row's platforms or the spec's default,
    tags, and the same test case in two rows or two files."""
    files: dict[str, str] = {}
    cases = draw(st.lists(st.sampled_from(("c1", "c2", "c3")), min_size=1, max_size=3))
    for index, model in enumerate(draw(_some(("gpt", "moe")))):
        blocks = []
        for case in cases:
            rows = []
            for _ in range(draw(st.integers(1, 2))):
                row: dict = {
                    "environment": draw(_some(("dev", "lts"))),
                    "scope": draw(_some(SCOPES)),
                }
                if draw(st.booleans()):
                    row["platforms"] = draw(_some(PLATFORMS))
                if draw(st.booleans()):
                    row["cadence"] = draw(_some(CADENCES))
                if draw(st.booleans()):
                    row["tag"] = draw(_some(("latest", "legacy")))
                rows.append(row)
            block: dict = {"test_case": [case], "products": rows}
            if draw(st.booleans()):
                block["cadence"] = draw(_some(CADENCES))
            blocks.append(block)
        spec = {
            "name": "{test_case}_{environment}_{platforms}",
            "model": model,
            "build": "mcore-pyt-{environment}",
            "platforms": draw(st.sampled_from(PLATFORMS)),
        }
        document = {"type": "basic", "format_version": 1, "spec": spec, "products": blocks}
        files[f"t{index}/{model}.yaml"] = yaml.safe_dump(document, sort_keys=False)
    for env in ("dev", "lts"):
        build = {"type": "build", "format_version": 1, "spec": {"name": f"mcore-pyt-{env}"}}
        files[f"_build-mcore-{env}.yaml"] = yaml.safe_dump(build)
    return files


@settings(max_examples=40)
@given(v1_trees())
def test_every_selection_of_a_generated_tree_matches(
    tmp_path_factory: pytest.TempPathFactory, files: dict[str, str]
) -> None:
    """What the real tree's comparison above checks, on trees made here: it runs
    wherever the Megatron-LM tree is absent."""
    root = write_tree(tmp_path_factory.mktemp("v1"), files)
    rows = [r for r in naive_rows(root) if "model" in r]
    generation = generate(root)
    for scope, platform, env, cadence in itertools.product(
        (*SCOPES, "L0", "L3"), PLATFORMS, ("dev", "lts"), (None, *CADENCES)
    ):
        expected = naive_select(rows, scope, platform, env, cadence)
        jobs = generation.select(
            Selector(scope=scope, platform=platform, environment=env, cadence=cadence)
        )
        assert {(j.model, j.test_case, j.tag) for j in jobs} == expected, (scope, platform, env)
