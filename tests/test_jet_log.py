"""What `jet-trigger` and `jet-buckets` say in a configure job's log: the system
whose quarantine applies when it is assumed, the quarantine's effect entry by
entry (mutes and deselections as well as skips), the tree's warnings counted
with a command that shows them, and the switch that leaves the notes out."""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

TRACKER = "https://github.com/example/mcore/issues/"

GPT = """
type: basic
format_version: 1
spec:
  name: "{test_case}_{environment}_{platforms}"
  model: gpt
  build: mcore-pyt-{environment}
  platforms: dgx_h100
  script: "MATRIXGEN_QUARANTINE=q.yaml pytest tests"
products:
  - test_case: [gpt_a]
    products:
      - {environment: [dev], scope: [mr, mr-github]}
  - test_case: [gpt_b]
    products:
      - {environment: [dev], scope: [mr, mr-github]}
  - test_case: [gpt_c]
    products:
      - {environment: [dev, lts], scope: [mr]}
"""
BUILD = """
type: build
format_version: 1
spec: {name: mcore-pyt-dev, source: {image: mcore}}
"""
BUILD_LTS = """
type: build
format_version: 1
spec: {name: mcore-pyt-lts, source: {image: mcore}}
"""
UNIT = """
type: basic
format_version: 1
spec:
  name: "{test_case}_{environment}_{platforms}_{tag}"
  model: unit-tests
  build: mcore-pyt-{environment}
  platforms: dgx_h100
  script: "MATRIXGEN_QUARANTINE=q.yaml bash run_ci_test.sh --bucket {test_case}"
products:
  - test_case: [tests/unit_tests/data/]
    products:
      - {environment: [dev], tag: [latest], scope: [unit-tests]}
"""


def entry(id_: str, action: str, test_case: str, *, where: str = "", nodes: str = "") -> str:
    lines = [
        f"  - id: {id_}",
        f'    tracker: "{TRACKER}1"',
        "    kind: flaky",
        f"    action: {action}",
        f"    match: {{test_case: {test_case}}}",
        "    owner: mcore",
        "    reason: flaky in CI",
    ]
    if where:
        lines.append(f"    where: [{where}]")
    if nodes:
        lines.append(f"    node_ids: [{nodes}]")
    return "\n".join(lines) + "\n"


def jet_tree(tree: Callable, *entries: str, extra: dict[str, str] | None = None) -> Path:
    files = {
        "h100/gpt.yaml": GPT,
        "_build-mcore-dev.yaml": BUILD,
        "_build-mcore-lts.yaml": BUILD_LTS,
        **(extra or {}),
    }
    if entries:
        files["quarantine.yaml"] = "entries:\n" + "".join(entries)
    return tree(files)


def jet(root: Path, out: Path, *args: str, scope: str = "mr") -> list[str]:
    return [
        "jet-trigger", "--scope", scope, "--environment", "dev", "--platform", "dgx_h100",
        "--cluster", "dgxh100_eos", "--test-cases", "all", "--container-image", "img",
        "--container-tag", "7", "--dependent-job", "functional:configure",
        "--slurm-account", "acct", "--no-enable-warmup", "--output-path", str(out),
        "--recipes", str(root), *args,
    ]  # fmt: skip


@pytest.fixture(autouse=True)
def _outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GITHUB_ACTIONS", "GITLAB_CI", "MATRIXGEN_QUIET"):
        monkeypatch.delenv(name, raising=False)


# --------------------------------------------------------------------------- the system


