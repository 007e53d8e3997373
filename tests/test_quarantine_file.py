"""The quarantine file must be a regular file holding a list of entries: anything
else stops validate, list, generate and the quarantine commands (exit 7 when the
file cannot be read, 1 when what it holds is wrong), never silently lets the
quarantined jobs back in and never hangs. Edits time out on a held lock, naming
its holder, and clean up what killed edits left."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from matrixgen.util.atomic import host_tag
from matrixgen.util.lockfile import hold
from tests.quarantine_fixtures import v2_files

ADD = (
    "quarantine", "add", "--test-case", "cp2_*", "--tracker", "#9", "--kind", "broken",
    "--action", "skip", "--scope", "github/L1", "--owner", "me", "--reason", "hangs",
)  # fmt: skip


def make_special(root: Path, kind: str) -> None:
    path = root / "quarantine.yaml"
    if path.exists() or path.is_symlink():
        path.unlink()
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "devnull":
        path.symlink_to(os.devnull)
    elif kind == "outside":
        (root.parent / "elsewhere.yaml").write_text("entries: []\n")
        path.symlink_to("../elsewhere.yaml")


def run_cli(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The CLI in a process of its own, with a deadline."""
    return subprocess.run(
        [sys.executable, "-m", "matrixgen", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        check=False,
    )


COMMANDS = (
    ["validate"],
    ["list"],
    ["generate"],
    ["quarantine", "list"],
    [*ADD],
    ["quarantine", "audit"],
)


@pytest.mark.parametrize("kind", ["directory", "fifo", "devnull", "outside"])
def test_a_quarantine_file_that_is_not_a_regular_file_stops_everything(
    tree: Callable[..., Path], cli: Callable, tmp_path: Path, kind: str
) -> None:
    root = tree(v2_files())
    make_special(root, kind)
    out = tmp_path / f"out-{kind}"
    for command in COMMANDS:
        args = [*command, "--recipes", root, *(["--out", out] if command == ["generate"] else [])]
        if kind == "fifo" and command in (["list"], ["generate"], ["quarantine", "audit"]):
            continue  # they read the file as validate or `quarantine list` does
        if kind == "fifo":
            # In a process of its own, with a deadline: a FIFO opened blocking would hang.
            result = run_cli(*args)
            code, err = result.returncode, result.stderr
        else:
            run = cli(*args)
            code, err = run.code, run.err
        assert code == 7, (command, err)
        assert "quarantine.yaml" in err and "Traceback" not in err
        assert {"directory": "a directory", "fifo": "FIFO", "devnull": "'/dev/null'"}.get(
            kind, "leaves the recipe tree"
        ) in err
    assert not out.exists()
    if kind == "outside":
        assert (root.parent / "elsewhere.yaml").read_text() == "entries: []\n"


@pytest.mark.parametrize(
    ("text", "what"),
    [("entries: ~\n", "nothing (null)"), ("entries:\n", "nothing (null)"),
     ("entries: 3\n", "a number"), ("entries: {id: x}\n", "a mapping")],
)  # fmt: skip
def test_entries_must_be_a_list(
    tree: Callable[..., Path], cli: Callable, tmp_path: Path, text: str, what: str
) -> None:
    root = tree(v2_files(quarantine=text))
    validate = cli("validate", "--recipes", root)
    assert validate.code == 1, validate
    assert "quarantine.yaml:1:" in validate.err and f"entries holds {what}" in validate.err
    assert "write `entries: []`" in validate.err and "please report" not in validate.err
    generate = cli("generate", "--recipes", root, "--out", tmp_path / "out")
    assert generate.code == 1 and not (tmp_path / "out").exists()
    assert cli("list", "--recipes", root).code == 1
    listed = cli("quarantine", "list", "--recipes", root)
    assert listed.code == 7 and "entries holds" in listed.err
    added = cli(*ADD, "--recipes", root)
    assert added.code == 7 and "please report" not in added.err
    assert (root / "quarantine.yaml").read_text() == text
    assert cli("validate", "--recipes", tree(v2_files(quarantine="entries: []\n"))).code == 0


def test_an_edit_waits_for_a_held_lock_then_names_its_holder(
    tree: Callable[..., Path], cli: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tree(v2_files())
    before = (root / "quarantine.yaml").read_bytes()
    monkeypatch.setenv("MATRIXGEN_LOCK_TIMEOUT", "0.5")
    with hold(root / ".quarantine.yaml.lock", timeout=0, command="matrixgen quarantine lift"):
        run = cli(*ADD, "--recipes", root)
    assert run.code == 7, run
    assert f"pid {os.getpid()}" in run.err and "matrixgen quarantine lift" in run.err
    assert "gave up after 0.5 s" in run.err and "MATRIXGEN_LOCK_TIMEOUT" in run.err
    assert (root / "quarantine.yaml").read_bytes() == before
    # Released: the same edit goes through, and leaves no lock file behind.
    assert cli(*ADD, "--recipes", root).code == 0
    assert not (root / ".quarantine.yaml.lock").exists()
    monkeypatch.setenv("MATRIXGEN_LOCK_TIMEOUT", "later")
    bad = cli(*ADD, "--recipes", root)
    assert bad.code == 2 and "MATRIXGEN_LOCK_TIMEOUT='later'" in bad.err


def test_an_edit_removes_what_killed_edits_left(tree: Callable[..., Path], cli: Callable) -> None:
    root = tree(v2_files())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    leftovers = [
        root / f".quarantine.yaml.{child.pid}@{host_tag()}.abcdefgh.tmp",
        root / ".quarantine.yaml.k2j3h4l5.tmp",  # an older version's temporary name
    ]
    for path in leftovers:
        path.write_text("entries: [half")
    (root / ".quarantine.yaml.lock").write_text("pid=1\nhost=gone\n")  # a killed edit's lock
    (root / ".quarantine.yaml.notes").write_text("not ours")
    run = cli(*ADD, "--recipes", root)
    assert run.code == 0, run
    assert not any(p.exists() for p in leftovers)
    assert sorted(p.name for p in root.iterdir() if p.name.startswith(".")) == [
        ".quarantine.yaml.notes"
    ]


def test_an_edit_keeps_the_files_mode_and_a_new_file_gets_the_umask(
    tree: Callable[..., Path], cli: Callable
) -> None:
    root = tree(v2_files(quarantine=None))
    old = os.umask(0o022)
    try:
        assert cli(*ADD, "--recipes", root).code == 0
    finally:
        os.umask(old)
    path = root / "quarantine.yaml"
    assert path.stat().st_mode & 0o777 == 0o644
    path.chmod(0o664)
    assert cli("quarantine", "lift", "--tracker", "#9", "--recipes", root).code == 0
    assert path.stat().st_mode & 0o777 == 0o664
    assert json.loads(cli("quarantine", "list", "--recipes", root, "--format", "json").out) == []


MUON_EXPIRES = "expires: 2099-01-01\n    reason: loss"


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        (MUON_EXPIRES, MUON_EXPIRES.replace("2099-01-01", '"99999-01-01"'), "expires"),
        (MUON_EXPIRES, MUON_EXPIRES.replace("2099-01-01", '"2099-02-30"'), "expires"),
        ("id: ep8-muon", 'id: "a|b`<script>"', "id"),
        ("kind: broken", "kind: broken\n    kind: flaky", 'duplicate key "kind"'),
        ("owner: bob", "owner: bob\n    ownr: bob", "ownr"),
    ],
)
def test_audit_fails_on_an_entry_it_cannot_read(
    tree: Callable[..., Path], cli: Callable, old: str, new: str, said: str
) -> None:
    # An entry the file's checks leave out is a problem of the file, not "no problems":
    # audit says where it is and fails, as it does on a recipe's error.
    from tests.quarantine_fixtures import QUARANTINE

    assert old in QUARANTINE
    root = tree(v2_files(quarantine=QUARANTINE.replace(old, new, 1)))
    for fmt in ("table", "json"):
        run = cli("quarantine", "audit", "--recipes", root, "--format", fmt)
        assert run.code == 1, run
        assert "quarantine.yaml:" in run.err and said in run.err and "Traceback" not in run.err
