"""util.lockfile: waits time out, the holder is named, lock files do not outlive
their holder, and a lock file left by a killed holder is no lock."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from matrixgen.util.lockfile import (
    DEFAULT_TIMEOUT,
    Holder,
    LockError,
    LockTimeout,
    hold,
    timeout_from_env,
)


def test_a_held_lock_times_out_naming_its_holder(tmp_path: Path) -> None:
    lock = tmp_path / ".thing.lock"
    with hold(lock, timeout=0, command="matrixgen quarantine add") as me:
        assert me.pid == os.getpid()
        started = time.monotonic()
        with pytest.raises(LockTimeout) as caught, hold(lock, timeout=0.3):
            pass
        waited = time.monotonic() - started
    assert 0.3 <= waited < 3
    message = caught.value.message
    assert f"pid {os.getpid()}" in message and f"host {socket.gethostname()}" in message
    assert "matrixgen quarantine add" in message and "MATRIXGEN_LOCK_TIMEOUT" in message
    assert caught.value.holder.pid == os.getpid()
    assert not lock.exists()  # the holder removed it when done


def test_a_waiter_gets_the_lock_when_the_holder_lets_go(tmp_path: Path) -> None:
    lock = tmp_path / ".out.lock"
    script = textwrap.dedent(
        f"""
        import time
        from matrixgen.util.lockfile import hold
        with hold({str(lock)!r}, timeout=0):
            print("held", flush=True)
            time.sleep(0.6)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "held\n"
    started = time.monotonic()
    with hold(lock, timeout=20) as me:
        assert time.monotonic() - started > 0.2  # it did wait
        assert Holder.parse(lock.read_text()).pid == me.pid
    assert child.wait(10) == 0


def test_a_lock_file_left_by_a_killed_holder_is_taken_over(tmp_path: Path) -> None:
    lock = tmp_path / ".q.lock"
    script = (
        "import os\nfrom matrixgen.util.lockfile import hold\n"
        f"with hold({str(lock)!r}):\n    os._exit(9)\n"
    )
    assert subprocess.run([sys.executable, "-c", script], check=False).returncode == 9
    assert lock.exists()  # killed before it could clean up
    with hold(lock, timeout=0):
        pass
    assert not lock.exists()


def test_a_link_at_the_lock_path_is_refused(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / ".q.lock").symlink_to(victim)
    with pytest.raises(LockError, match="symbolic link"), hold(tmp_path / ".q.lock", timeout=0):
        pass
    assert victim.read_text() == "precious"


def test_the_timeout_comes_from_the_environment() -> None:
    assert timeout_from_env({}) == DEFAULT_TIMEOUT == 30
    assert timeout_from_env({"MATRIXGEN_LOCK_TIMEOUT": "2.5"}) == 2.5
    assert timeout_from_env({"MATRIXGEN_LOCK_TIMEOUT": "0"}) == 0
    for bad in ("soon", "-1", "inf", "nan"):
        with pytest.raises(ValueError, match="MATRIXGEN_LOCK_TIMEOUT"):
            timeout_from_env({"MATRIXGEN_LOCK_TIMEOUT": bad})


def test_what_a_lock_file_says_is_shown_printable() -> None:
    holder = Holder.parse("pid=12\nhost=ci\x1b[31m-3\ncommand=matrixgen generate\nsince=x\n")
    assert holder.pid == 12 and "\x1b" not in holder.render()
    assert Holder.parse("garbage").render() == "an unknown process"
