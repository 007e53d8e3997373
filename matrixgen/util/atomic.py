"""Write files whole, never through a symbolic link (docs/security.md#output-files).

A destination that is a link, a directory or a special file is refused
(`WriteError`) and left as it was; a temporary file left by a writer that is
gone is removed by the next write. `append_whole` is for files whose protocol
is appending ($GITHUB_OUTPUT): one write, cut back on failure.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
import tempfile
import time
from functools import cache
from pathlib import Path

from matrixgen.util.patterns import name_pattern, whole

STALE_AFTER_SECONDS = 3600.0
TEMP_SUFFIX = ".tmp"


class Refusal(Exception):
    """`message` names the file and why; `errno` is the OS error number when the
    OS refused (ENOSPC, EACCES, ...)."""

    def __init__(self, message: str, *, errno: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.errno = errno


class WriteError(Refusal):
    """A file could not be written (safely)."""


def default_mode() -> int:
    """The mode a new file gets: what `open(..., "w")` would give it (the umask
    read without changing it where the OS allows)."""
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status") as status:
        for line in status:
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
)


def describe_kind(mode: int) -> str:
    """'a directory', 'a FIFO', ... for a stat mode that is not a regular file."""
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def check_destination(path: Path) -> None:
    """WriteError when the destination is a link, a directory or another special
    file, or its folder is missing (a destination not there yet is fine)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except NotADirectoryError:
        raise WriteError(f"cannot write {path}: a folder above it is a file") from None
    except OSError as exc:
        raise WriteError(f"cannot write {path}: {exc.strerror}", errno=exc.errno) from None
    if stat.S_ISLNK(info.st_mode):
        raise WriteError(
            f"refusing to write {path}: it is a symbolic link (to {os.readlink(path)!r}); "
            "matrixgen never writes through links: remove the link or write elsewhere"
        )
    if not stat.S_ISREG(info.st_mode):
        raise WriteError(f"cannot write {path}: it is {describe_kind(info.st_mode)}, not a file")


@cache
def host_tag() -> str:
    """This host in temporary names (pids mean something only here); the node
    name is gethostname()'s, read without importing socket."""
    return hashlib.sha1(os.uname().nodename.encode("utf-8", "replace")).hexdigest()[:8]


def write_atomic(path: Path, data: bytes, *, mode: int | None = None, sync: bool = True) -> None:
    """Replace `path` with `data` whole; `mode` for a new file, else as `open` gives it."""
    path = Path(path)
    check_destination(path)
    directory = path.parent
    remove_stale_temps(directory, path.name)
    try:
        fd, tmp = tempfile.mkstemp(
            dir=directory,
            prefix=f".{path.name}.{os.getpid()}@{host_tag()}.",
            suffix=TEMP_SUFFIX,
        )
    except OSError as exc:
        raise WriteError(
            f"cannot write {path}: cannot create a file in {directory}: {exc.strerror}",
            errno=exc.errno,
        ) from None
    try:
        try:
            os.fchmod(fd, default_mode() if mode is None else mode)
            _write_all(fd, data)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise WriteError(
            f"cannot write {path}: {exc.strerror} (the old file, if any, is unchanged)",
            errno=exc.errno,
        ) from None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _writer_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass  # someone else's running process
    return True


# What follows `.NAME.` in a temporary file's name: ours (pid, host tag, random
# part), or the bare random part of an older writer's.
_TEMP_TAIL = name_pattern(r"(?:(\d+)@([0-9a-f]{8})\.)?[a-z0-9_]{8}\.tmp")


def is_stale_temp(
    entry: str, name: str, info: os.stat_result, *, every: bool = False, now: float | None = None
) -> bool:
    """Whether `entry` is a temporary file of `name` left by a writer that is gone
    (or any of ours, with `every`: the caller's lock excludes writers)."""
    prefix = f".{name}."
    if not entry.startswith(prefix):
        return False
    tail = whole(_TEMP_TAIL, entry[len(prefix) :])
    if tail is None:
        return False
    now = time.time() if now is None else now
    if every or now - info.st_mtime > STALE_AFTER_SECONDS:
        return True
    pid_text, tag = tail.group(1), tail.group(2)
    if pid_text is None or tag != host_tag():
        return False  # an older writer's or another host's: only its age tells
    pid = int(pid_text)
    return pid != os.getpid() and not _writer_alive(pid)


def remove_stale_temps(directory: Path, name: str, *, every: bool = False) -> list[str]:
    """Remove the stale temporary files of `name` (`is_stale_temp`); the names
    removed. Never fails on what it cannot remove."""
    prefix = f".{name}."
    removed: list[str] = []
    try:
        entries = os.listdir(directory)
    except OSError:
        return removed
    now = time.time()
    for entry in sorted(entries):
        if not entry.startswith(prefix):
            continue
        full = os.path.join(directory, entry)
        try:
            info = os.lstat(full)
        except OSError:
            continue
        if not stat.S_ISREG(info.st_mode):
            continue  # not a file we made
        if is_stale_temp(entry, name, info, every=every, now=now):
            with contextlib.suppress(OSError):
                os.unlink(full)
                removed.append(entry)
    return removed


def append_whole(path: Path, data: bytes) -> None:
    """Append `data` to a regular file (created when missing), in one write; a
    newline first when an earlier writer left its last line open. A failed write
    (a full disk) is cut back, so what was there survives whole."""
    path = Path(path)
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
    flags |= getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise WriteError(
                f"refusing to append to {path}: it is a symbolic link; "
                "matrixgen never writes through links"
            ) from None
        if exc.errno == errno.ENXIO:
            raise WriteError(f"cannot append to {path}: it is a FIFO, not a file") from None
        raise WriteError(f"cannot append to {path}: {exc.strerror}", errno=exc.errno) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise WriteError(
                f"cannot append to {path}: it is {describe_kind(info.st_mode)}, not a file"
            )
        size = info.st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        try:
            _write_all(fd, data)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            raise WriteError(
                f"cannot append to {path}: {exc.strerror} (the file is as it was)",
                errno=exc.errno,
            ) from None
    finally:
        os.close(fd)
