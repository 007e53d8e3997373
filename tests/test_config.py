"""documents/config.py: the project config parsed into values, or refused with every
problem located: the vocabulary, the defaults, the targets with their system's
settings under their own, and what the tree may not say (quarantine.api_url)."""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from matrixgen.documents.config import DEFAULT_CONFIG, parse_config
from matrixgen.documents.config_sections import PlatformInfo
from matrixgen.model.errors import ConfigError, ExitCode
from matrixgen.model.jobs import Selector
from matrixgen.model.vocab import System

CONFIG = """
    format_version: 2
    vocabulary:
      platforms: [dgx_h100, dgx_gb200]
      environments: [dev, lts]
      scopes: {gitlab: [mr, nightly], github: [L1]}
      tags: [latest]
    defaults: {time_limit: 900, n_repeat: 3}
    platforms:
      dgx_h100: {arch: amd64}
    systems:
      gitlab: {launcher: run-it, retry: 2}
    targets:
      nightly-h100: {system: gitlab, scope: nightly, platform: dgx_h100, environment: lts, retry: 0}
      l1: {system: github, scope: L1, platform: dgx_gb200, environment: dev, cadence: pr}
"""


def parse(text: str):  # type: ignore[no-untyped-def]
    return parse_config(textwrap.dedent(text).encode(), "matrixgen.yaml")


def test_the_vocabulary_defaults_and_sections() -> None:
    config = parse(CONFIG)
    vocab = config.vocabulary
    assert vocab is not None
    assert vocab.platforms == {"dgx_h100", "dgx_gb200"}
    assert list(vocab.scopes) == [System.GITHUB, System.GITLAB]  # sorted, whatever the order
    assert vocab.scopes[System.GITLAB] == ("mr", "nightly")
    assert vocab.tags == {"latest"} and vocab.models is None
    assert "L1" in vocab.all_scopes
    assert (config.time_limit, config.n_repeat) == (900, 3)
    assert config.platform("dgx_h100").arch == "amd64"
    assert config.platform("dgx_a100") == PlatformInfo()


def test_targets_keep_the_config_order_with_their_system_settings_under_their_own() -> None:
    config = parse(CONFIG)
    # The order the file writes them (not by name): every command lists them so.
    assert [t.name for t in config.targets] == ["nightly-h100", "l1"]
    nightly = config.target("nightly-h100")
    assert nightly is not None and config.target("nope") is None
    assert nightly.system is System.GITLAB
    assert nightly.selector == Selector(scope="nightly", platform="dgx_h100", environment="lts")
    assert nightly.settings.launcher == "run-it"  # from systems.gitlab
    assert nightly.settings.retry == 0  # the target's own wins
    assert config.target("l1").selector.cadence == "pr"  # type: ignore[union-attr]


def test_a_target_outside_the_vocabulary_is_refused_at_its_key() -> None:
    broken = CONFIG.replace("platform: dgx_gb200", "platform: dgx_gb20")
    with pytest.raises(ConfigError) as caught:
        parse(broken)
    error = caught.value
    assert error.exit_code == ExitCode.CONFIG
    (finding,) = error.findings
    assert finding.code == "config-target"
    assert finding.message == (
        'target "l1": unknown platform "dgx_gb20" (did you mean "dgx_gb200"?)'
    )
    line = textwrap.dedent(broken).splitlines()[finding.location.line - 1]
    assert line.lstrip().startswith("l1:")  # the target's line (the key is in a flow mapping)


def test_the_tree_may_not_say_where_tracker_tokens_go() -> None:
    with pytest.raises(ConfigError) as caught:
        parse(CONFIG + "    quarantine: {api_url: https://evil.example/}\n")
    (finding,) = caught.value.findings
    assert finding.code == "config-api-url"
    assert "--api-url" in finding.message


def test_a_config_that_is_no_mapping_is_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        parse("- a\n- b\n")
    assert [f.code for f in caught.value.findings] == ["config-type"]


def test_a_tree_without_a_config_has_the_defaults() -> None:
    assert DEFAULT_CONFIG.vocabulary is None and DEFAULT_CONFIG.targets == ()
    assert DEFAULT_CONFIG.locate(["targets"]).file == ""


@given(st.integers(1, 400))
@example(200)  # the longest a target name can be
@example(201)
@example(300)  # "<name>.yml" fits a file name, its temporary twin does not
def test_a_target_name_is_at_most_200_characters(length: int) -> None:
    """A target's file is `<name>.json` or `<name>.yml`, written through a
    temporary `.<name>.<pid>@<host>.<random>.tmp` beside it: a longer name made
    validate pass and generate fail with no line of the config to fix."""
    name = "t" * length
    text = CONFIG.replace("  l1: {", f"  {name}: {{")
    if length <= 200:
        assert parse(text).target(name) is not None
        return
    with pytest.raises(ConfigError) as caught:
        parse(text)
    (finding,) = caught.value.findings
    assert "is too long" in finding.message, finding
    line = textwrap.dedent(text).splitlines()[finding.location.line - 1]
    assert line.lstrip().startswith(f"{name}:")
