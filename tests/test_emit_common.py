"""What the emitters share: settings resolved from the config, a recipe's own
timeout, the emitted-job value, and the check of an ad hoc `--target`."""

from __future__ import annotations

import pytest
import yaml

from matrixgen.emit.common import (
    EmittedJob,
    check_ad_hoc_target,
    recipe_timeout,
)
from matrixgen.emit.registry import resolve_settings
from matrixgen.engine.targets import parse_target
from matrixgen.model.errors import ConfigError, UsageError
from matrixgen.pipeline import generate_from_files
from matrixgen.systems.github.emitter import github_jobs
from matrixgen.systems.gitlab.emitter import emit_gitlab
from tests.emit_fixtures import V1_TREE, V2_TREE, bare_settings, make_job, tree_files, v2_generation

# --------------------------------------------------------------------------- timeouts


def _with_timeout(timeout: str):  # type: ignore[no-untyped-def]
    """The jobs and settings of the fixture's gl-nightly-h100-lts with another
    `timeout`, as YAML writes it."""
    files = tree_files(V2_TREE)
    config = files["matrixgen.yaml"].decode()
    assert config.count("timeout: 7200") == 1
    files["matrixgen.yaml"] = config.replace("timeout: 7200", f"timeout: {timeout}").encode()
    gen = generate_from_files(files, root="fixture")
    target = gen.tree.config.target("gl-nightly-h100-lts")
    assert target is not None
    jobs = gen.jobs_for(target)
    return jobs, resolve_settings(target, gen.tree.config, jobs)


def test_a_target_timeout_of_one_second_is_the_smallest_allowed() -> None:
    jobs, settings = _with_timeout("1")
    assert jobs and all(settings.timeout_seconds(j) == 1 for j in jobs)
    for bad, why in [
        ("0", "0 is less than the minimum of 1"),
        ("-60", "-60 is less than the minimum of 1"),
        ("1.5", "1.5 is not of type 'integer'"),
        ("true", "True is not of type 'integer'"),
        ('"60"', "'60' is not of type 'integer'"),
    ]:
        with pytest.raises(ConfigError) as info:
            _with_timeout(bad)
        assert [f.message for f in info.value.findings] == [
            f"targets/gl-nightly-h100-lts/timeout: {why}"
        ]


def test_a_recipe_timeout_counts_from_one_second_else_the_derived_one_applies() -> None:
    assert recipe_timeout(make_job(spec={"timeout": 1})) == 1
    assert recipe_timeout(make_job(spec={"timeout": 5400})) == 5400
    for ignored in (0, -1, True, 1.5, "60", None):
        assert recipe_timeout(make_job(spec={"timeout": ignored})) is None
    # Emitted: 1 s as written; 0 falls back to n_repeat x time_limit (1 x 60 s).
    text = emit_gitlab(
        [
            make_job("one", name="one", spec={"timeout": 1}),
            make_job("zero", name="zero", spec={"timeout": 0}),
        ],
        bare_settings(),
    ).text
    doc = yaml.safe_load(text)
    assert (doc["one"]["timeout"], doc["zero"]["timeout"]) == ("1s", "1m")


# --------------------------------------------------------------------------- emitted jobs


def test_emitted_jobs_are_values_nobody_can_rebind() -> None:
    # generate, the diff and both emitters read the same EmittedJob values.
    gen = v2_generation()
    target = gen.tree.config.target("gh-l1-h100")
    assert target is not None
    jobs = gen.jobs_for(target)
    (first, *_) = github_jobs(jobs, resolve_settings(target, gen.tree.config, jobs))
    assert isinstance(first, EmittedJob)
    with pytest.raises(AttributeError, match="immutable"):
        first.content = {}  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        first.skipped = True  # type: ignore[misc]


# --------------------------------------------------------------------------- ad hoc targets


