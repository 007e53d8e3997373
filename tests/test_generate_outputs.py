"""Safe outputs: `generate --out` owns its folder through a manifest (files of
targets that are gone are removed, a file it did not write never is), runs into
one folder are serialised by a lock, and `--output` / `--github-output` never
write through a link, keep the old file on a full disk and take the umask."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matrixgen.emit.generate import TargetOutput, generate_all
from matrixgen.generate.output import LOCK_NAME, MANIFEST_NAME, write_outputs
from matrixgen.model.errors import EnvironmentFault, OutputError
from matrixgen.util import atomic
from matrixgen.util.lockfile import hold
from tests.emit_fixtures import V1_TREE, V2_TREE, v2_generation

GITHUB_TARGET = "gh-l1-h100"


def target_files(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.glob("[!.]*"))}


@pytest.fixture(scope="module")
def template() -> TargetOutput:
    generation = v2_generation()
    return generate_all(generation, list(generation.tree.config.targets)[:1])[0]


def outputs(template: TargetOutput, names: list[str], tag: str = "") -> list[TargetOutput]:
    return [msgspec.structs.replace(template, file=n, text=f"{n} {tag}\n") for n in names]


def test_files_of_targets_that_are_gone_are_removed_and_no_other(
    tmp_path: Path, template: TargetOutput
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "README.md").write_text("mine\n")
    (out / "hand.json").write_text("{}\n")  # a name generate could write, never written
    write_outputs(outputs(template, ["a.json", "b.yml", "c.json"], "1"), out)
    assert json.loads((out / MANIFEST_NAME).read_text())["files"].keys() == {
        "a.json",
        "b.yml",
        "c.json",
    }
    (out / "c.json").write_text("edited by hand\n")
    report = write_outputs(outputs(template, ["a.json"], "2"), out, targets_now=["a.json"])
    assert report.removed == ("b.yml",)
    assert report.kept == (("c.json", "changed since matrixgen wrote it: left alone"),)
    assert target_files(out) == {
        "README.md": b"mine\n",
        "a.json": b"a.json 2\n",
        "c.json": b"edited by hand\n",
        "hand.json": b"{}\n",
    }
    # c.json is no longer ours: a later run leaves it too, without a word.
    assert write_outputs(outputs(template, ["a.json"], "3"), out).kept == ()
    assert (out / "c.json").exists() and not (out / LOCK_NAME).exists()


def test_a_target_still_defined_keeps_its_file(tmp_path: Path, template: TargetOutput) -> None:
    out = tmp_path / "out"
    write_outputs(outputs(template, ["a.json", "b.json"]), out)
    # `generate --target-name a`: b's target still exists, its file stays (and stays ours).
    report = write_outputs(outputs(template, ["a.json"]), out, targets_now=["a.json", "b.json"])
    assert report.removed == () and (out / "b.json").exists()
    assert write_outputs(outputs(template, ["a.json"]), out).removed == ("b.json",)


def test_a_forged_manifest_cannot_make_generate_delete_anything(
    tmp_path: Path, template: TargetOutput
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    outside = tmp_path / "precious.json"
    outside.write_text("{}\n")
    (out / "linked.json").symlink_to(outside)
    import hashlib

    digest = hashlib.sha256(b"{}\n").hexdigest()
    forged = {n: digest for n in ("../precious.json", "linked.json", ".hidden.json", "x.sh")}
    (out / MANIFEST_NAME).write_text(json.dumps({"format": 1, "files": forged}))
    write_outputs(outputs(template, ["a.json"]), out)
    assert outside.read_text() == "{}\n" and (out / "linked.json").is_symlink()
    (out / MANIFEST_NAME).write_text("not json")
    report = write_outputs(outputs(template, ["a.json"]), out)
    assert report.notes and "not a manifest matrixgen wrote" in report.notes[0]


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ('{"format": 1, "files": ' + "[" * 60_000 + "]" * 60_000 + "}", "nested deeper than 100"),
        ('{"format": 1, "files": {}, "pad": "' + "x" * (16 * 1024 * 1024) + '"}', "more than the"),
        ('{"format": 1, "files": {"a.json": NaN}}', "NaN is not a JSON value"),
    ],
)
def test_a_manifest_too_deep_or_too_large_is_ignored_with_why(
    tmp_path: Path, template: TargetOutput, body: str, why: str
) -> None:
    """A pull request can commit one into the --out folder: 60,000 levels were a
    RecursionError. It is ignored (no file removed), and the note says why."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.json").write_text("{}\n")
    (out / MANIFEST_NAME).write_text(body)
    report = write_outputs(outputs(template, ["a.json"]), out)
    assert len(report.notes) == 1
    assert "not a manifest matrixgen wrote (" in report.notes[0] and why in report.notes[0]
    assert report.notes[0].endswith("): ignored, no file removed")
    assert (out / "old.json").exists()


NAMES = st.from_regex(r"[a-z][a-z0-9_-]{0,8}\.(json|yml)", fullmatch=True)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    runs=st.lists(st.lists(NAMES, max_size=5, unique=True), min_size=1, max_size=4),
    foreign=st.dictionaries(NAMES, st.binary(max_size=20), max_size=4),
)
def test_the_folder_holds_the_last_run_and_every_foreign_file(
    tmp_path_factory: pytest.TempPathFactory,
    template: TargetOutput,
    runs: list[list[str]],
    foreign: dict[str, bytes],
) -> None:
    out = tmp_path_factory.mktemp("owned")
    for name, data in foreign.items():
        (out / name).write_bytes(data)
    for n, names in enumerate(runs):
        write_outputs(outputs(template, names, str(n)), out)
        # What a run writes over becomes its own; every other foreign file survives.
        foreign = {k: v for k, v in foreign.items() if k not in names}
    last = {name: f"{name} {len(runs) - 1}\n".encode() for name in runs[-1]}
    assert target_files(out) == {**foreign, **last}


