"""util.atomic: whole-file writes that never follow a link, modes from the umask,
a full disk that leaves the old file, temporary files of killed writers removed."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matrixgen.util import atomic
from matrixgen.util.atomic import (
    WriteError,
    append_whole,
    default_mode,
    host_tag,
    remove_stale_temps,
    write_atomic,
)
from matrixgen.util.readfile import NotRegularFile, read_regular


@contextlib.contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_a_new_file_is_written_whole_with_the_umask_mode(tmp_path: Path) -> None:
    path = tmp_path / "out.json"
    with umask(0o022):
        write_atomic(path, b"one")
    assert path.read_bytes() == b"one" and stat.S_IMODE(path.stat().st_mode) == 0o644
    with umask(0o077):
        write_atomic(path, b"two")
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    write_atomic(path, b"three", mode=0o640)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640 and path.read_bytes() == b"three"
    assert leftovers(tmp_path) == []


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=0, max_value=0o777))
def test_the_mode_is_what_open_would_give(
    tmp_path_factory: pytest.TempPathFactory, mask: int
) -> None:
    directory = tmp_path_factory.mktemp("modes")
    with umask(mask):
        assert default_mode() == 0o666 & ~mask
        write_atomic(directory / "a", b"x")
        with open(directory / "b", "w"):
            pass
    assert stat.S_IMODE((directory / "a").stat().st_mode) == stat.S_IMODE(
        (directory / "b").stat().st_mode
    )


def test_a_link_at_the_destination_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    link = tmp_path / "out.json"
    link.symlink_to(victim)
    with pytest.raises(WriteError, match="symbolic link"):
        write_atomic(link, b"{}")
    assert victim.read_text() == "precious\n" and link.is_symlink()
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(WriteError, match="symbolic link"):
        write_atomic(dangling, b"{}")
    assert not (tmp_path / "nowhere").exists() and leftovers(tmp_path) == []


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_a_special_destination_is_refused(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "out.json"
    if kind == "directory":
        path.mkdir()
    else:
        os.mkfifo(path)
    with pytest.raises(WriteError, match="not a file"):
        write_atomic(path, b"{}")


def test_a_full_disk_leaves_the_old_file_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "out.json"
    write_atomic(path, b"old content\n")
    real_write = os.write
    calls = []

    def full(fd: int, data: bytes) -> int:
        calls.append(len(data))
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, bytes(data)[:3])  # a short write, then the disk is full

    monkeypatch.setattr(atomic.os, "write", full)
    with pytest.raises(WriteError, match="No space left on device") as caught:
        write_atomic(path, b"new content that does not fit\n")
    assert caught.value.errno == errno.ENOSPC and len(calls) == 2
    assert path.read_bytes() == b"old content\n" and leftovers(tmp_path) == []


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs, where this machine lets us mount one (root on Linux)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if result.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (the patched-write test covers a full disk)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_a_really_full_disk_leaves_the_old_file_intact(tiny_tmpfs: Path) -> None:
    path = tiny_tmpfs / "out.json"
    write_atomic(path, b"old\n" * 1000)
    with pytest.raises(WriteError) as caught:
        write_atomic(path, b"x" * 200_000)
    assert caught.value.errno == errno.ENOSPC
    assert path.read_bytes() == b"old\n" * 1000 and leftovers(tiny_tmpfs) == []
    append_target = tiny_tmpfs / "github_output"
    append_target.write_bytes(b"a=1\n")
    with pytest.raises(WriteError):
        append_whole(append_target, b"b=" + b"y" * 200_000 + b"\n")
    assert append_target.read_bytes() == b"a=1\n"


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_temporary_files_of_killed_writers_are_removed(tmp_path: Path) -> None:
    name = "out.json"
    dead = tmp_path / f".{name}.{dead_pid()}@{host_tag()}.abcdefgh.tmp"
    alive = tmp_path / f".{name}.{os.getppid()}@{host_tag()}.ijklmnop.tmp"
    other_host = tmp_path / f".{name}.{dead_pid()}@00000000.qrstuvwx.tmp"
    foreign = tmp_path / f".{name}.backup.tmp"  # not a name we make
    old_style = tmp_path / f".{name}.k2j3h4l5.tmp"  # an older writer's mkstemp name
    for path in (dead, alive, other_host, foreign, old_style):
        path.write_text("partial")
    write_atomic(tmp_path / name, b"{}")
    assert not dead.exists()
    assert alive.exists() and other_host.exists() and foreign.exists() and old_style.exists()
    # An hour later only age tells, and it says stale; a foreign name is never touched.
    hour_ago = time.time() - 3700
    for path in (alive, other_host, old_style, foreign):
        os.utime(path, (hour_ago, hour_ago))
    assert remove_stale_temps(tmp_path, name) == sorted(
        p.name for p in (alive, other_host, old_style)
    )
    assert foreign.exists() and (tmp_path / name).read_bytes() == b"{}"


def test_under_a_lock_every_temporary_file_of_ours_goes(tmp_path: Path) -> None:
    live = tmp_path / f".q.yaml.{os.getppid()}@{host_tag()}.abcdefgh.tmp"
    live.write_text("x")
    (tmp_path / ".q.yaml.notes.txt").write_text("mine")
    assert remove_stale_temps(tmp_path, "q.yaml", every=True) == [live.name]
    assert (tmp_path / ".q.yaml.notes.txt").exists()


def test_a_writers_temporary_file_is_one_cleanup_knows_as_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[str] = []
    mkstemp = atomic.tempfile.mkstemp

    def recording(**kwargs: str) -> tuple[int, str]:
        fd, name = mkstemp(**kwargs)
        made.append(os.path.basename(name))
        return fd, name

    monkeypatch.setattr(atomic.tempfile, "mkstemp", recording)
    write_atomic(tmp_path / "out.json", b"{}")
    info = os.lstat(tmp_path / "out.json")
    assert atomic.is_stale_temp(made[0], "out.json", info, every=True)


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=1, max_size=30))
def test_cleanup_never_removes_a_file_that_is_not_a_temporary_of_name(
    tmp_path_factory: pytest.TempPathFactory, suffix: str
) -> None:
    directory = tmp_path_factory.mktemp("stale")
    name = "out.json"
    candidate = f".{name}.{suffix}"
    if "/" in candidate or "\0" in candidate or len(candidate.encode()) > 200:
        return
    path = directory / candidate
    try:
        path.write_text("keep")
    except (OSError, UnicodeEncodeError):
        return
    removed = remove_stale_temps(directory, name, every=True)
    ours = atomic._TEMP_TAIL.fullmatch(suffix) is not None
    assert path.exists() == (not ours) and (removed == [candidate]) == ours


def test_append_whole_separates_and_survives_a_full_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "github_output"
    path.write_bytes(b"earlier=1")  # an earlier step left its line open
    append_whole(path, b"matrix={}\n")
    assert path.read_bytes() == b"earlier=1\nmatrix={}\n"
    real_write = os.write

    def full(fd: int, data: bytes) -> int:
        real_write(fd, bytes(data)[:4])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(atomic.os, "write", full)
    with pytest.raises(WriteError, match="the file is as it was"):
        append_whole(path, b"shards=2\n")
    assert path.read_bytes() == b"earlier=1\nmatrix={}\n"


def test_append_whole_refuses_links_and_fifos_without_hanging(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    link = tmp_path / "link"
    link.symlink_to(victim)
    with pytest.raises(WriteError, match="symbolic link"):
        append_whole(link, b"x=1\n")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(WriteError, match="FIFO"):
        append_whole(fifo, b"x=1\n")
    assert victim.read_text() == "precious"


def test_read_regular_refuses_what_is_not_a_file_without_hanging(tmp_path: Path) -> None:
    assert read_regular(tmp_path / "missing") is None
    (tmp_path / "plain").write_bytes(b"data")
    assert read_regular(tmp_path / "plain") == b"data"
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    (tmp_path / "null").symlink_to(os.devnull)
    for name, kind in (("fifo", "FIFO"), ("dir", "directory"), ("null", "symbolic link")):
        with pytest.raises(NotRegularFile, match=kind):
            read_regular(tmp_path / name)
    with pytest.raises(NotRegularFile, match="device"):
        read_regular(Path(os.devnull))


def test_read_regular_with_a_limit_reads_one_byte_past_it(tmp_path: Path) -> None:
    # One byte more than the limit is how a caller tells a file too large.
    (tmp_path / "plain").write_bytes(b"0123456789")
    assert read_regular(tmp_path / "plain", limit=3) == b"0123"
    assert read_regular(tmp_path / "plain", limit=10) == b"0123456789"
    assert read_regular(tmp_path / "plain", limit=0) == b"0"
