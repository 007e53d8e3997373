"""The job graph: builds -> jobs -> needs; missing needs and cycles in `validate`;
`matrixgen graph` in mermaid, dot and json."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matrixgen.model.jobs import Job, spec_needs
from matrixgen.pipeline import generate
from matrixgen.validate import validate
from matrixgen.views.graph import build_graph, target_graph

CONFIG = """\
format_version: 2
vocabulary:
  platforms: [dgx_h100, dgx_gb200]
  environments: [dev]
  scopes: {github: [L1], gitlab: [mr, nightly]}
platforms:
  dgx_h100: {arch: amd64}
  dgx_gb200: {arch: arm64}
graph:
  external:
    gitlab: [prepare-data]
targets:
  mr-h100: {system: gitlab, scope: mr, platform: dgx_h100, environment: dev}
  nightly-h100: {system: gitlab, scope: nightly, platform: dgx_h100, environment: dev}
  l1-h100: {system: github, scope: L1, platform: dgx_h100, environment: dev}
"""


def recipe(model: str, cases: dict[str, str], needs: list[str] | None = None) -> str:
    """A recipe whose jobs are named {test_case}_{environment}; `cases` maps a test
    case to its scope list."""
    lines = [
        "type: basic",
        "format_version: 2",
        "spec:",
        '  name: "{test_case}_{environment}"',
        f"  model: {model}",
        "  build: img-{environment}",
        "  platforms: dgx_h100",
    ]
    if needs is not None:
        lines.append("  needs:")
        lines += [f'    - "{n}"' for n in needs]
    lines.append("products:")
    for case, scopes in cases.items():
        lines += [
            f"  - test_case: [{case}]",
            "    products:",
            f"      - {{environment: [dev], scope: [{scopes}]}}",
        ]
    return "\n".join(lines) + "\n"


def project(config: str = CONFIG, **recipes: str) -> dict[str, str]:
    files = {
        "matrixgen.yaml": config,
        "_build.yaml": "type: build\nformat_version: 2\nspec:\n  name: img-dev\n",
    }
    files.update({f"{name}.yaml": text for name, text in recipes.items()})
    return files


def bare_job(**changes: Any) -> Job:
    """A job built directly, without a tree: test case t of model m, named t_dev."""
    fields: dict[str, Any] = {
        "model": "m",
        "test_case": "t",
        "environment": "dev",
        "platform": "p",
        "tag": None,
        "scope": "mr",
        "cadence": ("pr",),
        "name": "t_dev",
        "build": None,
        "n_repeat": 1,
        "time_limit": 1,
    }
    return Job(**{**fields, **changes})


WARMUP = recipe("gpt", {"warmup": "mr, nightly", "plain": "mr, L1"})
LONG = recipe("long", {"long_a": "nightly", "long_b": "nightly"}, ["warmup_{environment}"])


def graph_findings(root: Path) -> list[str]:
    gen = generate(root)
    return [str(f) for f in validate(gen.tree, gen.expansion) if f.code.startswith("graph")]


def line_of(path: Path, needle: str) -> int:
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(needle)


def test_needs_resolve_inside_a_target(tree: Callable[..., Path]) -> None:
    root = tree(project(gpt=WARMUP, long=LONG))
    assert graph_findings(root) == []
    gen = generate(root)
    nightly = gen.tree.config.target("nightly-h100")
    assert nightly is not None
    result = target_graph(gen, nightly)
    graph = result.graph
    assert graph.has_edge("job:warmup_dev", "job:long_a_dev")
    assert graph.edges["job:warmup_dev", "job:long_b_dev"]["kind"] == "needs"
    # Every job waits for its build image, per architecture of its platform.
    assert all(graph.has_edge("build:img-dev@amd64", n) for n in graph if n.startswith("job:"))
    assert result.missing == [] and result.cycles == []


def test_missing_need_is_located_at_the_needs_entry(
    tree: Callable[..., Path], cli: Callable
) -> None:
    long = recipe("long", {"long_a": "nightly"}, ["prepare-data", "warmup_{environment}"])
    root = tree(project(gpt=recipe("gpt", {"plain": "mr"}), long=long))
    run = cli("validate", "--recipes", root)
    assert run.code == 1, run
    (message,) = [line for line in run.err.splitlines() if "[graph-missing]" in line]
    # The external name resolves; the warm-up job exists in no nightly target.
    line = line_of(root / "long.yaml", "warmup_{environment}")
    assert f"long.yaml:{line}:" in message
    assert 'needs "warmup_dev", which is no job of target(s) nightly-h100' in message


def test_a_need_that_quarantine_skips_says_so(tree: Callable[..., Path]) -> None:
    quarantine = """\
