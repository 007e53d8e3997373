"""Reading a tree from a directory: which files count, and what is refused."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from matrixgen.pipeline import generate
from tests.tree_fixtures import v1_tree, v2_tree

ROWS = """
  - test_case: [tc]
    products:
      - {environment: [dev], scope: [mr]}
"""


def test_format_version_2_without_the_project_config_is_an_error(
    tree: Callable[..., Path], cli: Callable
) -> None:
    # Without matrixgen.yaml nothing checks the vocabulary or the pins of a
    # format_version 2 file: that must not pass for a clean tree.
    files = v2_tree(ROWS)
    files["matrixgen.yml"] = files.pop("matrixgen.yaml")
    files["quarantine.yaml"] = "entries: []\n"  # a close name, but no candidate
    root = tree(files)
    run = cli("validate", "--recipes", root)
    assert run.code == 1, run
    (line,) = [x for x in run.err.splitlines() if "[config-missing]" in x]
    assert line.startswith(f"{root}/_build.yaml:2:17: error: format_version 2 (and 1 other")
    assert f"rename {root}/matrixgen.yml to matrixgen.yaml" in line
    misnamed = f"{root}/matrixgen.yml: error: not read: the file must be named matrixgen.yaml"
    assert misnamed in run.err
    assert cli("list", "--recipes", root).code == 1
    del files["matrixgen.yml"]
    run = cli("validate", "--recipes", tree(files))
    (line,) = [x for x in run.err.splitlines() if "[config-missing]" in x]
    assert "rename" not in line, line


def test_format_version_1_needs_no_config(tree: Callable[..., Path]) -> None:
    generation = generate(tree(v1_tree(ROWS)))
    assert generation.jobs and not generation.findings


# The config a format_version 1 tree may have: settings only, no vocabulary.
MINIMAL_CONFIG = """
quarantine:
  tracker_base: https://github.com/acme/ml/issues/
  default_owner: ci-team
jet:
  runner_tags: [mcore-ci, gpu]
  clusters: {dgxh100_eos: eos, dgxa100_dracooci: draco-oci-iad}
