"""One target syntax for every command: a configured or discovered target's name,
or key=value pairs; the names a command prints are inputs; errors quote what was
typed. Trees without config: no target for holding-pen scopes (unless asked) nor
for a platform validate reports as a typo."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from matrixgen.documents.config import DEFAULT_CONFIG
from matrixgen.engine.checks import typo_platforms
from matrixgen.engine.targets import (
    HOLDING_PEN_SCOPES,
    discover_targets,
    is_holding_pen,
    lookup_target,
    resolve_targets,
)
from matrixgen.model.errors import UsageError
from matrixgen.model.jobs import Job
from matrixgen.pipeline import generate
from tests.emit_fixtures import V2_TREE

BUILD = """
type: build
format_version: 1
spec: {name: mcore-pyt-dev, platforms: [linux/amd64]}
"""

# A format_version 1 tree: real scopes, holding pens, and one mistyped platform
# (used once, against dgx_h100 used many times).
PEN_TREE = {
    "_build-mcore-dev.yaml": BUILD,
    "gpt.yaml": """
type: basic
format_version: 1
spec:
  name: "{test_case}_{environment}_{platforms}"
  model: gpt
  build: mcore-pyt-{environment}
  platforms: dgx_h100
products:
  - test_case: [a]
    products:
      - {environment: [dev], scope: [mr, mr-github], platforms: [dgx_h100]}
  - test_case: [b]
    products:
      - {environment: [dev], scope: [mr], platforms: [dgx_h100]}
  - test_case: [c]
    products:
      - {environment: [dev], scope: [mr], platforms: [dgx_h100]}
  - test_case: [d]
    products:
      - {environment: [dev], scope: [mr-broken, flaky, deprecated], platforms: [dgx_h100]}
  - test_case: [e]
    products:
      - {environment: [dev], scope: [mr-github-temp-disabled, cleanup], platforms: [dgx_h100]}
  - test_case: [f]
    products:
      - {environment: [dev], scope: [mr], platforms: [dgx_h10]}
