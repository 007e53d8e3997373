"""Standard output and error, wrapped for the run: no printed line can carry a
command to the CI log reading it, and a closed or full stream ends the run with
one clear line instead of a traceback (docs/security.md). Fields are escaped where
a line is composed; the wrapper checks every whole line. Our own GitHub
annotations are the only lines written past the check (`write_annotations`)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from matrixgen.util.escape import terminal_lines, terminal_text


class StreamError(Exception):
    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"cannot write to standard {name}: {reason}")


def _reason(exc: OSError) -> str:
    import errno

    if isinstance(exc, BrokenPipeError) or exc.errno == errno.EPIPE:
        return "it was closed before everything was written (broken pipe)"
    return exc.strerror or str(exc)


class GuardedStream:
    """A text stream in front of sys.stdout or sys.stderr (see the module doc): it
    holds back a line until its end is written, so that the check sees whole lines."""

    def __init__(self, target: TextIO | None, name: str, *, fatal: bool = True) -> None:
        self._target = target
        self.name = name
        self.fatal = fatal  # raise on the first failure (stdout), or only record it
        self._pending = ""
        self.error: StreamError | None = None

    # What click looks at before writing to a stream.
    @property
    def encoding(self) -> str:
        return getattr(self._target, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str:
        return getattr(self._target, "errors", None) or "strict"

    def isatty(self) -> bool:
        try:
            return bool(self._target is not None and self._target.isatty())
        except (OSError, ValueError):
            return False

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    @property
    def closed(self) -> bool:
        return False

    def fileno(self) -> int:
        if self._target is None:
            raise OSError("standard stream is closed")
        return self._target.fileno()

    def write(self, text: str) -> int:
        if not isinstance(text, str):  # a text stream (click probes with b"")
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if not text:
            return 0
        data = self._pending + text
        head, newline, tail = data.rpartition("\n")
        self._pending = tail
        if newline:
            self._send(terminal_lines(head) + "\n")
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def write_trusted(self, text: str) -> None:
        """Text of our own making that must reach the stream as it is (workflow
        commands), after anything held back."""
        self.finish()
        self._send(text)
        self.flush()

    def flush(self) -> None:
        if self._target is not None and self.error is None:
            try:
                self._target.flush()
            except OSError as exc:
                self._fail(exc)
            except ValueError:  # closed under us
                self._fail(OSError("the stream was closed"))

    def finish(self) -> None:  # a last line that has no line break yet
        if self._pending:
            pending, self._pending = self._pending, ""
            self._send(terminal_lines(pending))

    def _send(self, text: str) -> None:
        if self.error is not None:
            return  # said once; the rest is lost with the stream
        if self._target is None:
            self._fail(OSError("it is closed"))
            return
        try:
            try:
                self._target.write(text)
            except UnicodeEncodeError:
                encoding = self.encoding
                self._target.write(text.encode(encoding, "backslashreplace").decode(encoding))
        except OSError as exc:
            self._fail(exc)
        except ValueError:
            self._fail(OSError("it is closed"))

    def _fail(self, exc: OSError) -> None:
        self.error = StreamError(self.name, _reason(exc) if exc.errno else str(exc))
        _silence(self._target)
        if self.fatal:
            raise self.error


def _silence(stream: TextIO | None) -> None:
    """Point a failed stream's descriptor at /dev/null: what is still buffered
    in it would fail again when Python exits, with a message of its own."""
    if stream is None:
        return
    try:
        fd = stream.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, fd)
        finally:
            os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


@contextlib.contextmanager
def guarded_output() -> Iterator[tuple[GuardedStream, GuardedStream]]:
    saved = sys.stdout, sys.stderr
    # Output is what the command is for: losing it ends the run (exit 9). Losing
    # diagnostics does not stop the work; the exit code still tells the outcome.
    out = GuardedStream(sys.stdout, "output")
    err = GuardedStream(sys.stderr, "error", fatal=False)
    sys.stdout, sys.stderr = out, err  # type: ignore[assignment]
    try:
        yield out, err
    finally:
        sys.stdout, sys.stderr = saved
        for stream in (out, err):
            with contextlib.suppress(StreamError):
                stream.finish()
                stream.flush()


def describe_os_error(exc: OSError) -> str:
    reason = exc.strerror or str(exc)
    names = [n for n in (exc.filename, exc.filename2) if n is not None]
    where = " -> ".join(terminal_text(os.fsdecode(n)) for n in names)
    return f"{where}: {reason}" if where else f"{reason}"


def check_working_directory() -> None:
    """Refuse to start in a working directory that was deleted: every relative
    path (the default recipes/ among them) would fail later, one by one."""
    from matrixgen.model.errors import EnvironmentFault

    try:
        os.getcwd()
    except FileNotFoundError:
        raise EnvironmentFault(
            "the working directory does not exist any more (deleted?): "
            "cd to an existing directory and run again"
        ) from None
    except PermissionError:
        raise EnvironmentFault(
            "the working directory cannot be read (permission denied): "
            "cd to a directory you can read"
        ) from None


def write_annotations(lines: list[str]) -> None:
    """Workflow commands of our own making, to standard error as they are."""
    if not lines:
        return
    text = "\n".join(lines) + "\n"
    stream = sys.stderr
    if isinstance(stream, GuardedStream):
        stream.write_trusted(text)
    elif stream is not None:
        stream.write(text)
        stream.flush()
