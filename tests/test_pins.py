"""Pins: image versions agree across systems; env and argument pins hold on every
job they cover, custom launchers included; `matrixgen pins`."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from matrixgen.pipeline import generate
from matrixgen.validate import validate
from matrixgen.views.images import _split_image, version_of
from matrixgen.views.pins import _args_problem, _normalized

REPO = Path(__file__).resolve().parents[1]
LOCATED = re.compile(r"^(?P<file>[^\n:]+):(?P<line>\d+):(?P<col>\d+): error: (?P<msg>.*)$", re.M)

CONFIG = """\
format_version: 2
vocabulary:
  platforms: [dgx_h100, dgx_gb200]
  environments: [dev, lts]
  scopes: {github: [L0, L1], gitlab: [mr, nightly]}
  models: [gpt, inference, unit-tests]
platforms:
  dgx_h100: {arch: amd64}
  dgx_gb200: {arch: arm64}
"""

IMAGES = """\
images:
  version: "26.09"
  github: {repository: nvcr.io/nvidia/pytorch, tag: 26.09-py3}
  gitlab:
    amd64: {repository: reg.example/ci-dev, tag: 26.09-amd64}
    arm64: {repository: reg.example/ci-dev, tag: 26.09-arm64}
"""

PINS = """\
pins:
  fa-env:
    env: {NVTE_FLASH_ATTN_V4: "0"}
    exclude: {models: [unit-tests]}
  fa-arg:
    args: [--flash-attention-version, "2"]
    exclude: {models: [unit-tests]}
"""

GPT = """\
type: basic
format_version: 2
spec:
  name: "{test_case}_{environment}_{platforms}"
  model: gpt
  build: img-{environment}
  platforms: dgx_h100
  env:
    NVTE_FLASH_ATTN_V4: "0"
  args: [--flash-attention-version, "2"]
products:
  - test_case: [a]
    products:
      - {environment: [dev], scope: [mr, L1], platforms: [dgx_h100, dgx_gb200]}
  - test_case: [b]
    products:
      - {environment: [lts], scope: [nightly]}
"""

INFERENCE = """\
type: basic
format_version: 2
spec:
  name: "{test_case}_{environment}_{platforms}"
  model: inference
  build: img-{environment}
  platforms: dgx_h100
  launcher: python launch_inference.py --flash-attention-version 2
  env:
    NVTE_FLASH_ATTN_V4: "0"
products:
  - test_case: [inf]
    products:
      - {environment: [dev], scope: [mr]}
"""

UNIT = """\
type: basic
format_version: 2
spec:
  name: "{test_case}_{environment}_{platforms}_{tag}"
  model: unit-tests
  build: img-{environment}
  platforms: dgx_h100
products:
  - test_case: [tests/unit/]
    products:
      - {environment: [dev], scope: [mr], tag: [latest]}
