"""GitLab's hard limits (docs/ci-limits.md), and the one check of each.

Each check returns what is wrong, in words that name the value and the limit,
or None; `emit.limits.refuse` turns it into a LimitError (exit 4).
"""

from __future__ import annotations

# Sizes are bytes of the UTF-8 text; 5 MB is read as 5 * 10**6 to keep a margin.
GITLAB_MAX_NEEDS = 50
GITLAB_MAX_JOB_NAME = 255
GITLAB_MAX_NEEDED_NAME = 128
GITLAB_MAX_CHILD_YAML_BYTES = 5_000_000

# Top-level keys GitLab reads as settings, not jobs: a job keyed so is lost.
GITLAB_GLOBAL_KEYS = frozenset(
    {
        "after_script",
        "before_script",
        "cache",
        "default",
        "image",
        "include",
        "services",
        "spec",
        "stages",
        "variables",
        "workflow",
    }
)
# Those, the old `types`, the YAML words GitLab reads as no name, and `pages`
# (which deploys a site): a job with one of these names would not be a job.
RESERVED_NAMES = GITLAB_GLOBAL_KEYS | {"types", "true", "false", "nil", "pages"}


def reserved_job_name(name: str) -> str | None:
    """Why GitLab would not run a job of this name: a keyword, or hidden."""
    if name in GITLAB_GLOBAL_KEYS or name == "types":
        why = "a GitLab keyword: GitLab reads it as a setting"
    elif name == "pages":
        why = "GitLab's keyword for the job that deploys GitLab Pages"
    elif name in RESERVED_NAMES:
        why = "a YAML word GitLab reads as no name"
    elif name.startswith("."):
        return f'"{name}" starts with a dot: GitLab never runs a hidden job'
    else:
        return None
    return f'"{name}" is {why}, not a job name'


def job_name_length(name: str, whose: str) -> str | None:
    """A GitLab job name past its limit (characters, as GitLab counts)."""
    if len(name) <= GITLAB_MAX_JOB_NAME:
        return None
    return (
        f"the GitLab job name of {whose} is {len(name)} characters "
        f"(at most {GITLAB_MAX_JOB_NAME}): {name[:80]}..."
    )


def needed_name_length(name: str, what: str) -> str | None:
    """A job named in `needs` past GitLab's shorter limit for those."""
    if len(name) <= GITLAB_MAX_NEEDED_NAME:
        return None
    return (
        f"{what} {name[:80]}... is {len(name)} characters: a job named in `needs` "
        f"may have at most {GITLAB_MAX_NEEDED_NAME}"
    )


def needs_count(name: str, count: int) -> str | None:
    if count <= GITLAB_MAX_NEEDS:
        return None
    return f"job {name} would need {count} jobs (at most {GITLAB_MAX_NEEDS})"


def child_pipeline_size(size: int, what: str) -> str | None:
    """A child pipeline's YAML, in bytes, past what GitLab accepts."""
    if size <= GITLAB_MAX_CHILD_YAML_BYTES:
        return None
    return (
        f"the child pipeline of {what} is {size:,} bytes; GitLab accepts "
        f"at most {GITLAB_MAX_CHILD_YAML_BYTES:,}: split the target (by model or tag)"
    )
