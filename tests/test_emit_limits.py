"""Each CI limit (each home's `systems/<name>/limits`) on both sides: the last value the
system takes passes, one more is refused, with GitHub's and GitLab's own
numbers written here rather than read from the constants they check."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from matrixgen.systems.github import limits as github
from matrixgen.systems.gitlab import limits as gitlab


@pytest.mark.parametrize(
    ("check", "largest", "said"),
    [
        (lambda n: gitlab.job_name_length("j" * n, "job j"), 255, "(at most 255)"),
        (lambda n: gitlab.needed_name_length("n" * n, "job"), 128, "may have at most 128"),
        (lambda n: gitlab.needs_count("w", n), 50, "would need 51 jobs (at most 50)"),
        (lambda n: gitlab.child_pipeline_size(n, "t"), 5_000_000, "at most 5,000,000"),
        (lambda n: github.matrix_rows(n, "t"), 256, "t has 257 rows"),
        (lambda n: github.output_size(n, "outputs"), 1_000_000, "at most 1,000,000"),
    ],
)
def test_each_limit_takes_its_last_value_and_refuses_the_next(
    check: Callable[[int], str | None], largest: int, said: str
) -> None:
    assert check(largest) is None
    refused = check(largest + 1)
    assert refused is not None and said in refused
