"""Writing to a child process's stdin without a deadlock: a write the pipe
holds whole is done at once, a larger one from a thread while the caller reads
the child's answers; closing never fails on a child that stopped reading."""

from __future__ import annotations

import contextlib
import threading
from typing import IO


class _Written:
    """A write that is done (`write_async` needed no thread)."""

    def join(self) -> None:
        pass


def write_async(
    pipe: IO[bytes], data: bytes, *, close: bool = False
) -> threading.Thread | _Written:
    """Write to a child's stdin from a thread (a child that stops reading,
    or exits, is left to the reader to notice). The child has read all that
    was written before: data the pipe holds whole is written at once, no
    thread started (a write into a pipe with room for it never waits)."""

    def write() -> None:
        try:
            pipe.write(data)
            pipe.flush()
            if close:
                pipe.close()
        except (BrokenPipeError, ValueError, OSError):
            pass  # an old git that stopped reading: the reader sees its answers end

    if len(data) <= _pipe_room(pipe):
        write()
        return _Written()
    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def _pipe_room(pipe: IO[bytes]) -> int:
    """The bytes an empty pipe holds (0 where the system does not say)."""
    try:
        import fcntl

        return fcntl.fcntl(pipe.fileno(), fcntl.F_GETPIPE_SZ)  # type: ignore[attr-defined]
    except (ImportError, AttributeError, OSError, ValueError):
        return 0  # not Linux, or not a pipe


def close_quietly(pipe: IO[bytes]) -> None:
    """Close a child's stdin, what is still buffered for it written first; a
    child that exited without reading it (a git before 2.36, at the unknown
    option) is no error: its answers, or their lack, say what happened."""
    if not pipe.closed:
        with contextlib.suppress(BrokenPipeError, OSError, ValueError):
            pipe.close()  # closed even when the write fails
