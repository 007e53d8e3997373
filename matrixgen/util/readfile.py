"""Read a file only when it is a regular file, without hanging on a FIFO.

The file is opened non-blocking and without following a final symbolic link,
then checked with fstat on the open descriptor: a directory, a FIFO, a device
(`/dev/null` through a link) or a socket is refused with `NotRegularFile`
before a byte is read.

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


def read_regular(path: Path) -> bytes | None:
    """The bytes of a regular file; None when nothing is there. NotRegularFile
    for anything else; other OSErrors (permissions) pass through."""
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
        chunks = []
        while True:
            chunk = os.read(fd, max(info.st_size, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