def test_the_system_assumed_is_said_once_with_why(
    tree: Callable, cli: Callable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = jet_tree(tree)
    out = tmp_path / "mr.yaml"
    run = cli(*jet(root, out))
    assert run.code == 0, run
    said = [line for line in run.err.splitlines() if "--system gitlab assumed" in line]
    assert said == [
        "matrixgen: note: --system gitlab assumed (GITHUB_ACTIONS and GITLAB_CI are not "
        "true): the quarantine entries of gitlab apply; give --system github or --system "
        "gitlab to choose"
    ]
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    run = cli(*jet(root, out))
    assert run.err.count("--system github assumed (GITHUB_ACTIONS=true)") == 1
    assert "--system gitlab assumed" not in run.err
    # Given, nothing is assumed and nothing said.
    run = cli(*jet(root, out, "--system", "github"))
    assert run.code == 0 and "assumed (" not in run.err


def test_jet_buckets_says_the_system_it_assumes_too(
    tree: Callable, cli: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = jet_tree(tree, extra={"h100/unit-tests.yaml": UNIT})
    monkeypatch.setenv("GITLAB_CI", "true")
    run = cli("jet-buckets", root / "h100" / "unit-tests.yaml", "--recipes", root)
    assert run.code == 0, run
    assert run.err.count("--system gitlab assumed (GITLAB_CI=true)") == 1
    assert run.out == '[{"bucket":"tests/unit_tests/data/"}]\n'


# --------------------------------------------------------------------------- the summary


def test_the_summary_names_every_entry_by_what_it_does(
    tree: Callable, cli: Callable, tmp_path: Path
) -> None:
    root = jet_tree(
        tree,
        entry("a-hangs", "skip", "gpt_a", where="gitlab/mr"),
        entry("b-flaky", "allow-failure", "gpt_b"),
        entry("c-one-test", "mute", "gpt_c", nodes="tests/test_c.py::test_one"),
        entry("c-two-tests", "deselect", "gpt_c",
              nodes="tests/test_c.py::test_two, tests/test_c.py::test_three"),
    )  # fmt: skip
    out = tmp_path / "mr.yaml"
    run = cli(*jet(root, out, "--system", "gitlab"))
    assert run.code == 0, run
    (summary,) = [line for line in run.err.splitlines() if line.startswith(str(out))]
    assert summary == (
        f"{out}: 2 job(s) for gitlab/mr dgx_h100/dev; 1 skipped by quarantine (a-hangs); "
        "1 allowed to fail by quarantine (b-flaky); 1 node id(s) muted in 1 job(s) by "
        "quarantine (c-one-test); 2 node id(s) deselected in 1 job(s) by quarantine "
        "(c-two-tests)"
    )
    # Where no entry applies (GitHub asks for its L1), the summary says none.
    run = cli(*jet(root, out, "--system", "github", scope="mr-github"))
    assert run.code == 0, run
    (summary,) = [line for line in run.err.splitlines() if line.startswith(str(out))]
    assert summary == f"{out}: 2 job(s) for github/mr-github dgx_h100/dev; 1 allowed to fail " \
        "by quarantine (b-flaky)"  # fmt: skip


# --------------------------------------------------------------------------- the notes


WARNED = """
type: basic
format_version: 1
spec:
  name: "{test_case}_{environment}_{platforms}"
  model: bert
  build: bert-{environment}
  platforms: dgx_h100
  script: "pytest"
products:
  - test_case: [bert_a]
    products:
      - {environment: [dev], scope: [mr]}
"""


def test_the_warnings_note_gives_a_command_that_shows_them(
    tree: Callable, cli: Callable, tmp_path: Path
) -> None:
    root = jet_tree(tree, extra={"h100/bert.yaml": WARNED})
    out = tmp_path / "mr.yaml"
    run = cli(*jet(root, out, "--system", "gitlab"))
    assert run.code == 0, run
    (note,) = [line for line in run.err.splitlines() if "warning(s) in" in line]
    assert note.startswith("matrixgen: note: 1 warning(s) in ")
    assert "MATRIXGEN_QUIET=1 leaves this note out" in note
    hint = note.split("`")[1]
    assert hint == f"matrixgen validate --recipes {shlex.quote(str(root))}"
    # The hint runs as it is written: it shows the warning (validate exits 0: a
    # warning is no error).
    shown = subprocess.run(
        [sys.executable, "-m", "matrixgen", *shlex.split(hint)[1:]],
        capture_output=True,
        text=True,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stderr.count(": warning: ") == 1 and "1 warning(s)" in shown.stderr


def test_a_folder_with_a_space_is_quoted_in_the_hint(tmp_path: Path, cli: Callable) -> None:
    from tests.conftest import write_tree

    root = write_tree(
        tmp_path / "my recipes",
        {
            "h100/gpt.yaml": GPT,
            "_build-mcore-dev.yaml": BUILD,
            "_build-mcore-lts.yaml": BUILD_LTS,
            "h100/bert.yaml": WARNED,
        },
    )
    run = cli(*jet(root, tmp_path / "mr.yaml", "--system", "gitlab"))
    assert run.code == 0, run
    assert f"`matrixgen validate --recipes '{root}'`" in run.err


def test_matrixgen_quiet_leaves_the_notes_out_and_keeps_the_rest(
    tree: Callable, cli: Callable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = jet_tree(tree, entry("a-hangs", "skip", "gpt_a"), extra={"h100/bert.yaml": WARNED})
    out = tmp_path / "mr.yaml"
    loud = cli(*jet(root, out))
    assert loud.err.count("matrixgen: note:") == 2  # the warnings, the system
    monkeypatch.setenv("MATRIXGEN_QUIET", "1")
    quiet = cli(*jet(root, out))
    assert quiet.code == 0, quiet
    assert "note:" not in quiet.err
    # What the call wrote and what the quarantine did stay said.
    assert quiet.err == f"{out}: 3 job(s) for gitlab/mr dgx_h100/dev; 1 skipped by " \
        "quarantine (a-hangs)\n"  # fmt: skip
    # Only "1" silences: anything else is no switch.
    monkeypatch.setenv("MATRIXGEN_QUIET", "yes")
    assert cli(*jet(root, out)).err.count("matrixgen: note:") == 2