def test_a_linked_out_folder_or_file_is_refused(tmp_path: Path, template: TargetOutput) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "out").symlink_to(real)
    with pytest.raises(OutputError, match="symbolic link") as caught:
        write_outputs(outputs(template, ["a.json"]), tmp_path / "out")
    assert caught.value.exit_code == 12 and list(real.iterdir()) == []
    out = tmp_path / "plain"
    out.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (out / "a.json").symlink_to(victim)
    with pytest.raises(OutputError, match="never writes through links"):
        write_outputs(outputs(template, ["a.json"]), out)
    assert victim.read_text() == "precious\n"


def test_a_full_disk_leaves_the_old_files(
    tmp_path: Path, template: TargetOutput, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    write_outputs(outputs(template, ["a.json", "b.json"], "old"), out)
    before = target_files(out)

    def full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(atomic.os, "write", full)
    with pytest.raises(EnvironmentFault, match="No space left on device") as caught:
        write_outputs(outputs(template, ["a.json"], "new"), out)
    assert caught.value.exit_code == 9  # the machine, not the input
    monkeypatch.undo()
    assert target_files(out) == before
    assert sorted(p.name for p in out.iterdir() if p.name.endswith(".tmp")) == []


# --------------------------------------------------------------------------- the CLI


def run_generate(root: Path, out: Path, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "matrixgen", "generate", "--recipes", str(root), "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )


def test_two_generates_into_one_folder_leave_one_runs_files(
    tree: Callable[..., Path], tmp_path: Path, cli: Callable
) -> None:
    v2, v1 = tree(V2_TREE), tree(V1_TREE)
    alone = {}
    for name, root in (("v2", v2), ("v1", v1)):
        assert cli("generate", "--recipes", root, "--out", tmp_path / name).code == 0
        alone[name] = target_files(tmp_path / name)
    assert not set(alone["v1"]) & set(alone["v2"])
    shared = tmp_path / "shared"
    runs = [run_generate(v2, shared), run_generate(v1, shared)]
    for run in runs:
        assert run.wait(120) == 0, run.stderr.read() if run.stderr else ""
    final = target_files(shared)
    assert final in (alone["v1"], alone["v2"])
    recorded = json.loads((shared / MANIFEST_NAME).read_text())["files"]
    assert sorted(recorded) == sorted(final)
    assert sorted(p.name for p in shared.iterdir() if p.name.startswith(".")) == [MANIFEST_NAME]


@pytest.mark.slow  # seconds by itself (tests/tiers.py)
def test_generate_waits_for_the_folders_lock_and_names_its_holder(
    tree: Callable[..., Path], tmp_path: Path, cli: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tree(V2_TREE)
    out = tmp_path / "out"
    out.mkdir()
    with hold(out / LOCK_NAME, timeout=0, command="matrixgen generate"):
        monkeypatch.setenv("MATRIXGEN_LOCK_TIMEOUT", "0.3")
        run = cli("generate", "--recipes", root, "--out", out)
        assert run.code == 12, run
        assert f"pid {os.getpid()}" in run.err and "matrixgen generate" in run.err
        assert "nothing was written" in run.err and target_files(out) == {}
        # A run that may wait does, and writes once the lock is let go.
        waiting = run_generate(root, out, MATRIXGEN_LOCK_TIMEOUT="60")
        time.sleep(3)
        assert waiting.poll() is None and target_files(out) == {}
    assert waiting.wait(120) == 0 and GITHUB_TARGET + ".json" in target_files(out)


def test_output_refuses_a_link_and_takes_the_umask(
    tree: Callable[..., Path], tmp_path: Path, cli: Callable
) -> None:
    root = tree(V2_TREE)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    link = tmp_path / "matrix.json"
    link.symlink_to(victim)
    run = cli("github", "--recipes", root, "--target-name", GITHUB_TARGET, "--output", link)
    assert run.code == 12 and "symbolic link" in run.err and victim.read_text() == "precious\n"
    plain = tmp_path / "plain.json"
    old = os.umask(0o022)
    try:
        assert (
            cli("github", "--recipes", root, "--target-name", GITHUB_TARGET, "--output", plain).code
            == 0
        )
        assert plain.stat().st_mode & 0o777 == 0o644
        out = tmp_path / "out"
        assert cli("generate", "--recipes", root, "--out", out).code == 0
        assert {p.stat().st_mode & 0o777 for p in out.iterdir()} == {0o644}
    finally:
        os.umask(old)
    assert json.loads(plain.read_text())["include"]


def test_github_output_appends_and_survives_a_full_disk(
    tree: Callable[..., Path], tmp_path: Path, cli: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tree(V2_TREE)
    target = tmp_path / "github_output"
    target.write_text("earlier=1")
    monkeypatch.setenv("GITHUB_OUTPUT", str(target))
    args = ("github", "--recipes", root, "--target-name", GITHUB_TARGET, "--github-output")
    assert cli(*args).code == 0
    after = target.read_text()
    assert after.startswith("earlier=1\nshards<<") and "\nmatrix<<" in after
    real_write = os.write

    def full(fd: int, data: bytes) -> int:
        real_write(fd, bytes(data)[:10])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(atomic.os, "write", full)
    run = cli(*args)
    assert run.code == 9 and "No space left on device" in run.err
    assert target.read_text() == after
    monkeypatch.undo()
    target.unlink()
    target.symlink_to(tmp_path / "elsewhere")
    monkeypatch.setenv("GITHUB_OUTPUT", str(target))
    assert cli(*args).code == 12 and not (tmp_path / "elsewhere").exists()