def _check(spec: str, tree: dict[str, str] = V2_TREE) -> None:
    gen = generate_from_files(tree_files(tree), root="fixture")
    config = gen.tree.config
    check_ad_hoc_target(parse_target(spec, config), [(config, gen.jobs)])


def test_an_ad_hoc_scope_is_matched_by_the_tier_it_selects() -> None:
    # mr-github is Megatron-LM's old name of L1, which the vocabulary declares.
    _check("system=github,scope=mr-github,platform=dgx_h100,environment=dev")
    _check("system=github,scope=L1,platform=dgx_h100,environment=dev,tag=latest")
    # A scope of the other system: the hint names it.
    with pytest.raises(UsageError) as info:
        _check("system=github,scope=mr,platform=dgx_h100,environment=dev")
    assert str(info.value) == (
        'target github-mr-dgx_h100-dev: unknown github scope "mr" '
        "(a gitlab scope: give system=gitlab); declared: L0, L1"
    )


@pytest.mark.parametrize(
    ("field", "value", "what", "hint"),
    [
        ("platform", "dgx_h10", "platform", ' (did you mean "dgx_h100"?)'),
        ("environment", "lst", "environment", ' (did you mean "lts"?)'),
        ("tag", "lates", "tag", ' (did you mean "latest"?)'),
    ],
)
def test_an_unknown_ad_hoc_value_is_named_with_its_field(
    field: str, value: str, what: str, hint: str
) -> None:
    values = {"platform": "dgx_h100", "environment": "dev", field: value}
    spec = "system=gitlab,scope=mr," + ",".join(f"{k}={v}" for k, v in values.items())
    with pytest.raises(UsageError) as info:
        _check(spec)
    assert f'unknown {what} "{value}"{hint}; declared: ' in str(info.value)


def test_without_a_vocabulary_an_unused_ad_hoc_value_is_refused() -> None:
    # As strict as a declared vocabulary: the values the jobs use are the known ones.
    spec = "system=gitlab,scope=mr,platform=dgx_h100,environment=dve"
    with pytest.raises(UsageError) as info:
        _check(spec, V1_TREE)
    assert str(info.value).startswith(
        'target gitlab-mr-dgx_h100-dve: environment "dve": no job of the tree has this '
        'environment (did you mean "dev"?); used: '
    )
    # A legacy name and its tier are both a used scope.
    _check("system=gitlab,scope=L2,platform=dgx_h100,environment=dev", V1_TREE)
    _check("system=gitlab,scope=nightly,platform=dgx_h100,environment=dev", V1_TREE)


# --------------------------------------------------------------------------- images


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "dgx_gb200: {arch: arm64, ",
            "dgx_gb200: {",
            'images.gitlab pins an image per architecture, but platform "dgx_gb200" has none: '
            "set platforms.dgx_gb200.arch (amd64 or arm64)",
        ),
        (
            "arm64: {repository: registry.example.com/ci, tag: 26.09-arm64}",
            "",
            'no image pinned for architecture "arm64" (platform "dgx_gb200") under images.gitlab',
        ),
    ],
)
def test_an_image_pinned_per_architecture_needs_the_platforms_arch_and_its_pin(
    old: str, new: str, message: str
) -> None:
    files = tree_files(V2_TREE)
    config = files["matrixgen.yaml"].decode()
    assert config.count(old) == 1
    files["matrixgen.yaml"] = config.replace(old, new).encode()
    gen = generate_from_files(files, root="fixture")
    target = gen.tree.config.target("gl-mr-gb200")
    assert target is not None
    with pytest.raises(ConfigError) as info:
        resolve_settings(target, gen.tree.config, gen.jobs_for(target))
    [found] = info.value.findings
    assert (found.code, found.message) == ("settings", message)
    # At the pin the message names: the value of images.gitlab.
    located = files["matrixgen.yaml"].decode().splitlines()[found.location.line - 1]
    assert located.strip().startswith("amd64: {repository: registry.example.com/ci")
