"""Trigger decisions (`decisions` in the project config, `matrixgen decide`,
`generate --event`) and job timeouts derived from the work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from matrixgen.decide.decision import decide
from matrixgen.documents.config import parse_config
from matrixgen.emit.common import EmitSettings, recipe_timeout
from matrixgen.model.errors import ConfigError, ExitCode, UsageError
from matrixgen.model.jobs import Job, Selector, Target
from matrixgen.model.vocab import System
from tests.conftest import run_cli
from tests.tree_fixtures import SHIPPED

# The decision table of the seed's GitHub workflow, row by row, as the shipped
# config must model it: (event, labels) -> (scope, n_repeat, lightweight, cadence).
TABLE = [
    ("merge_group", [], "L1", 1, False, "mergegroup"),
    ("pull_request", ["Run tests"], "L1", 1, True, "any"),
    ("pull_request", ["Run functional tests"], "L1", 5, False, "any"),
    ("schedule", [], "L1", 5, False, "nightly"),
    ("workflow_dispatch", [], "L1", 5, False, "nightly"),
    ("pull_request", [], "L0", 5, False, "pr"),
]


def shipped_decision(event: str, labels: list[str], *extra: str) -> dict:
    args = ["decide", "--recipes", str(SHIPPED), "--event", event, "--format", "json"]
    args += ["--system", "github", *extra]
    for label in labels:
        args += ["--label", label]
    run = run_cli(args)
    assert run.code == 0, run.err
    return json.loads(run.out)


@pytest.mark.usefixtures("pinned_today")
@pytest.mark.parametrize(("event", "labels", "scope", "n_repeat", "light", "cadence"), TABLE)
def test_the_shipped_config_models_every_row_of_the_table(
    event: str, labels: list[str], scope: str, n_repeat: int, light: bool, cadence: str
) -> None:
    decision = shipped_decision(event, labels)
    assert (decision["scope"], decision["n_repeat"], decision["lightweight"]) == (
        scope,
        n_repeat,
        light,
    )
    assert decision["cadence"] == cadence
    assert decision["environment"] is None  # each target's own (dev)
    assert decision["targets"], "a decision that runs nothing"
    platforms = {"l0": {"h100", "gb200"}, "l1": {"h100", "gb200", "gb200-1node"}}
    tier = scope.lower()
    # One target per platform the tier runs on, every one of the decided cadence.
    assert len(decision["targets"]) == len(platforms[tier])
    assert all(name.startswith(f"github-{tier}-") for name in decision["targets"])
    assert all(name.endswith(f"-{cadence}") for name in decision["targets"])


@pytest.mark.usefixtures("pinned_today")
def test_labels_combine_by_precedence() -> None:
    # Both run labels: "Run tests" is listed first and wins every field it sets.
    both = shipped_decision("pull_request", ["Run functional tests", "Run tests"])
    assert (both["n_repeat"], both["lightweight"]) == (1, True)
    assert both["set_by"]["n_repeat"] == 'label "Run tests"'
    # container::lts switches the environment and nothing else, whatever else is on.
    lts = shipped_decision("pull_request", ["container::lts"])
    assert (lts["scope"], lts["environment"], lts["n_repeat"]) == ("L0", "lts", 5)
    assert lts["set_by"]["environment"] == 'label "container::lts"'
    assert all("-lts-" in name for name in lts["targets"])
    combined = shipped_decision("pull_request", ["Run tests", "container::lts"])
    assert (combined["scope"], combined["environment"], combined["lightweight"]) == (
        "L1",
        "lts",
        True,
    )
    assert combined["rules"] == [
        "event pull_request",
        'label "Run tests"',
        'label "container::lts"',
    ]


@pytest.mark.usefixtures("pinned_today")
def test_labels_only_count_on_events_that_carry_them() -> None:
    """A merge group has no pull-request labels: a label given there changes nothing."""
    decision = shipped_decision("merge_group", ["Run tests"])
    assert decision["scope"] == "L1" and decision["n_repeat"] == 1
    assert decision["rules"] == ["event merge_group"]


@pytest.mark.usefixtures("pinned_today")
def test_labels_json_ignores_and_reports_unknown_labels() -> None:
    run = run_cli(
        [
            "decide",
            "--recipes",
            str(SHIPPED),
            "--event",
            "pull_request",
            "--labels-json",
            '["bug", "Run tests"]',
            "--format",
            "json",
        ]
    )
    assert run.code == 0, run.err
    decision = json.loads(run.out)
    assert decision["ignored_labels"] == ["bug"] and decision["scope"] == "L1"


@pytest.mark.usefixtures("pinned_today")
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--event", "pull_requst"], 'did you mean "pull_request"'),
        (["--event", "pull_request", "--label", "Run test"], 'did you mean "Run tests"'),
        (["--event", "schedule"], "give --system"),
        (["--event", "pull_request", "--labels-json", "{"], "--labels-json: not JSON"),
        (["--event", "pull_request", "--labels-json", '{"a": 1}'], "a JSON list of strings"),
        (
            ["--event", "pull_request", "--labels-json", "[" * 60_000 + "]" * 60_000],
            "--labels-json: nested deeper than 100 levels (at 1:101)",
        ),
        (
            ["--event", "pull_request", "--labels-json", '["' + "x" * (16 << 20) + '"]'],
            "bytes, more than the 16,777,216 a JSON input may have",
        ),
        (["--event", "pull_request", "--labels-json", "[NaN]"], "NaN is not a JSON value"),
        ([], "needs --event"),
    ],
)
def test_unknown_events_and_labels_are_usage_errors(args: list[str], message: str) -> None:
    run = run_cli(["decide", "--recipes", str(SHIPPED), *args])
    assert run.code == ExitCode.USAGE, (run.code, run.err)
    assert message in run.err
    assert "Traceback" not in run.err


@pytest.mark.usefixtures("pinned_today")
def test_markdown_is_a_job_summary_and_escapes_labels() -> None:
    run = run_cli(
        [
            "decide",
            "--recipes",
            str(SHIPPED),
            "--event",
            "pull_request",
            "--labels-json",
            '["<img src=x onerror=alert(1)>", "[x](javascript:alert(1))", "Run tests"]',
            "--format",
            "markdown",
        ]
    )
    assert run.code == 0, run.err
    assert run.out.startswith("### matrixgen decision: github event pull\\_request")
    assert "| scope | L1 | label &quot;Run tests&quot; |" in run.out
    from markdown_it import MarkdownIt

    # Rendered the way GitHub renders a summary (raw HTML allowed): the labels
    # stay text, no tag or link comes out of them.
    html = MarkdownIt("commonmark", {"html": True}).render(run.out)
    assert "<img" not in html and "<a " not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


@pytest.mark.usefixtures("pinned_today")
def test_github_output_of_decide(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "github_output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(out))
    run = run_cli(
        ["decide", "--recipes", str(SHIPPED), "--event", "merge_group", "--github-output"]
    )
    assert run.code == 0, run.err
    text = out.read_text()
    assert "scope<<" in text and "\nL1\n" in text and "\nmergegroup\n" in text
    assert "github-l1-h100-mergegroup" in text


# --- generate --event ------------------------------------------------------


@pytest.mark.usefixtures("pinned_today")
def test_generate_event_writes_exactly_the_decided_targets_with_overrides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outputs = tmp_path / "github_output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(outputs))
    out = tmp_path / "out"
    run = run_cli(
        [
            "generate",
            "--recipes",
            str(SHIPPED),
            "--out",
            str(out),
            "--event",
            "pull_request",
            "--label",
            "Run tests",
            "--github-output",
            "--format",
            "json",
        ]
    )
    assert run.code == 0, run.err
    decided = shipped_decision("pull_request", ["Run tests"])
    assert sorted(p.stem for p in out.glob("[!.]*")) == sorted(decided["targets"])
    rows = json.loads((out / "github-l1-h100-dev-any.json").read_text())["include"]
    assert rows
    # Cadence bypassed: the merge-group-only cases run too.
    full = run_cli(
        [
            "list",
            "--recipes",
            str(SHIPPED),
            "--scope",
            "L1",
            "--platform",
            "dgx_h100",
            "--format",
            "json",
        ]
    )
    assert len(rows) == len(json.loads(full.out))
    for row in rows:
        assert row["lightweight"] is True
        # n_repeat 1 where the recipe leaves it to the default; cases that set
        # their own keep it (they all run once here).
        assert row["n_repeat"] == 1
    text = outputs.read_text()
    # Every output group of the workflow is written; the L0 ones run nothing.
    for group in ("l0-h100", "l0-gb200", "l1-h100", "l1-gb200", "l1-gb200-1node"):
        assert f"{group}-shards<<" in text and f"\n{group}<<" in f"\n{text}"
    assert "l0-h100-shards<<" in text
    blocks = _outputs(text)
    assert blocks["l0-h100-shards"] == "0" and blocks["l1-h100-shards"] == "1"
    assert json.loads(blocks["l0-h100"]) == {"include": []}
    assert json.loads(blocks["l1-h100"])["include"] == rows


def _outputs(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    lines = iter(text.splitlines())
    for line in lines:
        name, _, delimiter = line.partition("<<")
        value = []
        for inner in lines:
            if inner == delimiter:
                break
            value.append(inner)
        found[name] = "\n".join(value)
    return found


@pytest.mark.usefixtures("pinned_today")
def test_generate_event_refuses_targets_too(tmp_path: Path) -> None:
    run = run_cli(
        [
            "generate",
            "--recipes",
            str(SHIPPED),
            "--out",
            str(tmp_path),
            "--event",
            "merge_group",
            "--target-name",
            "github-l0-h100-pr",
        ]
    )
    assert run.code == ExitCode.USAGE and "not both" in run.err


def test_generate_refuses_labels_without_an_event(tmp_path: Path) -> None:
    args = ["generate", "--recipes", str(SHIPPED), "--out", str(tmp_path), "--label", "x"]
    run = run_cli(args)
    assert run.code == ExitCode.USAGE
    assert "--label, --labels-json and --system go with --event" in run.err
    assert not any(tmp_path.iterdir())


# --- conflicting rules are config errors ----------------------------------

BASE_CONFIG = """\
format_version: 2
vocabulary:
  platforms: [dgx_h100]
  environments: [dev, lts]
  scopes: {github: [L0, L1], gitlab: [mr]}
  cadences: [pr, mergegroup, nightly]