entries:
  - id: warmup-broken
    tracker: "https://tracker.example/1"
    kind: broken
    action: skip
    match: {test_case: warmup}
    where: [gitlab/nightly]
    owner: someone
    reason: it hangs
"""
    files = project(gpt=WARMUP, long=LONG)
    files["quarantine.yaml"] = quarantine
    root = tree(files)
    (message,) = graph_findings(root)
    assert "nightly-h100 (quarantine warmup-broken https://tracker.example/1 skips it)" in message


def test_cycle_across_two_recipes(tree: Callable[..., Path], cli: Callable) -> None:
    ping = recipe("ping", {"ping": "mr"}, ["pong_{environment}"])
    pong = recipe("pong", {"pong": "mr"}, ["ping_{environment}"])
    root = tree(project(ping=ping, pong=pong))
    run = cli("validate", "--recipes", root)
    assert run.code == 1, run
    (message,) = [line for line in run.err.splitlines() if "[graph-cycle]" in line]
    assert "job:ping_dev" not in message  # names, not node ids
    assert re.search(r"ping_dev -> pong_dev -> ping_dev|pong_dev -> ping_dev -> pong_dev", message)
    assert "(in mr-h100)" in message


def test_a_job_that_needs_itself_is_a_cycle(tree: Callable[..., Path]) -> None:
    selfish = recipe("gpt", {"solo": "mr"}, ["{test_case}_{environment}"])
    root = tree(project(gpt=selfish))
    (message,) = graph_findings(root)
    assert "solo_dev -> solo_dev" in message


def test_needs_in_a_github_target_are_a_warning(tree: Callable[..., Path]) -> None:
    needy = recipe("gpt", {"first": "L1", "second": "L1"}, ["first_{environment}"])
    root = tree(project(gpt=needy))
    gen = generate(root)
    found = [f for f in validate(gen.tree, gen.expansion) if f.code.startswith("graph")]
    # `first` needs itself (an error); both jobs sit in a GitHub matrix (a warning).
    codes = sorted((f.code, f.severity.value) for f in found)
    assert codes == [("graph-cycle", "error"), ("graph-github-needs", "warning")]


def test_warm_up_and_parent_job_from_target_settings(tree: Callable[..., Path]) -> None:
    config = CONFIG.replace(
        "  mr-h100: {system: gitlab, scope: mr, platform: dgx_h100, environment: dev}",
        "  mr-h100: {system: gitlab, scope: mr, platform: dgx_h100, environment: dev,"
        " warmup: true, parent_job: generate}",
    )
    three = recipe("gpt", {"c": "mr", "a": "mr", "b": "mr"})
    root = tree(project(config, gpt=three))
    gen = generate(root)
    target = gen.tree.config.target("mr-h100")
    assert target is not None
    result = target_graph(gen, target)
    graph = result.graph
    # The first job in emitted order (a) warms up; the others wait for it.
    assert graph.nodes["job:a_dev"].get("warmup") is True
    assert {b for _, b in graph.out_edges("job:a_dev")} == {"job:b_dev", "job:c_dev"}
    assert all(graph.has_edge("parent:generate", f"job:{x}_dev") for x in "abc")
    assert result.cycles == []


def test_warm_up_plus_needs_can_close_a_cycle(tree: Callable[..., Path]) -> None:
    # The warm-up job (first in order) itself needs another job of the target,
    # which waits for the warm-up: a cycle the emitted pipeline would contain.
    config = CONFIG.replace(
        "  nightly-h100: {system: gitlab, scope: nightly, platform: dgx_h100, environment: dev}",
        "  nightly-h100: {system: gitlab, scope: nightly, platform: dgx_h100,"
        " environment: dev, warmup: true}",
    )
    root = tree(
        project(
            config,
            a=recipe("aaa", {"early": "nightly"}, ["late_{environment}"]),
            z=recipe("zzz", {"late": "nightly"}),
        )
    )
    (message,) = graph_findings(root)
    assert "[graph-cycle]" in message and "early_dev" in message and "late_dev" in message


def test_spec_needs_render_templates() -> None:
    job = bare_job(spec={"needs": ["w_{environment}", "{unknown}", 3], "environment": "dev"})
    assert spec_needs(job) == [(0, "w_dev"), (1, "{unknown}")]


# --------------------------------------------------------------------------- output


def test_graph_command_formats(tree: Callable[..., Path], cli: Callable) -> None:
    root = tree(project(gpt=WARMUP, long=LONG))
    run = cli("graph", "--recipes", root, "--target", "nightly-h100", "--format", "json")
    assert run.code == 0, run
    data = json.loads(run.out)
    ids = {n["id"] for n in data["nodes"]}
    assert ids == {
        "build:img-dev@amd64",
        "job:warmup_dev",
        "job:long_a_dev",
        "job:long_b_dev",
    }
    kinds = sorted((e["from"], e["to"], e["kind"]) for e in data["edges"])
    assert ("job:warmup_dev", "job:long_a_dev", "needs") in kinds
    assert len(kinds) == 3 + 2  # three builds, two needs
    assert data["target"]["name"] == "nightly-h100" and data["missing"] == []

    mermaid = cli("graph", "--recipes", root, "--target", "nightly-h100").out
    assert mermaid.startswith("flowchart LR\n")
    node_lines = [line for line in mermaid.splitlines() if re.match(r"  n\d+[\[(]", line)]
    edge_lines = [line for line in mermaid.splitlines() if re.match(r"  n\d+ -", line)]
    assert len(node_lines) == 4 and len(edge_lines) == 5

    dot = cli("graph", "--recipes", root, "--target", "nightly-h100", "--format", "dot").out
    assert dot.startswith('digraph "nightly-h100" {')
    assert '"job:warmup_dev" -> "job:long_a_dev" [label="needs"];' in dot
    assert dot.count(" -> ") == 5


def test_graph_command_ad_hoc_target_and_unknown_name(
    tree: Callable[..., Path], cli: Callable
) -> None:
    root = tree(project(gpt=WARMUP, long=LONG))
    run = cli(
        "graph",
        "--recipes",
        root,
        "--format",
        "json",
        "--target",
        "system=gitlab,scope=mr,platform=dgx_h100,environment=dev",
    )
    assert run.code == 0, run
    assert {n["id"] for n in json.loads(run.out)["nodes"] if n["kind"] == "job"} == {
        "job:warmup_dev",
        "job:plain_dev",
    }
    bad = cli("graph", "--recipes", root, "--target", "nightly-h10")
    assert bad.code == 2 and 'did you mean "nightly-h100"' in bad.err


def test_graph_command_exits_1_and_draws_missing_nodes(
    tree: Callable[..., Path], cli: Callable
) -> None:
    long = recipe("long", {"long_a": "nightly"}, ["nowhere"])
    root = tree(project(gpt=recipe("gpt", {"plain": "mr"}), long=long))
    run = cli("graph", "--recipes", root, "--target", "nightly-h100")
    assert run.code == 1, run
    assert "MISSING nowhere" in run.out
    assert "long_a_dev needs nowhere" in run.err


def test_whole_tree_graph_without_config(tree: Callable[..., Path], cli: Callable) -> None:
    v1 = recipe("gpt", {"x": "mr", "y": "mr-github"}).replace(
        "format_version: 2", "format_version: 1"
    )
    root = tree(
        {"gpt.yaml": v1, "_build.yaml": "type: build\nformat_version: 1\nspec:\n  name: img-dev\n"}
    )
    run = cli("graph", "--recipes", root, "--format", "json")
    assert run.code == 0, run
    data = json.loads(run.out)
    assert data["target"] is None
    # No arch known without config: one build node without architecture.
    assert {n["id"] for n in data["nodes"]} == {"build:img-dev", "job:x_dev", "job:y_dev"}


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.randoms(use_true_random=False))
def test_output_does_not_depend_on_file_or_block_order(
    tree: Callable[..., Path], rnd: random.Random
) -> None:
    cases = {f"case{i}": "mr, nightly" for i in range(6)}
    order = list(cases)
    rnd.shuffle(order)
    first = recipe("gpt", {c: cases[c] for c in order})
    long = recipe("long", {"long_a": "nightly"}, ["case3_{environment}"])
    names = ["a", "b"]
    rnd.shuffle(names)
    root = tree(project(**{names[0]: first, names[1]: long}))
    gen = generate(root)
    results = []
    for fmt in ("mermaid", "dot", "json"):
        from matrixgen.views.graph import render_graph, tree_graph

        results.append(render_graph(tree_graph(gen), fmt))
    reference = tree(project(a=recipe("gpt", cases), b=long))
    gen = generate(reference)
    from matrixgen.views.graph import render_graph, tree_graph

    assert results == [render_graph(tree_graph(gen), f) for f in ("mermaid", "dot", "json")]


def test_build_graph_marks_quarantined_jobs() -> None:
    from matrixgen.documents.config import DEFAULT_CONFIG
    from matrixgen.model.jobs import QuarantineMark

    marked = bare_job(
        build="img",
        quarantine=QuarantineMark(id="q", tracker="#1", action="allow-failure", kind="flaky"),
    )
    graph = build_graph([marked], DEFAULT_CONFIG).graph
    assert graph.nodes["job:t_dev"]["quarantine"] == "allow-failure"
    assert graph.has_edge("build:img", "job:t_dev")


@pytest.mark.parametrize(
    ("label", "in_dot"),
    [('say "hi"', 'label="say \\"hi\\""'), ("a\\b", 'label="a\\\\b"')],
)
def test_labels_are_escaped(label: str, in_dot: str) -> None:
    from matrixgen.documents.config import DEFAULT_CONFIG
    from matrixgen.views.graph import to_dot, to_mermaid

    job = bare_job(name=label)
    result = build_graph([job], DEFAULT_CONFIG)
    (node,) = [line for line in to_mermaid(result).splitlines() if line.startswith("  n0")]
    assert node.count('"') == 2  # a quote inside a label is written #quot;
    assert in_dot in to_dot(result)


def test_a_cycle_is_reported_in_the_order_its_jobs_wait(tree: Callable[..., Path]) -> None:
    # a waits for d, d for b, b for c, c for a: sorted names (a, b, c, d) are no
    # circuit, and a message listing them so would send people to a wrong edge.
    waits_for = {"a": "d", "d": "b", "b": "c", "c": "a"}
    recipes = {
        case: recipe(f"m{case}", {case: "mr"}, [f"{need}_{{environment}}"])
        for case, need in waits_for.items()
    }
    root = tree(project(**recipes))
    gen = generate(root)
    target = gen.tree.config.target("mr-h100")
    assert target is not None
    (cycle,) = target_graph(gen, target).cycles
    names = [n.removeprefix("job:").removesuffix("_dev") for n in cycle]
    # Each job comes before the next one, which waits for it: a, then c (c waits
    # for a), then b, then d, and a again.
    assert names == ["a", "c", "b", "d"]
    assert all(waits_for[names[(i + 1) % 4]] == names[i] for i in range(4))
    (message,) = graph_findings(root)
    assert "a_dev -> c_dev -> b_dev -> d_dev -> a_dev" in message


def test_graph_command_names_the_cycle_like_validate(
    tree: Callable[..., Path], cli: Callable
) -> None:
    ping = recipe("ping", {"ping": "mr"}, ["pong_{environment}"])
    pong = recipe("pong", {"pong": "mr"}, ["ping_{environment}"])
    root = tree(project(ping=ping, pong=pong))
    run = cli("graph", "--recipes", root, "--target", "mr-h100")
    assert run.code == 1
    assert "matrixgen: cycle: ping_dev -> pong_dev -> ping_dev" in run.err, run.err


def test_graph_refuses_an_ad_hoc_target_outside_the_vocabulary(
    tree: Callable[..., Path], cli: Callable
) -> None:
    root = tree(project(gpt=recipe("gpt", {"a": "mr"})))
    run = cli("graph", "--recipes", root, "--target", "scope=mr,platform=dgx_h10,environment=dev")
    assert run.code == 2 and run.out == "", run
    assert 'unknown platform "dgx_h10" (did you mean "dgx_h100"?)' in run.err
    good = cli("graph", "--recipes", root, "--target", "scope=mr,platform=dgx_h100,environment=dev")
    assert good.code == 0 and "a_dev" in good.out


@given(
    st.lists(
        st.one_of(
            st.none(),
            st.sampled_from(["", "x", 0, {"a": "b"}]),
            st.lists(st.sampled_from(["", "{test_case}_x", "{nope}", "{", 1, None]), max_size=3),
        ),
        max_size=5,
    )
)
def test_any_needs_is_any_jobs_spec_needs(needs: list) -> None:
    from types import MappingProxyType

    from matrixgen.model.jobs import Job, spec_needs
    from matrixgen.views.graph import _any_needs

    jobs = [
        Job(
            model="gpt",
            test_case=f"tc{i}",
            environment="dev",
            platform="dgx_h100",
            tag=None,
            scope="mr",
            cadence=("pr",),
            name=f"n{i}",
            build=None,
            n_repeat=1,
            time_limit=60,
            spec=MappingProxyType({"test_case": f"tc{i}"} | ({} if n is None else {"needs": n})),
        )
        for i, n in enumerate(needs)
    ]
    assert _any_needs(jobs) == any(spec_needs(j) for j in jobs)
