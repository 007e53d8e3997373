"""What the command line prints: no line a CI log reader takes for a command,
whatever the recipe tree holds; faults of the machine (a closed or full stdout, a
deleted working directory, a read-only output location) end in one line and
exit 9, never a traceback."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from matrixgen.cli.output import GuardedStream, StreamError
from matrixgen.util.escape import terminal_text, unescape_terminal
from tests.escape_fixtures import HOSTILE, runner_commands
from tests.quarantine_fixtures import v2_files
from tests.tree_fixtures import HAND_TREE

REPO = Path(__file__).resolve().parents[1]

# What a recipe file can carry: any text but lone surrogates (not UTF-8).
RECIPE_TEXT = st.one_of(
    st.text(st.characters(exclude_categories=["Cs"]), min_size=1),
    HOSTILE.filter(lambda s: "\ud800" not in s and s != ""),
)


# ------------------------------------------------------------------ the stream guard


def test_guard_escapes_commands_a_line_would_carry() -> None:
    sink = io.StringIO()
    guard = GuardedStream(sink, "output")
    guard.write("ok line\n  ::add-mask::x\nsee ##[error]boom\r::warning::y\nhalf")
    assert sink.getvalue() == (
        "ok line\n  \\x3a:add-mask::x\nsee ##\\x5berror]boom\\r::warning::y\n"
    )
    guard.write(" done\n")  # a line is checked whole, not per write
    assert sink.getvalue().endswith("half done\n")
    guard.write_trusted("::error file=a::ours\n")
    assert sink.getvalue().endswith("\n::error file=a::ours\n")
    assert runner_commands(sink.getvalue()) == ["::error file=a::ours"]


def test_guard_passes_clean_text_unchanged() -> None:
    sink = io.StringIO()
    text = 'tests/unit/test_x.py::test_y[a]  "é" {"k": [1]}\n\tindented\n'
    GuardedStream(sink, "output").write(text)
    assert sink.getvalue() == text


class _Failing(io.StringIO):
    def __init__(self, exc: OSError) -> None:
        super().__init__()
        self.exc = exc

    def write(self, text: str) -> int:
        raise self.exc


def test_guard_turns_a_failing_stream_into_one_error() -> None:
    guard = GuardedStream(_Failing(BrokenPipeError(32, "Broken pipe")), "output")
    with pytest.raises(StreamError, match="broken pipe"):
        guard.write("x\n")
    guard.write("more\n")  # said once; later writes are dropped, not raised again
    closed = GuardedStream(None, "output")
    with pytest.raises(StreamError, match="closed"):
        closed.write("x\n")


# ------------------------------------------------------- hostile values, real commands


def _tree_with(root: Path, name: str, environment: str) -> Path:
    recipe = {
        "type": "basic",
        "format_version": 1,
        "spec": {
            "name": "{test_case}_{environment}",
            "model": "gpt",
            "build": "mcore-pyt-dev",
            "platforms": "dgx_h100",
        },
        "products": [
            {"test_case": [name], "products": [{"environment": ["dev"], "scope": ["mr"]}]},
            {"test_case": ["plain"], "products": [{"environment": [environment], "scope": ["mr"]}]},
        ],
    }
    root.mkdir(parents=True, exist_ok=True)
    (root / "_build-mcore-dev.yaml").write_text(textwrap.dedent(HAND_TREE["_build-mcore-dev.yaml"]))
    (root / "gpt.yaml").write_text(yaml.safe_dump(recipe, allow_unicode=True), encoding="utf-8")
    return root


def _finding_lines(err: str) -> list[str]:
    return [
        x
        for x in err.splitlines()
        if re.search(r":\d+:\d+: (error|warning): |^[^ ]+: (error|warning): ", x)
    ]


def _check_log(run_out: str, run_err: str, findings: int) -> None:
    commands = runner_commands(run_out) + runner_commands(run_err)
    # Only our own annotations, one per finding, each a well-formed command.
    assert len(commands) == findings, commands
    for command in commands:
        assert re.match(r"::(error|warning) file=[^:]*::", command), command


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=RECIPE_TEXT, environment=RECIPE_TEXT)
@example(name="a\n::add-mask::x", environment="dev\n::stop-commands::t")
@example(name="##[error]boom", environment="  ::error::x")
def test_hostile_values_reach_no_log_as_commands(
    cli: Callable,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    environment: str,
) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    root = _tree_with(tmp_path_factory.mktemp("hostile"), name, environment)
    # The values as the recipe file holds them (PyYAML's writer folds some breaks).
    written = yaml.safe_load((root / "gpt.yaml").read_text(encoding="utf-8"))
    name = written["products"][0]["test_case"][0]
    checked = cli("validate", "--recipes", root)
    assert checked.code in (0, 1), checked
    findings = [
        line for line in checked.err.splitlines() if re.search(r": (error|warning): ", line)
    ]
    _check_log(checked.out, checked.err, len(findings))
    listed = cli("list", "--recipes", root)
    # list annotates the errors that stop it, never the warnings (validate does).
    _check_log(listed.out, listed.err, len([f for f in findings if ": error: " in f]))
    if listed.code != 0:
        return
    rows = listed.out.splitlines()[2:]
    assert len(rows) == 2  # one line per job, whatever the values hold
    assert any(terminal_text(name) in row for row in rows)
    as_json = cli("list", "--recipes", root, "--format", "json")
    _check_log(as_json.out, "", 0)
    assert {j["test_case"] for j in json.loads(as_json.out)} == {name, "plain"}
    as_yaml = cli("list", "--recipes", root, "--format", "yaml")
    _check_log(as_yaml.out, "", 0)
    assert {j["test_case"] for j in yaml.safe_load(as_yaml.out)} == {name, "plain"}
    # The emitted files, printed: one spelling, safe in a log, the same values.
    where = "scope=mr,platform=dgx_h100,environment=dev"
    matrix = cli("github", "--recipes", root, "--target", f"system=github,{where}")
    if matrix.code == 0:
        _check_log(matrix.out, matrix.err, 0)
        assert name in {row["test_case"] for row in json.loads(matrix.out)["include"]}
    child = cli("gitlab", "--recipes", root, "--target", f"system=gitlab,{where}")
    if child.code == 0:
        _check_log(child.out, child.err, 0)
        assert any(name in text for text in _strings(yaml.safe_load(child.out)))


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def test_finding_lines_and_annotations_read_back(
    cli: Callable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    value = "nightyl\n::error::forged %0A 100%"
    root = _tree_with(tmp_path / "t", "case", "dev")
    recipe = yaml.safe_load((root / "gpt.yaml").read_text())
    recipe["products"][0]["cadence"] = [value]
    (root / "gpt.yaml").write_text(yaml.safe_dump(recipe))
    run = cli("validate", "--recipes", root)
    assert run.code == 1
    (line,) = [x for x in run.err.splitlines() if ": error: unknown cadence" in x]
    (command,) = [x for x in runner_commands(run.err) if "::unknown cadence" in x]
    assert terminal_text(value) in line
    message = command.partition("::")[2].partition("::")[2]
    for code, char in (("%0D", "\r"), ("%0A", "\n"), ("%25", "%")):
        message = message.replace(code, char)
    assert terminal_text(value) in message and value in unescape_terminal(message)


# ---------------------------------------------------------------- faults of the machine


def _matrixgen(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "matrixgen", *args],
        text=True,
        env=env,
        timeout=120,
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.fixture
def small_tree(tmp_path: Path) -> Path:
    return _tree_with(tmp_path / "recipes", "case", "dev")


def _one_line_error(stderr: str, wanted: str) -> None:
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("matrixgen: ")]
    assert len(lines) == 1 and wanted in lines[0], stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_full_stdout(small_tree: Path) -> None:
    with open("/dev/full", "w") as full:
        run = _matrixgen("list", "--recipes", str(small_tree), stdout=full, stderr=subprocess.PIPE)
    assert run.returncode == 9
    _one_line_error(run.stderr, "cannot write to standard output: No space left on device")


def test_stdout_closed_by_the_reader(small_tree: Path) -> None:
    read, write = os.pipe()
    os.close(read)  # nobody will read: every write gets EPIPE
    try:
        run = _matrixgen("list", "--recipes", str(small_tree), stdout=write, stderr=subprocess.PIPE)
    finally:
        os.close(write)
    assert run.returncode == 9
    _one_line_error(run.stderr, "standard output: it was closed before everything was written")


def test_stdout_not_open_at_all(small_tree: Path) -> None:
    run = _matrixgen(
        "list", "--recipes", str(small_tree), stderr=subprocess.PIPE, preexec_fn=lambda: os.close(1)
    )
    assert run.returncode == 9
    _one_line_error(run.stderr, "cannot write to standard output")
    # A command that prints nothing to stdout does not need it.
    quiet = _matrixgen(
        "validate",
        "--recipes",
        str(small_tree),
        stderr=subprocess.PIPE,
        preexec_fn=lambda: os.close(1),
    )
    assert quiet.returncode == 0, quiet.stderr


def test_stderr_closed_does_not_stop_the_work(small_tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run = _matrixgen(
        "generate", "--recipes", str(small_tree), "--out", str(out), stdout=subprocess.PIPE,
        preexec_fn=lambda: os.close(2),
    )  # fmt: skip
    assert run.returncode == 0 and "target" in run.stdout
    assert any(out.iterdir())
    failing = _matrixgen(
        "list", "--recipes", str(tmp_path / "nope"), stdout=subprocess.PIPE,
        preexec_fn=lambda: os.close(2),
    )  # fmt: skip
    assert failing.returncode == 2  # the message is lost with stderr; the code is not


def test_deleted_working_directory(
    cli: Callable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    run = cli("list")
    assert run.code == 9
    _one_line_error(run.err, "the working directory does not exist any more")


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory nothing can be written in: a read-only tmpfs where mounting is
    allowed (root in a container), else a directory without write permission."""
    path = tmp_path / "ro"
    path.mkdir()
    mounted = (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "ro,size=64k", "matrixgen-ro", str(path)],
            capture_output=True,
        ).returncode
        == 0
        if os.geteuid() == 0
        else False
    )
    if not mounted:
        if os.geteuid() == 0:
            pytest.skip("cannot mount a read-only tmpfs, and root writes anywhere")
        path.chmod(0o555)
    try:
        yield path
    finally:
        if mounted:
            subprocess.run(["umount", str(path)], capture_output=True)
        else:
            path.chmod(0o755)


