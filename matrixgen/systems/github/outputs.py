"""GitHub's step outputs: `name<<DELIM` blocks appended to $GITHUB_OUTPUT.

The home's `outputs` part: `generate --github-output`, `github --github-output`
and `decide --github-output` find it through `emit.registry.step_outputs`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from matrixgen.model.errors import LimitError, UsageError, write_failure
from matrixgen.systems.ci import ci_value
from matrixgen.systems.github.emitter import compact as compact
from matrixgen.systems.github.emitter import shard_outputs as shard_outputs
from matrixgen.systems.github.limits import output_size
from matrixgen.util.atomic import WriteError, append_whole


def heredoc_delimiter(content: str) -> str:
    """A delimiter no line of `content` equals: derived from the content, so the
    same content always gets the same delimiter, and re-derived on the (absurdly
    unlikely) chance that some line equals it."""
    lines = set(content.splitlines())
    salt = 0
    while True:
        raw = f"{salt}\0{content}".encode("utf-8", "surrogatepass")
        digest = hashlib.sha256(raw).hexdigest()[:32]
        delimiter = f"ghadelimiter_{digest}"
        if delimiter not in lines:
            return delimiter
        salt += 1


def github_output_text(outputs: Sequence[tuple[str, str]]) -> str:
    """`name<<DELIM` / value / `DELIM` blocks, the multi-line form of $GITHUB_OUTPUT."""
    delimited = ((name, value, heredoc_delimiter(value)) for name, value in outputs)
    return "".join(f"{name}<<{end}\n{value}\n{end}\n" for name, value, end in delimited)


def github_output_path(path: str | None = None) -> str:
    """`path`, else $GITHUB_OUTPUT; a UsageError outside GitHub Actions."""
    target = path or ci_value("step_outputs")
    if not target:
        raise UsageError("--github-output: GITHUB_OUTPUT is not set (it is, inside GitHub Actions)")
    return target


def check_github_outputs(outputs: Sequence[tuple[str, str]]) -> None:
    """A LimitError when the outputs would not fit in one job's outputs."""
    total = sum(len(value.encode("utf-8")) for _, value in outputs)
    problem = output_size(total, "the outputs")
    if problem is not None:
        raise LimitError(
            f"{problem}: split the target (by model or tag) or write a file "
            "with --output and read it in several jobs"
        )


def append_github_outputs(outputs: Sequence[tuple[str, str]], path: str | None = None) -> Path:
    """Append step outputs to $GITHUB_OUTPUT (or `path`); past a job's output
    limit, a LimitError and nothing written."""
    target = github_output_path(path)
    check_github_outputs(outputs)
    try:
        # Appending is the protocol of $GITHUB_OUTPUT: one write, cut back on failure.
        append_whole(Path(target), github_output_text(outputs).encode("utf-8"))
    except WriteError as exc:
        raise write_failure(f"--github-output: {exc.message}", exc.errno) from None
    return Path(target)


# What `emit.registry.step_outputs` gives the commands that write step outputs.
text = github_output_text
path = github_output_path
check = check_github_outputs
append = append_github_outputs