"""


def build(env: str) -> str:
    return f"type: build\nformat_version: 2\nspec:\n  name: img-{env}\n"


def project(config: str = CONFIG + IMAGES + PINS, **recipes: str) -> dict[str, str]:
    files = {
        "matrixgen.yaml": config,
        "_build-dev.yaml": build("dev"),
        "_build-lts.yaml": build("lts"),
        "gpt.yaml": GPT,
        "inference.yaml": INFERENCE,
        "unit-tests.yaml": UNIT,
    }
    files.update({f"{k}.yaml": v for k, v in recipes.items()})
    return files


def errors(root: Path) -> list[str]:
    gen = generate(root)
    return [str(f) for f in validate(gen.tree, gen.expansion) if f.severity.value == "error"]


def findings(root: Path, code_prefix: str = "pin") -> list[str]:
    gen = generate(root)
    return [str(f) for f in validate(gen.tree, gen.expansion) if f.code.startswith(code_prefix)]


def line_of(path: Path, needle: str) -> int:
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in {path}")


# --------------------------------------------------------------------------- images


def test_clean_project_has_no_pin_findings(tree: Callable[..., Path], cli: Callable) -> None:
    root = tree(project())
    assert findings(root) == []
    assert cli("validate", "--recipes", root).code == 0


def test_image_drift_is_an_error_at_the_tag(tree: Callable[..., Path], cli: Callable) -> None:
    config = CONFIG + IMAGES.replace("26.09-arm64", "26.08-arm64") + PINS
    root = tree(project(config))
    run = cli("validate", "--recipes", root)
    assert run.code == 1, run
    (match,) = [m for m in LOCATED.finditer(run.err) if "drift" in m["msg"]]
    assert match["file"].endswith("matrixgen.yaml")
    assert int(match["line"]) == line_of(root / "matrixgen.yaml", "26.08-arm64")
    assert "gitlab/arm64" in match["msg"] and "26.08" in match["msg"] and "26.09" in match["msg"]


def test_without_a_configured_version_the_odd_one_out_is_reported(
    tree: Callable[..., Path],
) -> None:
    images = IMAGES.replace('  version: "26.09"\n', "").replace("26.09-py3", "26.10-py3")
    root = tree(project(CONFIG + images + PINS))
    (message,) = findings(root, "pin-image")
    # Two GitLab pins agree on 26.09: the GitHub one is the drift.
    assert "image github" in message and "on 26.10" in message and "26.09" in message


def test_a_pin_with_its_own_version_is_checked_against_it(tree: Callable[..., Path]) -> None:
    lts_ok = (
        "  environments:\n    lts:\n      gitlab:\n"
        '        amd64: {repository: r/ci-lts, tag: 25.09-amd64, version: "25.09"}\n'
    )
    root = tree(project(CONFIG + IMAGES + lts_ok + PINS))
    assert findings(root) == []
    root = tree(project(CONFIG + IMAGES + lts_ok.replace("25.09-amd64", "25.06-amd64") + PINS))
    (message,) = findings(root, "pin-image")
    assert "declares version 25.09 but its tag is 25.06" in message


def test_tag_without_version_and_bad_pattern(tree: Callable[..., Path]) -> None:
    root = tree(project(CONFIG + IMAGES.replace("26.09-py3", "latest") + PINS))
    (message,) = findings(root, "pin-image")
    assert 'no version in tag "latest"' in message
    bad_pattern = IMAGES.replace("images:\n", "images:\n  version_pattern: '(\\d+'\n")
    root = tree(project(CONFIG + bad_pattern + PINS))
    (message,) = findings(root, "pin-image")
    assert "not a valid regular expression" in message


def test_an_image_in_system_settings_bypasses_the_pins_and_is_checked(
    tree: Callable[..., Path],
) -> None:
    systems = "systems:\n  gitlab:\n    image: reg.example:5000/ci-dev:26.07-amd64\n"
    root = tree(project(CONFIG + IMAGES + PINS + systems))
    (message,) = findings(root, "pin-image")
    assert "systems.gitlab.image" in message and "26.07" in message


def test_target_on_an_arch_without_image_is_reported(tree: Callable[..., Path]) -> None:
    images = IMAGES.replace("    arm64: {repository: reg.example/ci-dev, tag: 26.09-arm64}\n", "")
    targets = (
        "targets:\n  mr-gb200: {system: gitlab, scope: mr, platform: dgx_gb200, environment: dev}\n"
    )
    root = tree(project(CONFIG + images + PINS + targets))
    (message,) = findings(root, "pin-image")
    assert 'target "mr-gb200"' in message and "images.gitlab.arm64" in message


def test_a_tag_written_as_a_number_is_a_config_error(
    tree: Callable[..., Path], cli: Callable
) -> None:
    # YAML reads 26.10 as the number 26.1: the schema insists on a string.
    root = tree(project(CONFIG + IMAGES.replace("tag: 26.09-py3", "tag: 26.10") + PINS))
    run = cli("validate", "--recipes", root)
    assert run.code == 3, run
    assert "matrixgen.yaml:" in run.err and "26.1" in run.err


@pytest.mark.parametrize(
    ("image", "repo", "tag"),
    [
        ("nvcr.io/nvidia/pytorch:26.09-py3", "nvcr.io/nvidia/pytorch", "26.09-py3"),
        ("reg.example:5000/ci", "reg.example:5000/ci", ""),
        ("reg.example:5000/ci:26.09", "reg.example:5000/ci", "26.09"),
    ],
)
def test_split_image(image: str, repo: str, tag: str) -> None:
    assert _split_image(image) == (repo, tag)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(20, 30), st.integers(1, 12)),
        min_size=1,
        max_size=3,
    )
)
def test_images_agree_exactly_when_versions_are_equal(
    tmp_path_factory: pytest.TempPathFactory, versions: list[tuple[int, int]]
) -> None:
    texts = [f"{y:02d}.{m:02d}" for y, m in versions] + ["26.09"] * (3 - len(versions))
    images = (
        "images:\n"
        f"  github: {{repository: a/b, tag: {texts[0]}-py3}}\n"
        "  gitlab:\n"
        f"    amd64: {{repository: a/c, tag: {texts[1]}-amd64}}\n"
        f"    arm64: {{repository: a/c, tag: {texts[2]}-arm64}}\n"
    )
    root = tmp_path_factory.mktemp("prop")
    for rel, text in project(CONFIG + images + PINS).items():
        (root / rel).write_text(text)
    found = findings(root, "pin-image")
    assert bool(found) == (len(set(texts)) > 1)
    # Never more reports than pins that differ from the most common version.
    assert len(found) <= 3 - max(texts.count(t) for t in texts)


def _first_release_number(tag: str) -> str | None:
    """The leftmost NN.NN in tag, found by looking at each position in turn."""
    for i in range(len(tag) - 4):
        part = tag[i : i + 5]
        if part[:2].isdigit() and part[2] == "." and part[3:].isdigit():
            return part
    return None


@given(st.text(alphabet="0123456789.-abcpy", min_size=0, max_size=20))
@example("26.09-py3")
@example("py3-126.091.2")
@example("2.09-25.10")
@example("26.09-py3-25.10")
@example("nightly")
def test_version_of_finds_the_first_release_number(tag: str) -> None:
    expected = _first_release_number(tag)
    assert version_of(tag, re.compile(r"(\d{2}\.\d{2})")) == expected
    # Without a group the whole match is the version.
    assert version_of(tag, re.compile(r"\d{2}\.\d{2}")) == expected


def test_version_of_reads_the_pattern_s_first_group() -> None:
    assert version_of("ci-dev:26.09-py3-arm64", re.compile(r"(\d{2})\.(\d{2})")) == "26"
    assert version_of("26.09-py3", re.compile(r"py(\d)")) == "3"


# --------------------------------------------------------------------------- env and args


def test_wrong_env_value_points_at_the_spec_env_key(
    tree: Callable[..., Path], cli: Callable
) -> None:
    root = tree(project(gpt=GPT.replace('NVTE_FLASH_ATTN_V4: "0"', 'NVTE_FLASH_ATTN_V4: "1"')))
    run = cli("validate", "--recipes", root)
    assert run.code == 1, run
    (match,) = [m for m in LOCATED.finditer(run.err) if "fa-env" in m["msg"]]
    assert match["file"].endswith("gpt.yaml")
    assert int(match["line"]) == line_of(root / "gpt.yaml", "NVTE_FLASH_ATTN_V4")
    # a (2 platforms) and b: three jobs of this file lack it.
    assert "NVTE_FLASH_ATTN_V4=1, want NVTE_FLASH_ATTN_V4=0" in match["msg"]
    assert "(3 job(s)" in match["msg"]


def test_missing_args_point_at_the_spec(tree: Callable[..., Path]) -> None:
    root = tree(project(gpt=GPT.replace('  args: [--flash-attention-version, "2"]\n', "")))
    (message,) = findings(root)
    assert 'pin "fa-arg": args lack --flash-attention-version 2' in message
    assert f"gpt.yaml:{line_of(root / 'gpt.yaml', 'spec:')}:" in message


def test_a_row_that_overrides_env_is_reported_at_the_row(tree: Callable[..., Path]) -> None:
    gpt = GPT.replace(
        "      - {environment: [lts], scope: [nightly]}",
        '      - {environment: [lts], scope: [nightly], env: {NVTE_FLASH_ATTN_V4: "1"}}',
    )
    root = tree(project(gpt=gpt))
    (message,) = findings(root)
    assert f"gpt.yaml:{line_of(root / 'gpt.yaml', 'env: {NVTE')}:" in message
    assert "(1 job(s): b_lts_dgx_h100)" in message


def test_custom_launcher_must_carry_the_argument_itself(tree: Callable[..., Path]) -> None:
    # The job's args do not help: the custom launcher bypasses the shared one.
    inference = INFERENCE.replace(
        "launch_inference.py --flash-attention-version 2", "launch_inference.py"
    ).replace("  env:\n", '  args: [--flash-attention-version, "2"]\n  env:\n')
    root = tree(project(inference=inference))
    (message,) = findings(root)
    assert "custom launcher (bypasses the shared one) lacks --flash-attention-version 2" in message
    assert f"inference.yaml:{line_of(root / 'inference.yaml', 'launcher:')}:" in message


@pytest.mark.parametrize(
    ("launcher", "ok"),
    [
        ("python l.py --flash-attention-version=2", True),
        ("python l.py --other x --flash-attention-version 2 --more", True),
        ("python l.py --flash-attention-version 3", False),
        ("python l.py --flash-attention-version", False),
        ("NVTE_FLASH_ATTN_V4=1 python l.py --flash-attention-version 2", False),
        ("env NVTE_FLASH_ATTN_V4=0 python l.py --flash-attention-version 2", True),
    ],
)
def test_launcher_spellings(tree: Callable[..., Path], launcher: str, ok: bool) -> None:
    inference = INFERENCE.replace(
        "python launch_inference.py --flash-attention-version 2", launcher
    )
    root = tree(project(inference=inference))
    assert (findings(root) == []) is ok, findings(root)


def test_exclusions_and_selectors(tree: Callable[..., Path]) -> None:
    # Unit tests carry no pins and are excluded; a pin limited to gb200 covers
    # only the gb200 job; a test-case glob exclusion removes b.
    pins = (
        "pins:\n"
        "  gb200-only:\n"
        "    env: {ONLY_GB200: '1'}\n"
        "    platforms: [dgx_gb200]\n"
        "  not-b:\n"
        "    env: {NOT_B: '1'}\n"
        "    models: [gpt]\n"
        "    exclude: {test_cases: ['b*']}\n"
    )
    root = tree(project(CONFIG + IMAGES + pins))
    messages = findings(root)
    assert any("gb200-only" in m and "(1 job(s): a_dev_dgx_gb200)" in m for m in messages)
    (not_b,) = [m for m in messages if "not-b" in m]
    assert "(2 job(s): a_dev_dgx_gb200 and 1 more)" in not_b


def test_unknown_selector_value_and_unused_pin(tree: Callable[..., Path]) -> None:
    pins = "pins:\n  typo:\n    env: {X: '1'}\n    models: [gtp]\n"
    root = tree(project(CONFIG + IMAGES + pins))
    gen = generate(root)
    found = [f for f in validate(gen.tree, gen.expansion) if f.code.startswith("pin")]
    texts = [f"{f.severity.value}: {f.message}" for f in found]
    assert any('unknown model "gtp" (did you mean "gpt"?)' in t for t in texts), texts
    assert any(t.startswith("warning:") and "covers no job" in t for t in texts), texts


def test_pin_without_env_or_args_is_a_config_error(
    tree: Callable[..., Path], cli: Callable
) -> None:
    root = tree(project(CONFIG + IMAGES + "pins:\n  empty: {models: [gpt]}\n"))
    assert cli("validate", "--recipes", root).code == 3


def test_a_tree_without_config_has_no_pins(tree: Callable[..., Path]) -> None:
    v1 = GPT.replace("format_version: 2", "format_version: 1")
    root = tree({"gpt.yaml": v1, "_build-dev.yaml": build("dev").replace("2", "1")})
    assert findings(root) == []


@given(
    st.lists(st.sampled_from(["--a", "1", "--b", "2", "x", "--a=1"]), max_size=8),
    st.lists(st.sampled_from(["--a", "1", "--b", "2"]), min_size=1, max_size=3),
)
def test_args_hold_a_pin_as_a_contiguous_subsequence(words: list[str], wanted: list[str]) -> None:
    words_n, wanted_n = _normalized(words), _normalized(wanted)
    expected = any(words_n[i : i + len(wanted_n)] == wanted_n for i in range(len(words_n) + 1))
    assert (_args_problem(words, wanted, "args") is None) == expected
    assert _args_problem([*words, *wanted], wanted, "args") is None


# --------------------------------------------------------------------------- the command


def test_pins_command_table_and_json(tree: Callable[..., Path], cli: Callable) -> None:
    root = tree(project())
    run = cli("pins", "--recipes", root)
    assert run.code == 0, run
    lines = run.out.splitlines()
    assert lines[0] == "Images (images.version 26.09)"
    for name in ("github", "gitlab/amd64", "gitlab/arm64"):
        assert any(line.startswith(name + " ") and " ok" in line for line in lines), run.out
    data = json.loads(cli("pins", "--recipes", root, "--format", "json").out)
    assert [i["version"] for i in data["images"]] == ["26.09"] * 3
    pins = {p["name"]: p for p in data["pins"]}
    # gpt: a in two scopes on two platforms, b; inference: inf. Unit tests are excluded.
    assert pins["fa-env"]["covered_jobs"] == 2 * 2 + 1 + 1
    assert pins["fa-arg"]["custom_launcher_jobs"] == 1
    assert all(p["failing_jobs"] == 0 for p in pins.values())


def test_pins_command_exits_1_on_drift(tree: Callable[..., Path], cli: Callable) -> None:
    root = tree(project(CONFIG + IMAGES.replace("26.09-amd64", "26.10-amd64") + PINS))
    run = cli("pins", "--recipes", root)
    assert run.code == 1, run
    assert "DRIFT: want 26.09" in run.out


# --------------------------------------------------------------------------- shipped tree


@pytest.fixture
def shipped_copy(tmp_path: Path, pinned_today: object) -> Path:
    target = tmp_path / "recipes"
    shutil.copytree(REPO / "recipes", target)
    return target


def test_changing_one_image_pin_of_the_shipped_tree_fails_validate(
    shipped_copy: Path, cli: Callable
) -> None:
    config = shipped_copy / "matrixgen.yaml"
    text = config.read_text()
    assert text.count("tag: 26.09-py3-arm64") == 1
    config.write_text(text.replace("tag: 26.09-py3-arm64", "tag: 26.10-py3-arm64"))
    run = cli("validate", "--recipes", shipped_copy)
    assert run.code == 1, run
    (match,) = list(LOCATED.finditer(run.err))
    assert Path(match["file"]) == config
    assert int(match["line"]) == line_of(config, "26.10-py3-arm64")
    assert "[pin-image]" in match["msg"]


def test_changing_one_env_pin_of_the_shipped_tree_fails_validate(
    shipped_copy: Path, cli: Callable
) -> None:
    recipe = shipped_copy / "gb200" / "moe.yaml"
    text = recipe.read_text()
    assert text.count('NVTE_FLASH_ATTN_V4: "0"') == 1
    recipe.write_text(text.replace('NVTE_FLASH_ATTN_V4: "0"', 'NVTE_FLASH_ATTN_V4: "1"'))
    run = cli("validate", "--recipes", shipped_copy)
    assert run.code == 1, run
    (match,) = list(LOCATED.finditer(run.err))
    assert Path(match["file"]) == recipe
    assert int(match["line"]) == line_of(recipe, "NVTE_FLASH_ATTN_V4")
    assert 'pin "flash-attention-env"' in match["msg"]


def test_pins_refuses_a_tree_whose_rows_do_not_expand(
    tree: Callable[..., Path], cli: Callable
) -> None:
    """pins reads the jobs: on a tree with a row that does not expand it says so
    and shows nothing, rather than the pins of the jobs that did expand."""
    assert cli("pins", "--recipes", tree(project())).code == 0
    broken = GPT.replace("scope: [mr, L1],", "scope: [mr, L1], n_repeat: often,")
    assert broken != GPT
    run = cli("pins", "--recipes", tree(project(gpt=broken)), "--format", "json")
    assert run.code == 1, run
    assert run.out == ""
    assert "error(s) in" in run.err and "fix them first" in run.err, run.err
    assert "gpt.yaml:" in run.err and "n_repeat" in run.err, run.err
