"""Read a file only when it is a regular file, without hanging on a FIFO
(docs/security.md): opened non-blocking, without following a final link, and
checked with fstat on the open descriptor before a byte is read.
Pure: standard library only.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from matrixgen.util.atomic import describe_kind


class NotRegularFile(OSError):
    """The path is a link, directory or special file; `kind` says which."""

    def __init__(self, path: Path, kind: str) -> None:
        super().__init__(errno.EINVAL, f"it is {kind}, not a regular file", str(path))
        self.kind = kind


def read_regular(path: Path, limit: int | None = None) -> bytes | None:
    """The bytes of a regular file; None when nothing is there. NotRegularFile
    for anything else; other OSErrors (permissions) pass through. With `limit`,
    at most limit + 1 bytes are read: more than `limit` says the file is larger."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRegularFile(Path(path), "a symbolic link") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(Path(path), describe_kind(info.st_mode))
        with os.fdopen(fd, "rb", closefd=False) as stream:
            return stream.read(limit + 1 if limit is not None else -1)
    finally:
        os.close(fd)