targets:
  github-l0-h100-pr: {system: github, scope: L0, platform: dgx_h100, environment: dev, cadence: pr}
  github-l1-h100-pr: {system: github, scope: L1, platform: dgx_h100, environment: dev, cadence: pr}
decisions:
  github:
"""


def config_with(decisions: str) -> bytes:
    return (BASE_CONFIG + decisions).encode()


@pytest.mark.parametrize(
    ("decisions", "message"),
    [
        (
            "    events: {pull_reqest: {scope: L0}}\n",
            'unknown github event "pull_reqest" (did you mean "pull_request"?)',
        ),
        ("    events: {pull_request: {cadence: pr}}\n", "must name the scope"),
        ("    events: {pull_request: {scope: L2}}\n", 'unknown github scope "L2"'),
        ("    events: {pull_request: {scope: L0, environment: stage}}\n", "unknown environment"),
        ("    events: {pull_request: {scope: L0, cadence: hourly}}\n", 'cadence "hourly"'),
        (
            "    events: {pull_request: {scope: L0}}\n"
            "    labels:\n"
            "      - {label: go, scope: L1, n_repeat: 1}\n"
            "      - {label: go, scope: L1, n_repeat: 5}\n",
            'label "go" is listed twice for pull_request (items 0 and 1); the second sets '
            "n_repeat differently",
        ),
        (
            "    events: {pull_request: {scope: L0}}\n"
            "    labels:\n      - {label: go, events: [merge_group], scope: L1}\n",
            'event "merge_group" has no rule of its own',
        ),
        (
            "    events: {pull_request: {scope: L0}, merge_group: {scope: L1}}\n"
            "    labels:\n      - {label: go, events: [merge_group], scope: L1}\n",
            "merge_group pipelines carry no labels",
        ),
        (
            "    events: {pull_request: {scope: L0}}\n    labels:\n      - {label: go}\n",
            'label "go" sets nothing',
        ),
    ],
)
def test_conflicting_or_dead_rules_are_config_errors(decisions: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(config_with(decisions), "matrixgen.yaml")
    text = "\n".join(str(f) for f in caught.value.findings)
    assert message in text, text
    assert "matrixgen.yaml:" in text  # located


def test_validate_reports_a_conflict_with_its_location(tmp_path: Path) -> None:
    (tmp_path / "matrixgen.yaml").write_text(
        BASE_CONFIG
        + "    events: {pull_request: {scope: L0}}\n"
        + "    labels:\n      - {label: go, scope: L1}\n      - {label: go, scope: L0}\n"
    )
    run = run_cli(["validate", "--recipes", str(tmp_path)])
    assert run.code == ExitCode.CONFIG
    assert "matrixgen.yaml:15:9" in run.err and "listed twice" in run.err


# --- the decision as a function ---------------------------------------------

RULES = parse_config(
    config_with(
        "    events:\n"
        "      pull_request: {scope: L0, cadence: pr}\n"
        "      merge_group: {scope: L1, cadence: mergegroup, n_repeat: 1}\n"
        "    labels:\n"
        "      - {label: a, scope: L1, n_repeat: 2}\n"
        "      - {label: b, scope: L0, n_repeat: 3, lightweight: true}\n"
        "      - {label: c, environment: lts, cadence: any}\n"
    ),
    "matrixgen.yaml",
)


@given(st.lists(st.sampled_from(["a", "b", "c"]), unique=True))
def test_the_first_listed_label_wins_each_field_whatever_the_order_given(
    labels: list[str],
) -> None:
    decision = decide(RULES.decisions, RULES.targets, event="pull_request", labels=labels)
    decision_reversed = decide(
        RULES.decisions, RULES.targets, event="pull_request", labels=labels[::-1]
    )
    assert decision.set_by == decision_reversed.set_by
    assert (decision.scope, decision.n_repeat) == (
        decision_reversed.scope,
        decision_reversed.n_repeat,
    )
    if "a" in labels:
        assert (decision.scope, decision.n_repeat) == ("L1", 2)
    elif "b" in labels:
        assert (decision.scope, decision.n_repeat) == ("L0", 3)
    else:
        assert (decision.scope, decision.n_repeat) == ("L0", None)
    assert decision.lightweight is ("b" in labels)
    assert decision.environment == ("lts" if "c" in labels else None)
    assert decision.cadence == (None if "c" in labels else "pr")
    # One target per platform and environment, of the decided scope.
    assert len(decision.targets) == 1
    assert decision.targets[0].selector.scope == decision.scope
    assert decision.targets[0].n_repeat == decision.n_repeat


def test_a_decided_target_that_is_configured_keeps_its_name() -> None:
    decision = decide(RULES.decisions, RULES.targets, event="pull_request")
    assert [t.name for t in decision.targets] == ["github-l0-h100-pr"]
    made = decide(RULES.decisions, RULES.targets, event="merge_group")
    assert [t.name for t in made.targets] == ["github-l1-dgx_h100-dev-mergegroup"]
    assert made.targets[0].selector.cadence == "mergegroup"


def test_an_event_without_rules_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="did you mean"):
        decide(RULES.decisions, RULES.targets, event="merge_grup")


# --- timeouts ---------------------------------------------------------------


def job(**changes: object) -> Job:
    fields: dict = {
        "model": "gpt",
        "test_case": "case",
        "environment": "dev",
        "platform": "dgx_h100",
        "tag": None,
        "scope": "L1",
        "cadence": ("pr",),
        "name": "case_dev_dgx_h100",
        "build": None,
        "n_repeat": 5,
        "time_limit": 2700,
    }
    fields.update(changes)
    return Job(**fields)


def settings(**changes: object) -> EmitSettings:
    target = Target(
        name="t", system=System.GITHUB, selector=Selector(scope="L1", platform="dgx_h100")
    )
    return EmitSettings(target=target, **changes)  # type: ignore[arg-type]


@given(
    n_repeat=st.integers(1, 20),
    time_limit=st.integers(1, 20_000),
    overhead=st.integers(0, 3600),
)
def test_a_timeout_is_the_work_plus_the_overhead(
    n_repeat: int, time_limit: int, overhead: int
) -> None:
    one = job(n_repeat=n_repeat, time_limit=time_limit)
    assert settings(timeout_overhead=overhead).timeout_seconds(one) == (
        n_repeat * time_limit + overhead
    )
    # A fixed target timeout wins; then the recipe's own.
    assert settings(timeout=60, timeout_overhead=overhead).timeout_seconds(one) == 60
    own = job(n_repeat=n_repeat, time_limit=time_limit, spec={"timeout": 7})
    assert recipe_timeout(own) == 7
    assert settings(timeout_overhead=overhead).timeout_seconds(own) == 7


def test_a_decided_n_repeat_stands_in_for_the_default_only() -> None:
    decided = settings(n_repeat=1, timeout_overhead=900)
    default = job()  # n_repeat from defaults.n_repeat: not in the spec
    own = job(n_repeat=3, spec={"n_repeat": 3})
    assert decided.n_repeat_for(default) == 1
    assert decided.timeout_seconds(default) == 2700 + 900
    assert decided.n_repeat_for(own) == 3


@pytest.mark.usefixtures("pinned_today")
def test_shipped_timeouts_are_derived(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run = run_cli(["generate", "--recipes", str(SHIPPED), "--out", str(out)])
    assert run.code == 0, run.err
    rows = json.loads((out / "github-l1-h100-pr.json").read_text())["include"]
    # 5 repeats of 45 minutes plus 15 minutes of setup: 4 hours, not 45 minutes.
    gpt = next(r for r in rows if r["model"] == "gpt")
    assert (gpt["n_repeat"], gpt["timeout"]) == (5, 240)
    inference = next(r for r in rows if r["model"] == "inference")
    assert (inference["n_repeat"], inference["timeout"]) == (1, 60)
    nightly = (out / "gitlab-nightly-h100-dev.yml").read_text()
    # The long nightly recipe: 5 x 5,400 s + 900 s = 7 h 45 min.
    assert "timeout: '7h 45m'" in nightly


def _tree_with_cap(tmp_path: Path, cap: int, timeout_line: str = "") -> Path:
    (tmp_path / "matrixgen.yaml").write_text(
        "format_version: 2\n"
        "vocabulary:\n"
        "  platforms: [dgx_h100]\n  environments: [dev]\n"
        "  scopes: {github: [L1], gitlab: [mr]}\n"
        "systems:\n"
        f"  github: {{timeout_overhead: 600, timeout_cap: {cap}}}\n"
        "targets:\n"
        "  l1: {system: github, scope: L1, platform: dgx_h100, environment: dev}\n"
    )
    (tmp_path / "_build.yaml").write_text("type: build\nformat_version: 2\nspec:\n  name: img\n")
    (tmp_path / "gpt.yaml").write_text(
        "type: basic\nformat_version: 2\nmaintainers: [m]\n"
        "spec:\n  name: '{test_case}'\n  model: gpt\n  build: img\n  platforms: dgx_h100\n"
        f"  n_repeat: 5\n  time_limit: 3600\n{timeout_line}"
        "products:\n  - test_case: [long]\n    products:\n"
        "      - {environment: [dev], scope: [L1]}\n"
    )
    return tmp_path


def test_validate_reports_a_timeout_past_the_cap(tmp_path: Path) -> None:
    root = _tree_with_cap(tmp_path, cap=21600)  # 5 x 3600 + 600 = 18600: fits
    assert run_cli(["validate", "--recipes", str(root)]).code == 0
    root = _tree_with_cap(tmp_path, cap=18000)
    run = run_cli(["validate", "--recipes", str(root)])
    assert run.code == 1
    assert "gpt.yaml:" in run.err and "[timeout-cap]" in run.err
    assert "310 min (18600 s), past the system's timeout_cap of 300 min" in run.err
    # The recipe's own timeout brings it under the cap.
    root = _tree_with_cap(tmp_path, cap=18000, timeout_line="  timeout: 17000\n")
    run = run_cli(["validate", "--recipes", str(root)])
    assert run.code == 0, run.err


# Written into the YAML as a JSON string: no surrogates (a pair's escape is no
# YAML) and no control characters (the config refuses them).
_LABEL_CHARS = st.characters(max_codepoint=0xFFFF, exclude_categories=("Cs", "Cc"))


@given(st.text(_LABEL_CHARS, min_size=1, max_size=8))
@example("a\\b")  # a backslash: escaped once, as every terminal field is
@example("##[group]x")
def test_the_decision_table_shows_each_rule_escaped_once(label: str) -> None:
    from matrixgen.decide.render import render_table
    from matrixgen.util.escape import terminal_text, unescape_terminal

    config = (
        BASE_CONFIG
        + "    events: {pull_request: {scope: L0}}\n"
        + f"    labels:\n      - {{label: {json.dumps(label)}, scope: L1}}\n"
    )
    rules = parse_config(config.encode(), "matrixgen.yaml")
    decision = decide(rules.decisions, rules.targets, event="pull_request", labels=[label])
    rule = decision.set_by["scope"]
    scope_line = next(
        line for line in render_table(decision).splitlines() if line.startswith("scope")
    )
    assert scope_line.split(None, 2)[2] == terminal_text(rule)
    assert unescape_terminal(scope_line.split(None, 2)[2]) == rule


_SHIPPED_RULES = parse_config((SHIPPED / "matrixgen.yaml").read_bytes(), "matrixgen.yaml")


@given(st.lists(st.text(st.characters(exclude_categories=("Cs",)), max_size=8), max_size=3))
@example(["##[group]x"])  # a workflow command of the runner's older form
@example(["a\u202eb", "\u2028::error::x", "\x1b[31m"])  # bidi, a line separator, ESC
def test_decides_step_outputs_are_safe_to_print_in_a_log(labels: list[str]) -> None:
    """A label (the pull request's) reaches the `decision` output as JSON spelled
    as every printed JSON is (json_for_log), meaning the same."""
    from matrixgen.decide.render import github_outputs
    from matrixgen.util.escape import json_for_log

    decision = decide(
        _SHIPPED_RULES.decisions,
        _SHIPPED_RULES.targets,
        event="pull_request",
        loose_labels=[*labels, "Run tests"],
    )
    outputs = dict(github_outputs(decision))
    for name in ("targets", "decision"):
        assert json_for_log(outputs[name]) == outputs[name], name
    assert json.loads(outputs["decision"])["labels"] == list(decision.labels)
