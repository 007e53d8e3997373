"""The building blocks of the documents' declarations: schema patterns, word
types, `Section` and `SystemSettings`. They sit with the values because a target
(`model.jobs.Target`) carries its system's settings.
"""

# Annotations are evaluated where they are written (no `from __future__ import
# annotations`): the targets of each system are made from the settings' fields.
from collections.abc import Mapping
from typing import Annotated, ClassVar, Literal

from msgspec import Meta, Struct

from matrixgen.systems import step_output_option

# The end of a name in both Python (`$` alone also takes a final line break) and
# JavaScript: every anchored pattern of the schemas ends so (docs/security.md, names).
END = "$(?!\\n)"
# A character blank to neither Python nor JavaScript, as the schemas write it.
NON_BLANK = "[^\\s\\x1c-\\x1f\\x85\\ufeff]"


def whole(body: str) -> str:
    """A schema pattern that `body` must match whole, in Python and JavaScript alike."""
    return f"^{body}{END}"


# A name of the vocabulary, an image or a version: one or more characters that
# are blank to neither Python nor JavaScript.
Word = Annotated[str, Meta(pattern=whole(f"{NON_BLANK}+"))]
Name = Annotated[str, Meta(min_length=1, pattern=whole(f"{NON_BLANK}+"))]
Names = Annotated[frozenset[Name], Meta(min_length=1)]
Unique = Meta(extra_json_schema={"uniqueItems": True})
Scopes = Annotated[tuple[Name, ...], Unique, Meta(min_length=1)]
Text = Annotated[str, Meta(min_length=1)]
Texts = Annotated[tuple[Text, ...], Meta(min_length=1)]
# A key a command names (a target, a pin, a reference): what GitHub and GitLab take;
# short enough that a target's file, and its temporary twin, have a name a file can.
Key = Annotated[str, Meta(pattern=whole("[A-Za-z0-9][A-Za-z0-9_.-]*"), max_length=200)]
EnvName = Annotated[str, Meta(pattern=whole("[A-Za-z_][A-Za-z0-9_]*"))]
Positive = Annotated[int, Meta(ge=1)]
Url = Annotated[str, Meta(pattern=whole(f"https?://{NON_BLANK}+"))]
Arch = Literal["amd64", "arm64"]
Retries = Annotated[int, Meta(ge=0, le=2)]  # GitLab's most retries of a job
RetryReason = Literal[
    "always", "unknown_failure", "script_failure", "api_failure", "stuck_or_timeout_failure",
    "runner_system_failure", "runner_unsupported", "stale_schedule", "job_execution_timeout",
    "archived_failure", "unmet_prerequisites", "scheduler_failure", "data_integrity_failure",
]  # fmt: skip


class Section(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """A mapping of the config whose keys are its fields (no other key is read)."""


class SystemSettings(Section, frozen=True, kw_only=True):
    """Settings every CI system's targets take; each system's class adds its own."""

    image: Word | None = None
    runner_tags: Annotated[tuple[Text, ...], Unique] | None = None
    timeout_overhead: Annotated[int, Meta(ge=0)] | None = None
    timeout_cap: Positive | None = None
    group: Annotated[str, Meta(pattern=whole("[A-Za-z_][A-Za-z0-9_-]*"))] | None = None
    timeout: Positive | None = None

    DESCRIPTIONS: ClassVar[Mapping[str, str]] = {
        "image": "Container image as repository:tag; without it the pin in images.<system> (per "
        "platforms.<p>.arch for GitLab) is used.",
        "runner_tags": "Runner tags (GitLab tags; GitHub runs-on labels, as the row's runner). "
        "Default: platforms.<p>.runner_tags.",
        "timeout_overhead": "Seconds added to each job's derived timeout (n_repeat x time_limit) "
        "for setup and image pull. Default 0.",
        "timeout_cap": "The longest timeout a job of this system may have, in seconds "
        "(GitHub-hosted runners: 21600); `matrixgen validate` reports a job whose timeout "
        "exceeds it.",
        "group": f"The output name `generate {step_output_option()}` writes this target's "
        "matrix under (default: the target's name); the targets a decision derives from it "
        "keep it.",
        "timeout": "Job timeout in seconds for every job of the target, whatever its work; "
        "default: each job's n_repeat x time_limit plus timeout_overhead (a recipe's own "
        "spec.timeout wins over that).",
    }