""",
}


def summary(run) -> dict[str, dict]:
    assert run.code == 0, run
    return {t["target"]: t for t in json.loads(run.out)["targets"]}


# --------------------------------------------------------------------------- the rule


@pytest.mark.parametrize(
    ("scope", "pen"),
    [
        ("mr-broken", True),
        ("mr-github-broken", True),
        ("nightly-broken", True),
        ("mr-github-temp-disabled", True),
        ("flaky", True),
        ("deprecated", True),
        ("cleanup", True),
        ("mr", False),
        ("L1", False),
        ("mr-slim", False),
        ("unit-tests", False),
        ("-broken", False),  # a suffix alone names no scope it was taken from
        ("broken", False),
        ("flaky-nightly", False),
        ("", False),
        (None, False),
    ],
)
def test_holding_pen_rule(scope: str | None, pen: bool) -> None:
    assert is_holding_pen(scope) is pen


@given(st.text(min_size=1, max_size=12).filter(lambda s: "-" not in s))
def test_holding_pen_suffixes_mark_any_scope(base: str) -> None:
    assert is_holding_pen(f"{base}-broken")
    assert is_holding_pen(f"{base}-temp-disabled")
    assert is_holding_pen(base) is (base in HOLDING_PEN_SCOPES)


def test_discovered_targets_leave_out_holding_pens_and_typos(tree: Callable, cli) -> None:
    root = tree(PEN_TREE)
    gen = generate(root)
    assert typo_platforms(gen.tree) == {"dgx_h10"}
    names = [t.name for t in gen.targets()]
    assert names == ["github-L1-dgx_h100-dev", "gitlab-mr-dgx_h100-dev"]
    every = {t.name for t in gen.targets(holding_pen=True)}
    assert every == {
        "github-L1-dgx_h100-dev",
        "gitlab-mr-dgx_h100-dev",
        "gitlab-mr-broken-dgx_h100-dev",
        "gitlab-flaky-dgx_h100-dev",
        "gitlab-deprecated-dgx_h100-dev",
        "gitlab-mr-github-temp-disabled-dgx_h100-dev",
        "gitlab-cleanup-dgx_h100-dev",
    }
    # The library's discovery without the tree's typo judgement keeps the platform.
    assert "gitlab-mr-dgx_h10-dev" in {t.name for t in discover_targets(gen.jobs)}

    default = summary(cli("generate", "--recipes", root, "--out", root / "o", "--format", "json"))
    assert sorted(default) == names
    assert default["gitlab-mr-dgx_h100-dev"]["jobs"] == 3
    pens = summary(
        cli("generate", "--recipes", root, "--out", root / "p", "--format", "json", "--holding-pen")
    )
    assert set(pens) == every
    assert not (root / "o" / "gitlab-mr-broken-dgx_h100-dev.yml").exists()
    assert (root / "p" / "gitlab-mr-broken-dgx_h100-dev.yml").exists()


def test_stats_and_diff_follow_the_same_rule(tree: Callable, cli) -> None:
    root = tree(PEN_TREE)
    stats = json.loads(cli("stats", "--recipes", root, "--format", "json").out)
    text = json.dumps(stats)
    assert "gitlab-mr-dgx_h100-dev" in text
    assert "mr-broken" not in text and "dgx_h10-" not in text
    run = cli("stats", "--recipes", root, "--holding-pen")
    assert run.code == 0 and "gitlab-mr-broken-dgx_h100-dev" in run.out


def test_megatron_holding_pens_and_typo_get_no_target(megatron_dir: Path) -> None:
    gen = generate(megatron_dir)
    scopes = {t.selector.scope for t in gen.targets()}
    assert {"mr", "mr-slim", "L0", "L1", "L2", "L3", "L0-smoke", "unit-tests"} == scopes
    assert {t.selector.platform for t in gen.targets()} == {"dgx_h100", "dgx_gb200", "dgx_a100"}
    pens = {t.selector.scope for t in gen.targets(holding_pen=True)} - scopes
    assert pens == {
        "mr-broken",
        "mr-github-broken",
        "nightly-broken",
        "mr-github-temp-disabled",
        "flaky",
        "deprecated",
        "cleanup",
    }


# --------------------------------------------------------------------------- one syntax


def test_every_printed_name_is_an_input_without_config(tree: Callable, cli) -> None:
    root = tree(PEN_TREE)
    printed = summary(cli("generate", "--recipes", root, "--out", root / "o", "--format", "json"))
    for name, row in printed.items():
        one = summary(
            cli(
                "generate",
                "--recipes",
                root,
                "--out",
                root / name,
                "--target",
                name,
                "--format",
                "json",
            )
        )
        assert list(one) == [name] and one[name]["jobs"] == row["jobs"]
        listed = cli("list", "--recipes", root, "--target", name, "--format", "json")
        assert listed.code == 0, listed
        assert len(json.loads(listed.out)) == row["jobs"]
        assert {j["target"] for j in json.loads(listed.out)} == {name}
        command = row["system"]
        emitted = cli(command, "--recipes", root, "--target", name)
        assert emitted.code == 0, emitted
        assert cli("graph", "--recipes", root, "--target", name).code == 0
        assert cli("stats", "--recipes", root, "--target", name).code == 0
    # A holding pen asked for by name is there.
    pen = cli("gitlab", "--recipes", root, "--target", "gitlab-mr-broken-dgx_h100-dev")
    assert pen.code == 0 and "d_dev_dgx_h100" in pen.out


@pytest.mark.parametrize(
    ("said", "target"),
    [
        ("gitlab-nightly-dgx_h100-dev", "gitlab-L2-dgx_h100-dev"),  # --scope nightly: L2
        ("gitlab-weekly-dgx_h100-dev", "gitlab-L3-dgx_h100-dev"),
        ("gitlab-nightly-dgx_a100-lts", "gitlab-L2-dgx_a100-lts"),
        ("github-mr-github-dgx_h100-dev", "github-L1-dgx_h100-dev"),
        ("github-mr-github-slim-dgx_h100-dev", "github-L0-dgx_h100-dev"),
    ],
)
def test_megatron_pipelines_are_named_as_users_say_them(
    megatron_dir: Path, cli, said: str, target: str
) -> None:
    # The legacy scope name of a tier names the same target: the same bytes, with
    # the printed name of today (the tier's).
    command = said.split("-", 1)[0]
    asked = cli(command, "--recipes", megatron_dir, "--target", said)
    printed = cli(command, "--recipes", megatron_dir, "--target", target)
    assert asked.code == printed.code == 0, asked
    assert asked.out == printed.out and asked.out
    if command == "gitlab":
        assert f"target {target} (system=gitlab" in asked.out.splitlines()[0]
    listed = cli("list", "--recipes", megatron_dir, "--target", said, "--format", "json")
    assert {j["target"] for j in json.loads(listed.out)} == {target}
    # Both names of one target are one target.
    twice = cli("list", "--recipes", megatron_dir, "--target", said, "--target", target)
    assert twice.code == 2 and f'target "{target}" is given twice' in twice.err


def test_megatron_nightly_typo_suggests_the_nightly_pipeline(megatron_dir: Path, cli) -> None:
    run = cli("gitlab", "--recipes", megatron_dir, "--target", "gitlab-nightlyy-dgx_h100-dev")
    assert run.code == 2
    assert 'did you mean "gitlab-nightly-dgx_h100-dev"?' in run.err


def test_legacy_names_only_for_the_tier_of_the_same_system() -> None:
    jobs = [
        Job(
            model="gpt",
            test_case="a",
            environment="dev",
            platform="p",
            tag=None,
            scope=scope,
            cadence=("pr",),
            name="a",
            build=None,
            n_repeat=1,
            time_limit=60,
        )
        for scope in ("L2", "mr")
    ]
    assert lookup_target("gitlab-nightly-p-dev", DEFAULT_CONFIG, jobs).name == "gitlab-L2-p-dev"
    # No L3 job: weekly names no target; mr has no legacy name; L2 is GitLab's.
    for name in ("gitlab-weekly-p-dev", "github-nightly-p-dev", "gitlab-mr-github-p-dev"):
        with pytest.raises(UsageError, match="no target has this name"):
            lookup_target(name, DEFAULT_CONFIG, jobs)


def test_names_and_pairs_on_a_configured_tree(tree: Callable, cli) -> None:
    root = tree(V2_TREE)
    by_name = cli("github", "--recipes", root, "--target", "gh-l1-h100")
    by_alias = cli("github", "--recipes", root, "--target-name", "gh-l1-h100")
    by_pairs = cli(
        "github",
        "--recipes",
        root,
        "--target",
        "scope=L1,platform=dgx_h100,environment=dev,cadence=pr",
    )
    assert by_name.code == by_alias.code == by_pairs.code == 0, (by_name, by_pairs)
    assert by_name.out == by_alias.out == by_pairs.out
    printed = summary(cli("generate", "--recipes", root, "--out", root / "o", "--format", "json"))
    for name, row in printed.items():
        run = cli(row["system"], "--recipes", root, "--target", name)
        assert run.code == 0, run
        assert cli("list", "--recipes", root, "--target", name).code == 0


def test_errors_quote_what_was_typed(tree: Callable, cli) -> None:
    root = tree(V2_TREE)
    typo = cli("github", "--recipes", root, "--target", "gh-l1-h10")
    assert typo.code == 2
    assert '--target "gh-l1-h10"' in typo.err and 'did you mean "gh-l1-h100"' in typo.err
    assert "system=github" not in typo.err  # the value is not rewritten
    wrong = cli("gitlab", "--recipes", root, "--target", "gh-l1-h100")
    assert wrong.code == 2 and '--target "gh-l1-h100"' in wrong.err and "github" in wrong.err
    bad_key = cli("generate", "--recipes", root, "--out", root / "o", "--target", "scop=mr")
    assert bad_key.code == 2 and '--target "scop=mr"' in bad_key.err
    two = cli("github", "--recipes", root, "--target", "gh-l1-h100", "--target", "gh-l0-gb200")
    assert two.code == 2 and "one target at a time" in two.err
    graph = cli("graph", "--recipes", root, "--target", "nope")
    assert graph.code == 2 and '--target "nope"' in graph.err
    both = cli("list", "--recipes", root, "--target", "gl-mr-h100", "--scope", "mr")
    assert both.code == 2 and "--scope" in both.err
    for run in (typo, wrong, bad_key, two, graph, both):
        assert "Traceback" not in run.err


def test_lookup_prefers_a_name_then_pairs() -> None:
    jobs = [
        Job(
            model="gpt",
            test_case="a",
            environment="dev",
            platform="p=1",
            tag=None,
            scope="mr",
            cadence=("pr",),
            name="a",
            build=None,
            n_repeat=1,
            time_limit=60,
        )
    ]
    named = lookup_target("gitlab-mr-p=1-dev", DEFAULT_CONFIG, jobs)
    assert named.selector.platform == "p=1"
    pairs = lookup_target("scope=mr,platform=x,environment=dev", DEFAULT_CONFIG, jobs)
    assert pairs.name == "gitlab-mr-x-dev"
    with pytest.raises(UsageError, match='--target "gitlab-mr-p-dev": no target has this name'):
        lookup_target("gitlab-mr-p-dev", DEFAULT_CONFIG, jobs)
    assert resolve_targets(DEFAULT_CONFIG, jobs, values=["gitlab-mr-p=1-dev"]) == [named]


def test_diff_takes_the_same_names_and_leaves_out_the_same_targets() -> None:
    from matrixgen.diff.compare import diff_generations
    from matrixgen.pipeline import generate_from_files

    files = {k: v.lstrip("\n").encode() for k, v in PEN_TREE.items()}
    head_files = dict(files)
    head_files["gpt.yaml"] = files["gpt.yaml"] + (
        b"  - test_case: [g]\n    products:\n"
        b"      - {environment: [dev], scope: [mr-broken, mr], platforms: [dgx_h100]}\n"
    )
    base, head = generate_from_files(files), generate_from_files(head_files)
    default = diff_generations(base, head)
    assert [t.target.name for t in default.targets] == [
        "github-L1-dgx_h100-dev",
        "gitlab-mr-dgx_h100-dev",
    ]
    pens = diff_generations(base, head, holding_pen=True)
    # A holding pen is no system's target: it is named as one (diff.compare).
    assert "holding-pen-mr-broken-dgx_h100-dev" in {t.target.name for t in pens.targets}
    named = diff_generations(base, head, values=["gitlab-mr-broken-dgx_h100-dev"])
    (only,) = named.targets
    assert [j.test_case for j in only.added] == ["g"]
    pairs = diff_generations(base, head, values=["scope=mr,platform=dgx_h100,environment=dev"])
    assert [j.test_case for j in pairs.targets[0].added] == ["g"]
    with pytest.raises(UsageError, match='--target "gitlab-mr-broken-dgx_h100-de"'):
        diff_generations(base, head, values=["gitlab-mr-broken-dgx_h100-de"])


def _discovered_job_by_job(jobs, holding_pen: bool, exclude: frozenset[str]) -> list[str]:
    """Discovery's rule, tested on each job."""
    from matrixgen.engine.targets import default_system, target_name
    from matrixgen.model.jobs import Selector

    seen = sorted(
        {
            (j.scope, j.platform, j.environment)
            for j in jobs
            if j.scope
            and j.platform
            and j.environment
            and j.platform not in exclude
            and (holding_pen or not is_holding_pen(j.scope))
        }
    )
    return [
        target_name(default_system(s), Selector(scope=s, platform=p, environment=e))
        for s, p, e in seen
    ]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["mr", "L0", "flaky", "mr-broken", "", None, "nightly"]),
            st.sampled_from(["dgx_h100", "dgx_h10", ""]),
            st.sampled_from(["dev", "lts", ""]),
        ),
        max_size=12,
    ),
    st.booleans(),
    st.sets(st.sampled_from(["dgx_h10", "dgx_a100"])),
)
def test_discovery_is_the_rule_on_each_job(triples: list, holding_pen: bool, exclude: set) -> None:
    jobs = [
        Job(
            model="gpt",
            test_case=f"tc{i}",
            environment=environment,
            platform=platform,
            tag=None,
            scope=scope,
            cadence=("pr",),
            name=f"n{i}",
            build=None,
            n_repeat=1,
            time_limit=60,
        )
        for i, (scope, platform, environment) in enumerate(triples)
    ]
    found = discover_targets(jobs, holding_pen=holding_pen, exclude_platforms=exclude)
    assert [t.name for t in found] == _discovered_job_by_job(jobs, holding_pen, frozenset(exclude))
    assert len({t.name for t in found}) == len(found)
