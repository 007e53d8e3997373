"""Exclusive lock files that time out and name their holder.

`hold(path)` takes an exclusive flock on `path` (never through a link) and
writes who holds it; a second process polls up to the timeout
(`MATRIXGEN_LOCK_TIMEOUT`), then gives up with `LockTimeout` naming the holder.
A file left by a killed holder is no lock (the kernel released its flock).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import os
import stat
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from msgspec import Struct

from matrixgen.util.atomic import Refusal

DEFAULT_TIMEOUT = 30.0
TIMEOUT_VARIABLE = "MATRIXGEN_LOCK_TIMEOUT"
_POLL_FIRST, _POLL_MAX = 0.02, 0.25


class LockError(Refusal):
    """The lock file cannot be created or used."""


class Holder(Struct, frozen=True):
    """Who holds a lock, as its lock file says (any field may be unknown)."""

    pid: int | None = None
    host: str | None = None
    command: str | None = None
    since: str | None = None

    @classmethod
    def parse(cls, text: str) -> Holder:
        fields: dict[str, str] = {}
        for line in text.splitlines()[:8]:
            key, sep, value = line.partition("=")
            if sep and key in cls.__struct_fields__:
                # What the file says is shown in a message: keep it printable and short.
                fields[key] = "".join(c if c.isprintable() else "?" for c in value)[:200]
        pid = fields.pop("pid", "")
        return cls(pid=int(pid) if pid.isdigit() else None, **fields)

    def render(self) -> str:
        """'matrixgen quarantine add (pid 12, host ci-3, since ...)', or 'an unknown process'."""
        said = (("pid", self.pid), ("host", self.host), ("since", self.since))
        details = [f"{what} {value}" for what, value in said if value not in (None, "")]
        who = self.command or ("a process" if details else "an unknown process")
        return f"{who} ({', '.join(details)})" if details else who

    def text(self) -> str:
        return f"pid={self.pid}\nhost={self.host}\ncommand={self.command}\nsince={self.since}\n"


class LockTimeout(LockError):
    """Waited `timeout` seconds for a lock that `holder` still holds."""

    def __init__(self, path: Path, holder: Holder, timeout: float) -> None:
        self.path, self.holder, self.timeout = path, holder, timeout
        super().__init__(
            f"{path} is held by {holder.render()}; gave up after {timeout:g} s "
            f"(set {TIMEOUT_VARIABLE} to wait longer)"
        )


def timeout_from_env(environ: Mapping[str, str] | None = None) -> float:
    """The lock wait in seconds; ValueError for a value that is not one."""
    environ = os.environ if environ is None else environ
    text = environ.get(TIMEOUT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise ValueError(
            f"{TIMEOUT_VARIABLE}={text!r}: give the seconds to wait for a lock "
            f"(a number, 0 or more; default {DEFAULT_TIMEOUT:g})"
        )
    return value


def current_command() -> str:
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
    words = [name, *sys.argv[1:3]]
    return " ".join(w for w in words if w and not w.startswith("-"))[:120]


def _open(path: Path) -> int:
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LockError(f"cannot lock {path}: it is a symbolic link") from None
        raise LockError(
            f"cannot create the lock file {path}: {exc.strerror}", errno=exc.errno
        ) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise LockError(f"cannot lock {path}: it is not a regular file")
    return fd


@contextlib.contextmanager
def hold(
    path: Path, *, timeout: float | None = None, command: str | None = None
) -> Iterator[Holder]:
    """Hold the lock file `path` for the duration of the block."""
    import fcntl

    path = Path(path)
    timeout = timeout_from_env() if timeout is None else timeout
    deadline = time.monotonic() + timeout
    pause = _POLL_FIRST
    while True:
        fd = _open(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = Holder()
            with contextlib.suppress(OSError):
                holder = Holder.parse(os.pread(fd, 2048, 0).decode("utf-8", "replace"))
            os.close(fd)
            left = deadline - time.monotonic()
            if left <= 0:
                raise LockTimeout(path, holder, timeout) from None
            time.sleep(min(pause, left))
            pause = min(pause * 2, _POLL_MAX)
            continue
        except OSError as exc:
            os.close(fd)
            raise LockError(f"cannot lock {path}: {exc.strerror}", errno=exc.errno) from None
        # The previous holder removes the file as it lets go: a lock taken on a
        # file that is no longer at `path` is no lock; take the new one.
        try:
            same = os.fstat(fd).st_ino == os.lstat(path).st_ino
        except OSError:
            same = False
        if same:
            break
        os.close(fd)
    me = Holder(
        pid=os.getpid(),
        host=os.uname().nodename,  # gethostname(), without importing socket
        command=command or current_command(),
        since=dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    try:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, me.text().encode("utf-8", "replace"), 0)
        yield me
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
        os.close(fd)  # closing releases the lock