def test_read_only_output_location(cli: Callable, small_tree: Path, read_only_dir: Path) -> None:
    run = cli("generate", "--recipes", small_tree, "--out", read_only_dir / "out")
    assert run.code == 9, run
    _one_line_error(run.err, str(read_only_dir))
    single = cli(
        "github",
        "--recipes",
        small_tree,
        "--target",
        "scope=mr,platform=dgx_h100,environment=dev",
        "--output",
        read_only_dir / "m.json",
    )
    assert single.code == 9, single
    _one_line_error(single.err, str(read_only_dir))


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(tracker=RECIPE_TEXT, owner=RECIPE_TEXT, reason=RECIPE_TEXT, node=RECIPE_TEXT)
@example(
    tracker="#1", owner="o\n::add-mask::t ##[error]o", reason="r\r::stop-commands::s",
    node="n\u2028::warning::w",
)  # fmt: skip
def test_hostile_quarantine_fields_reach_no_log_as_commands(
    cli: Callable,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    tracker: str,
    owner: str,
    reason: str,
    node: str,
) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    entries = {
        "entries": [
            {"id": "skipped", "tracker": tracker, "kind": "flaky", "action": "skip",
             "match": {"test_case": "ep8_muon"}, "owner": owner, "expires": "2099-01-01",
             "reason": reason},
            {"id": "deselected", "tracker": tracker, "kind": "flaky", "action": "deselect",
             "match": {"test_case": "tests/unit_tests/models/**/*.py"}, "node_ids": [node],
             "owner": owner, "expires": "2099-01-01", "reason": reason},
        ]
    }  # fmt: skip
    files = v2_files(quarantine=yaml.safe_dump(entries, allow_unicode=True))
    root = tmp_path_factory.mktemp("q")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    checked = cli("validate", "--recipes", root)
    _check_log(checked.out, checked.err, len(_finding_lines(checked.err)))
    listed = cli("quarantine", "list", "--recipes", root)
    _check_log(listed.out, listed.err, len(_finding_lines(listed.err)))
    if tracker == "#1":
        assert listed.code == 0, listed
    if listed.code == 0:
        assert len(listed.out.splitlines()) == 2 + 2  # header, rule, one line per entry
    for command in (
        ["list", "--with-quarantined"],
        ["generate", "--out", str(root / "out")],
        ["quarantine", "audit"],
    ):
        run = cli(*command, "--recipes", root)
        _check_log(run.out, run.err, len(_finding_lines(run.err)))


def test_read_only_github_output(
    cli: Callable, small_tree: Path, read_only_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_OUTPUT", str(read_only_dir / "github_output"))
    run = cli(
        "github", "--recipes", small_tree, "--target", "scope=mr,platform=dgx_h100,environment=dev",
        "--github-output",
    )  # fmt: skip
    assert run.code == 9, run
    _one_line_error(run.err, "--github-output: cannot append to")