"""


def test_a_format_version_1_tree_takes_a_config_without_vocabulary(
    tree: Callable[..., Path], cli: Callable
) -> None:
    files = v1_tree(ROWS)
    files["matrixgen.yaml"] = MINIMAL_CONFIG
    root = tree(files)
    generation = generate(root)
    assert generation.tree.format_version == 1 and generation.tree.config.vocabulary is None
    assert generation.jobs and not generation.findings
    assert generation.tree.config.doc.jet.clusters["dgxh100_eos"] == "eos"
    assert cli("validate", "--recipes", root).code == 0
    # Values are still the ones the jobs use: a typo is refused with a hint.
    run = cli("list", "--recipes", root, "--scope", "mrr")
    assert run.code == 2 and 'did you mean "mr"?' in run.err, run
    # The config's settings are read: "#7" resolves, the default owner is used.
    add = cli(
        "quarantine", "add", "--recipes", root, "--test-case", "tc", "--tracker", "#7",
        "--kind", "broken", "--action", "skip", "--reason", "hangs",
    )  # fmt: skip
    assert add.code == 0, add
    text = (root / "quarantine.yaml").read_text()
    assert "owner: ci-team" in text and "https://github.com/acme/ml/issues/7" not in add.err
    assert "cannot be linked" not in add.err


def test_a_config_may_hold_just_one_setting(tree: Callable[..., Path], cli: Callable) -> None:
    for config in (
        "quarantine: {tracker_base: https://github.com/acme/ml/issues/}\n",
        "jet: {runner_tags: [a]}\n",
        "jet: {clusters: {x: y}}\n",
        "{}\n",
    ):
        files = v1_tree(ROWS)
        files["matrixgen.yaml"] = config
        run = cli("validate", "--recipes", tree(files))
        assert run.code == 0, (config, run)


@pytest.mark.parametrize(
    ("config", "says"),
    [
        # jet holds exactly runner_tags (strings) and clusters (string -> string).
        ("jet: {runner_tags: [1]}\n", "jet/runner_tags/0"),
        ("jet: {runner_tags: a}\n", "jet/runner_tags"),
        ("jet: {clusters: {x: [y]}}\n", "jet/clusters/x"),
        ("jet: {cluster: {x: y}}\n", "cluster"),
        # A vocabulary is a format_version 2 config, and targets need one.
        ("format_version: 2\n", "(top level): format_version needs vocabulary beside it"),
        (
            "targets: {t: {system: gitlab, scope: mr, platform: p, environment: dev}}\n",
            "targets needs vocabulary beside it",
        ),
        (
            "vocabulary: {platforms: [p], environments: [dev], scopes: {gitlab: [mr]}}\n",
            "format_version",
        ),
        ("quarantine: {default_owner: ' '}\n", "default_owner"),
    ],
)
def test_a_config_without_vocabulary_is_still_checked(
    tree: Callable[..., Path], cli: Callable, config: str, says: str
) -> None:
    files = v1_tree(ROWS)
    files["matrixgen.yaml"] = config
    run = cli("validate", "--recipes", tree(files))
    assert run.code == 3 and says in run.err, (config, run)


def test_format_version_2_files_need_a_vocabulary_in_the_config(
    tree: Callable[..., Path], cli: Callable
) -> None:
    files = v2_tree(ROWS)
    files["matrixgen.yaml"] = MINIMAL_CONFIG
    root = tree(files)
    run = cli("validate", "--recipes", root)
    assert run.code == 1, run
    (line,) = [x for x in run.err.splitlines() if "[config-missing]" in x]
    assert "needs a vocabulary in the project config" in line and "declares none" in line


def test_a_misnamed_quarantine_file_is_an_error_not_a_silent_skip(
    tree: Callable[..., Path], cli: Callable
) -> None:
    files = v2_tree(ROWS)
    files["quarantine.yml"] = "entries: []\n"
    files["sub/extra.yml"] = "a: 1\n"
    root = tree(files)
    run = cli("validate", "--recipes", root)
    assert run.code == 1, run
    assert f"{root}/quarantine.yml: error: not read: the file must be named quarantine.yaml" in (
        run.err
    )
    # Below the root a .yml file is only a warning: it is no recipe.
    assert f"{root}/sub/extra.yml: warning: ignored: recipe files must end in .yaml" in run.err


def test_symbolic_links_that_would_hide_files_are_refused(
    tree: Callable[..., Path], cli: Callable
) -> None:
    root = tree(v1_tree(ROWS))
    (root / "loop").symlink_to(".", target_is_directory=True)
    run = cli("validate", "--recipes", root)
    assert run.code == 1 and "Traceback" not in run.err
    assert f"{root}/loop: error: a symbolic link to a directory ('.')" in run.err
    (root / "loop").unlink()
    (root / "gone.yaml").symlink_to("nowhere.yaml")
    run = cli("list", "--recipes", root)
    assert run.code == 1
    assert f"{root}/gone.yaml: error: a symbolic link to 'nowhere.yaml', which does not exist" in (
        run.err
    )
    # A link to a file of the tree is read like the file; an absolute one leaves the tree.
    (root / "gone.yaml").unlink()
    os.rename(root / "h100" / "gpt.yaml", root / "gpt.real")
    (root / "h100" / "gpt.yaml").symlink_to("../gpt.real")
    assert cli("list", "--recipes", root, "--format", "json").code == 0
    (root / "h100" / "gpt.yaml").unlink()
    (root / "h100" / "gpt.yaml").symlink_to(root / "gpt.real")
    run = cli("list", "--recipes", root)
    assert run.code == 1 and "which leaves the recipe tree" in run.err


def test_recipes_must_be_a_directory(tree: Callable[..., Path], cli: Callable) -> None:
    root = tree(v1_tree(ROWS))
    run = cli("validate", "--recipes", root / "h100" / "gpt.yaml")
    assert run.code == 2 and "is a file" in run.err


def test_bom_and_crlf_keep_lines_and_columns(tree: Callable[..., Path], cli: Callable) -> None:
    files = v2_tree(ROWS.replace("[mr]", "[mrr]"))
    plain = cli("validate", "--recipes", tree(files))
    files["gpt.yaml"] = (
        b"\xef\xbb\xbf" + files["gpt.yaml"].lstrip("\n").replace("\n", "\r\n").encode()
    )
    dos = cli("validate", "--recipes", tree(files))
    assert plain.code == dos.code == 1

    def located(err: str) -> list[str]:
        lines = [x for x in err.splitlines() if "[vocabulary]" in x]
        return [x[x.index("gpt.yaml:") : x.index(";")] for x in lines]

    assert located(plain.err) == located(dos.err)
    assert located(plain.err)[0].startswith("gpt.yaml:15:38: error: unknown scope")


def test_an_unreadable_file_is_named(
    tree: Callable[..., Path], cli: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (Tests may run as root, whom file modes do not stop: fail the read itself.)
    root = tree(v1_tree(ROWS))
    from matrixgen.engine import load

    real = load.read_regular

    def read_regular(path: Path) -> bytes | None:
        if path.name == "gpt.yaml":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(load, "read_regular", read_regular)
    run = cli("validate", "--recipes", root)
    assert run.code == 1 and "Traceback" not in run.err
    assert f"{root}/h100/gpt.yaml: cannot be read: Permission denied" in run.err


def test_a_key_yaml_reads_as_a_value_is_an_error_in_v2_a_warning_in_v1(
    tree: Callable[..., Path], cli: Callable
) -> None:
    # Megatron-LM's parser takes `on:` in a row as one more axis, and so does a
    # format_version 1 tree here (with a warning); format_version 2 refuses it.
    row = (
        "\n  - test_case: [tc]\n    products:\n      - {environment: [dev], scope: [mr], on: [x]}\n"
    )
    v1 = cli("list", "--recipes", tree(v1_tree(row)), "--format", "json")
    assert v1.code == 0 and '"test_case": "tc"' in v1.out
    # list counts the tree's warnings; validate, the command that shows findings,
    # prints each.
    assert "warning: key on" not in v1.err
    assert "matrixgen: note: 1 warning(s) in " in v1.err
    assert "`matrixgen validate --recipes" in v1.err
    shown = cli("validate", "--recipes", tree(v1_tree(row)))
    assert "warning: key on is read as a boolean" in shown.err
    v2 = cli("list", "--recipes", tree(v2_tree(row)))
    assert v2.code == 1 and "error: key on is read as a boolean" in v2.err
